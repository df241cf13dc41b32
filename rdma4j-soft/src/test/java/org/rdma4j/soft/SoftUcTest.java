package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractUcTest;
import org.rdma4j.testkit.Fabric;

/** The conformance suite {@link AbstractUcTest} on the soft device. */
class SoftUcTest extends AbstractUcTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftTestFabric(clock);
    }
}
