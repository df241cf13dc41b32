package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractMrTest;
import org.rdma4j.testkit.Fabric;

/** The conformance suite {@link AbstractMrTest} on the soft device. */
class SoftMrTest extends AbstractMrTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftTestFabric(clock);
    }
}
