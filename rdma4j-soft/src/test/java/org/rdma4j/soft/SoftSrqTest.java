package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractSrqTest;
import org.rdma4j.testkit.Fabric;

/** The conformance suite {@link AbstractSrqTest} on the soft device. */
class SoftSrqTest extends AbstractSrqTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftTestFabric(clock);
    }
}
