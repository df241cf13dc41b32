package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.PortState;

/** The conformance fixture for the soft device: one {@link SoftFabric} with two devices on a manual clock. */
final class SoftTestFabric implements Fabric {
    private final ManualClock clock;
    private final SoftFabric fabric;
    private final SoftDevice[] devices;

    SoftTestFabric(ManualClock clock) {
        this(clock, false);
    }

    /**
     * @param clock        drives the protocol timers
     * @param segmentAtMtu cut messages into path-MTU packets, exercising FIRST/MIDDLE/LAST handling
     */
    SoftTestFabric(ManualClock clock, boolean segmentAtMtu) {
        this.clock = clock;
        this.fabric = new SoftFabric(clock, segmentAtMtu);
        this.devices = new SoftDevice[] {fabric.addDevice("soft0"), fabric.addDevice("soft1")};
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
        fabric.close();
    }
}
