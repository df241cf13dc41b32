package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractDeviceQueryTest;
import org.rdma4j.testkit.Fabric;

/** The conformance suite {@link AbstractDeviceQueryTest} on the soft device. */
class SoftDeviceQueryTest extends AbstractDeviceQueryTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftTestFabric(clock);
    }
}
