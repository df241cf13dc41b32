package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractQpStateTest;
import org.rdma4j.testkit.Fabric;

/** The conformance suite {@link AbstractQpStateTest} on the soft device. */
class SoftQpStateTest extends AbstractQpStateTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftTestFabric(clock);
    }
}
