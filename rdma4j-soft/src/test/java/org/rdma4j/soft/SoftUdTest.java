package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractUdTest;
import org.rdma4j.testkit.Fabric;

/** The conformance suite {@link AbstractUdTest} on the soft device. */
class SoftUdTest extends AbstractUdTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftTestFabric(clock);
    }
}
