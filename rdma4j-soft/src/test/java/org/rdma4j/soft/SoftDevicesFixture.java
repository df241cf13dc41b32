// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.PortState;

/**
 * What the soft device's conformance fixtures share: a fixed set of devices on a manual clock, and port
 * state changes through {@link SoftDevice#setPortState}. Subclasses build the devices (one fabric, or one
 * fabric per RoCE host) and close what they built.
 */
abstract class SoftDevicesFixture implements Fabric {
    private final ManualClock clock;
    private final SoftDevice[] devices;

    SoftDevicesFixture(ManualClock clock, SoftDevice... devices) {
        this.clock = clock;
        this.devices = devices.clone();
    }

    /** @param i index @return the device */
    SoftDevice softDevice(int i) {
        return devices[i];
    }

    /** @return the devices, in index order (a copy) */
    SoftDevice[] softDevices() {
        return devices.clone();
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
}
