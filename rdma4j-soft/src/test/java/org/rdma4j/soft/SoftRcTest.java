package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractRcTest;
import org.rdma4j.testkit.Fabric;

/** The conformance suite {@link AbstractRcTest} on the soft device. */
class SoftRcTest extends AbstractRcTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftTestFabric(clock);
    }
}
