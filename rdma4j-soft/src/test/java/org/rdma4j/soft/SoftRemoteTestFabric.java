// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.io.DataInputStream;
import java.lang.foreign.Arena;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;

import org.rdma4j.common.ManualClock;
import org.rdma4j.dma.DmaChecker;
import org.rdma4j.dma.DmaConfig;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.PortState;

/**
 * The conformance fixture across two processes: device A is a RoCE {@link SoftDevice} on 127.0.0.1 in this
 * JVM, device B a RoCE SoftDevice on 127.0.0.2 in the child JVM of {@link RemotePeer}, with its own engine,
 * timers and UDP socket; the two meet only through RoCEv2 over UDP between the processes. The test drives B
 * through {@link RemoteVerbs} proxies. Buffers come from memory shared with the child at the same address
 * ({@link #bufferArena()}), and every advance of the test's {@link ManualClock} is forwarded to B's clock
 * before {@code advance} returns, so timer-driven tests mean the same as in one process.
 *
 * <p>A module with a CM opens one on device B ({@link #openCm}: the provider runs in the child, the CM API's
 * front here), and one of its own on {@link #localDevice()}.
 */
@SuppressWarnings("exports") // Fabric is testkit's, on the test class path: this class is shared with other modules' tests
public final class SoftRemoteTestFabric implements Fabric {
    private final ManualClock clock;
    private final RemotePeer peer;
    private final SoftFabric hostA;
    private final SoftDevice deviceA;
    private final Device deviceB;
    private final RemoteVerbs verbs;
    private final List<RemoteCm> cms = new ArrayList<>();
    private final int remoteFabric;
    private final int remoteDevice;
    private final ManualClock.Listener forward;
    private boolean closed;

    /**
     * Starts the remote peer if none runs, opens device B in it and device A here.
     *
     * @param clock the test's clock; its advances reach device B (and a CM on it) before they return
     */
    public SoftRemoteTestFabric(ManualClock clock) {
        this(clock, null);
    }

    /**
     * Starts the remote peer if none runs, opens device B in it and device A here, both reaching memory as
     * {@code dma} says. With a checker on, {@link #close()} fails if either device's checker reported misuse.
     *
     * @param clock the test's clock; its advances reach device B (and a CM on it) before they return
     * @param dma   both devices' DMA configuration, or null for the {@code rdma4j.soft.dma} properties (which
     *              the child gets too)
     */
    public SoftRemoteTestFabric(ManualClock clock, DmaConfig dma) {
        this.clock = clock;
        this.peer = RemotePeer.shared();
        int port = SoftRoceTestFabric.freeUdpPort();
        int[] handles = new int[2];
        String[] name = new String[2];
        long[] guid = new long[1];
        peer.call(RemoteProtocol.FABRIC_OPEN, 0, o -> {
            o.writeLong(clock.nanoTime());
            o.writeInt(port);
            RemoteProtocol.writeDma(o, dma);
        }, (DataInputStream in) -> {
            handles[0] = in.readInt();
            handles[1] = in.readInt();
            name[0] = in.readUTF();
            guid[0] = in.readLong();
            name[1] = in.readUTF();
            return null;
        });
        this.remoteFabric = handles[0];
        this.remoteDevice = handles[1];
        this.verbs = new RemoteVerbs(peer);
        this.deviceB = verbs.device(remoteDevice, name[0], guid[0], name[1]);
        this.hostA = new SoftFabric(clock);
        try {
            RoceConfig rc = new RoceConfig(List.of(InetAddress.ofLiteral("127.0.0.1")), port, null);
            this.deviceA = dma == null ? hostA.addRoceDevice("rxe0", rc) : hostA.addRoceDevice("rxe0", rc, dma);
        } catch (RuntimeException e) {
            hostA.close();
            peer.call(RemoteProtocol.FABRIC_CLOSE, remoteFabric, o -> { }, in -> null);
            throw e;
        }
        long now = clock.nanoTime();
        this.forward = t -> peer.run(RemoteProtocol.ADVANCE, remoteFabric, o -> o.writeLong(t));
        clock.addListener(forward);
        if (clock.nanoTime() != now) {
            forward.onTimeAdvanced(clock.nanoTime());
        }
    }

    /** @return the child's PID (device B's process) */
    public long remotePid() {
        return peer.pid();
    }

    /** {@return device A, the RoCE device of this JVM (127.0.0.1)} */
    public SoftDevice localDevice() {
        return deviceA;
    }

    /**
     * Opens a CM on device B in the remote peer, closed with this fabric (before its devices) unless closed
     * first.
     *
     * @param factory a {@link RemoteCmFactory} with a public no-argument constructor, on the class path
     * @param seed    the CM's seed
     * @return the provider, to give to {@code RdmaCm.of}
     */
    public RemoteCm openCm(Class<? extends RemoteCmFactory> factory, long seed) {
        RemoteCm cm = new RemoteCm(peer, verbs, remoteFabric, remoteDevice, factory.getName(), seed);
        cms.add(cm);
        return cm;
    }

    @Override
    public Device device(int index) {
        return switch (index) {
            case 0 -> deviceA;
            case 1 -> deviceB;
            default -> throw new IndexOutOfBoundsException("device " + index + " of 2");
        };
    }

    @Override
    public int deviceCount() {
        return 2;
    }

    @Override
    public ManualClock clock() {
        return clock;
    }

    @Override
    public void setPortState(int deviceIndex, int port, boolean active) {
        if (deviceIndex == 0) {
            deviceA.setPortState(port, active ? PortState.ACTIVE : PortState.DOWN);
        } else if (deviceIndex == 1) {
            peer.run(RemoteProtocol.PORT_STATE, remoteDevice, o -> {
                o.writeInt(port);
                o.writeBoolean(active);
            });
        } else {
            throw new IndexOutOfBoundsException("device " + deviceIndex + " of 2");
        }
    }

    /** Buffers in the memory shared with the remote peer, so B's regions and RDMA targets are real memory there. */
    @Override
    public Arena bufferArena() {
        return peer.shm().newArena();
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        clock.removeListener(forward);
        try {
            for (RemoteCm cm : cms) {
                cm.close();
            }
        } finally {
            closeDevices();
        }
    }

    private void closeDevices() {
        List<String> reports = new ArrayList<>();
        try {
            hostA.close();
        } finally {
            peer.call(RemoteProtocol.FABRIC_CLOSE, remoteFabric, o -> { }, in -> {
                for (int n = in.readInt(); n > 0; n--) {
                    reports.add("device B: " + in.readUTF());
                }
                return null;
            });
            peer.shm().reset();
        }
        DmaChecker checker = deviceA.dma().checker();
        if (checker != null) {
            checker.reports().forEach(r -> reports.add("device A: " + r));
        }
        if (!reports.isEmpty()) {
            throw new AssertionError("the DMA checker reported " + reports.size() + " misuse(s); first: "
                    + reports.getFirst());
        }
    }
}
