// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketException;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.VerbsException;

/**
 * Issue 16 item 10: the provider's RoCE devices bind their addresses when their first QP is created, so
 * a process binds only the devices it uses. Until then the device answers every query as it will once
 * bound; a device another process (here: another fabric) uses fails the QP with EADDRINUSE naming it.
 */
class SoftRoceBindOnFirstQpTest {
    private static boolean canBind(InetAddress a, int port) {
        try {
            new DatagramSocket(new InetSocketAddress(a, port)).close();
            return true;
        } catch (SocketException e) {
            return false;
        }
    }

    @Test
    void queriesNeedNoSocketAndTheFirstQpBinds() throws Exception {
        int port = SoftRoceTestFabric.freeUdpPort();
        InetAddress lo = InetAddress.ofLiteral("127.0.0.1");
        RoceConfig config = new RoceConfig(List.of(lo), port, null);
        try (SoftFabric bound = new SoftFabric(new ManualClock());
             SoftFabric lazy = new SoftFabric(new ManualClock())) {
            SoftDevice d = lazy.addRoceDeviceBoundOnFirstQp("rxe0", config);
            assertTrue(canBind(lo, port), "nothing is bound before the first QP");
            try (Context c = d.open(); ProtectionDomain pd = c.allocPd();
                 CompletionQueue cq = c.createCq(4, null, 0)) {
                assertEquals("rxe", d.providerName());
                assertEquals(org.rdma4j.verbs.Gid.ofInetAddress(lo), c.queryGid(1, 0));
                assertEquals(1, c.queryPort(1).gidTblLen());
                assertTrue(canBind(lo, port), "open, query, PD and CQ bind nothing");
                assertEquals(null, lazy.deviceFor(org.rdma4j.verbs.Gid.ofInetAddress(lo)),
                        "an unbound device is no destination of its fabric: its address may be another process's");

                // what a bound device would say
                try (SoftFabric ref = new SoftFabric(new ManualClock())) {
                    SoftDevice r = ref.addRoceDevice("rxe0", new RoceConfig(List.of(lo),
                            SoftRoceTestFabric.freeUdpPort(), null));
                    assertEquals(r.guid(), d.guid());
                    try (Context rc = r.open()) {
                        assertEquals(rc.queryPort(1).activeMtu(), c.queryPort(1).activeMtu());
                        assertEquals(rc.queryGid(1, 0), c.queryGid(1, 0));
                    }
                }

                try (QueuePair qp = pd.createQp(new QpInitAttributes().sendCq(cq).recvCq(cq))) {
                    assertTrue(!canBind(lo, port), "the first QP (0x" + Integer.toHexString(qp.qpNum()) + ") bound the address");
                    assertEquals(d, lazy.deviceFor(org.rdma4j.verbs.Gid.ofInetAddress(lo)));
                }

                // another user of the same address and port is refused, naming the device
                SoftDevice other = bound.addRoceDeviceBoundOnFirstQp("rxe0", config);
                try (Context oc = other.open(); ProtectionDomain opd = oc.allocPd();
                     CompletionQueue ocq = oc.createCq(4, null, 0)) {
                    VerbsException e = assertThrows(VerbsException.class,
                            () -> opd.createQp(new QpInitAttributes().sendCq(ocq).recvCq(ocq)));
                    assertEquals(Errno.EADDRINUSE, e.errno(), e.getMessage());
                    assertTrue(e.getMessage().contains("rxe0") && e.getMessage().contains("another process"),
                            e.getMessage());
                }
            }
        }
    }
}
