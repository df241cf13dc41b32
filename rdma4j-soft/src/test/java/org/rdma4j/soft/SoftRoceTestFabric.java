package org.rdma4j.soft;

import java.io.IOException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.List;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.PortState;

/**
 * The conformance fixture over RoCEv2: two hosts (two {@link SoftFabric}s, so no in-process shortcut)
 * with one RoCE device each, bound to 127.0.0.1 and 127.0.0.2 on a free UDP port, on a shared manual
 * clock. Device 0 and 1 reach each other only through UDP sockets.
 */
final class SoftRoceTestFabric implements Fabric {
    private final ManualClock clock;
    private final SoftFabric hostA;
    private final SoftFabric hostB;
    private final SoftDevice[] devices;

    SoftRoceTestFabric(ManualClock clock) {
        this(clock, freeUdpPort());
    }

    /** @param port the UDP port both devices bind and send to */
    SoftRoceTestFabric(ManualClock clock, int port) {
        this.clock = clock;
        this.hostA = new SoftFabric(clock);
        this.hostB = new SoftFabric(clock);
        try {
            this.devices = new SoftDevice[] {
                hostA.addRoceDevice("rxe0", new RoceConfig(List.of(InetAddress.getByName("127.0.0.1")), port, null)),
                hostB.addRoceDevice("rxe1", new RoceConfig(List.of(InetAddress.getByName("127.0.0.2")), port, null))};
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** A UDP port free on both loopback addresses at the time of the call. */
    static int freeUdpPort() {
        for (int attempt = 0; attempt < 50; attempt++) {
            try (DatagramSocket a = new DatagramSocket(new InetSocketAddress("127.0.0.1", 0))) {
                int p = a.getLocalPort();
                try (DatagramSocket b = new DatagramSocket(new InetSocketAddress("127.0.0.2", p))) {
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
    public Device device(int index) {
        return devices[index];
    }

    @Override
    public int deviceCount() {
        return devices.length;
    }

    @Override
    public ManualClock clock() {
        return clock;
    }

    @Override
    public void setPortState(int deviceIndex, int port, boolean active) {
        devices[deviceIndex].setPortState(port, active ? PortState.ACTIVE : PortState.DOWN);
    }

    @Override
    public void close() {
        hostA.close();
        hostB.close();
    }
}
