// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.io.IOException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.List;

import org.rdma4j.common.ManualClock;

/**
 * The conformance fixture over RoCEv2: two hosts (two {@link SoftFabric}s, so no in-process shortcut)
 * with one RoCE device each, bound to 127.0.0.1 and 127.0.0.2 on a free UDP port, on a shared manual
 * clock. Device 0 and 1 reach each other only through UDP sockets.
 */
final class SoftRoceTestFabric extends SoftDevicesFixture {
    private final SoftFabric hostA;
    private final SoftFabric hostB;

    SoftRoceTestFabric(ManualClock clock) {
        this(clock, freeUdpPort());
    }

    /** @param port the UDP port both devices bind and send to */
    SoftRoceTestFabric(ManualClock clock, int port) {
        SoftFabric a = new SoftFabric(clock);
        SoftFabric b = new SoftFabric(clock);
        super(clock,
                a.addRoceDevice("rxe0", new RoceConfig(List.of(InetAddress.ofLiteral("127.0.0.1")), port, null)),
                b.addRoceDevice("rxe1", new RoceConfig(List.of(InetAddress.ofLiteral("127.0.0.2")), port, null)));
        this.hostA = a;
        this.hostB = b;
    }

    /** A UDP port free on both loopback addresses at the time of the call. */
    static int freeUdpPort() {
        for (int attempt = 0; attempt < 50; attempt++) {
            try (DatagramSocket a = new DatagramSocket(new InetSocketAddress("127.0.0.1", 0))) {
                int p = a.getLocalPort();
                try {
                    new DatagramSocket(new InetSocketAddress("127.0.0.2", p)).close(); // free on the second address too
                    return p;
                } catch (IOException busy) {
                    // try another
                }
            } catch (IOException e) {
                throw new IllegalStateException("no UDP port on loopback", e);
            }
        }
        throw new IllegalStateException("no UDP port free on both 127.0.0.1 and 127.0.0.2");
    }

    @Override
    public void close() {
        hostA.close();
        hostB.close();
    }
}
