// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
import org.rdma4j.soft.RoceConfig;
import org.rdma4j.soft.SoftDevice;
import org.rdma4j.soft.SoftFabric;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * Two configured RoCE devices of one host (bound on first use): starting the CM takes neither; a CM ID bound
 * to one address takes that device only, so another process can still serve the other; a device another
 * process holds is an error naming it for an explicit bind, and is skipped by a wildcard listen.
 */
class UserCmOnDemandTest {
    @SuppressWarnings("try") // the socket only proves the address and port are free
    private static boolean free(String ip, int port) {
        try (DatagramSocket s = new DatagramSocket(new InetSocketAddress(ip, port))) {
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    @Test
    @SuppressWarnings("try") // 'other' stands for another process holding rxeB's address
    void opensQp1OfADeviceOnlyWhenAnIdUsesIt() throws IOException {
        int port = SoftCmFabric.freeUdpPort();
        ManualClock clock = new ManualClock();
        try (SoftFabric f = new SoftFabric(clock)) {
            SoftDevice a = f.addRoceDeviceBoundOnFirstQp("rxeA", new RoceConfig(List.of(InetAddress.ofLiteral("127.0.0.1")), port, null));
            SoftDevice b = f.addRoceDeviceBoundOnFirstQp("rxeB", new RoceConfig(List.of(InetAddress.ofLiteral("127.0.0.2")), port, null));
            try (UserCm cm = UserCm.builder().device(a).device(b).clock(clock).driven(true).build();
                 CmEventChannel ch = RdmaCm.of(cm).createEventChannel()) {
                assertEquals(true, free("127.0.0.1", port), "starting the CM binds no device");
                assertEquals(true, free("127.0.0.2", port), "starting the CM binds no device");
                CmId id = ch.createId(PortSpace.TCP);
                id.bindAddr(new InetSocketAddress("127.0.0.1", 7471));
                id.listen(1);
                assertEquals(false, free("127.0.0.1", port), "the bound device serves its address");
                assertEquals(true, free("127.0.0.2", port), "the other device is left to another process");
                try (DatagramSocket other = new DatagramSocket(new InetSocketAddress("127.0.0.2", port))) {
                    // another process holds rxeB: an explicit bind names it, a wildcard listen skips it
                    CmId onB = ch.createId(PortSpace.TCP);
                    VerbsException e = assertThrows(VerbsException.class, () -> onB.bindAddr(new InetSocketAddress("127.0.0.2", 7471)));
                    assertEquals(Errno.EADDRINUSE, e.errno(), e.getMessage());
                    assertEquals(true, e.getMessage().contains("rxeB"), e.getMessage());
                    CmId any = ch.createId(PortSpace.TCP);
                    any.bindAddr(new InetSocketAddress(InetAddress.ofLiteral("0.0.0.0"), 7472));
                    any.listen(1);
                    any.close();
                    onB.close();
                }
                id.close();
            }
        }
    }
}
