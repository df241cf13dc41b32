package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.testkit.model.AbstractConcurrencyTest;

/** The concurrency suite {@link AbstractConcurrencyTest} on the soft device. */
class SoftConcurrencyTest extends AbstractConcurrencyTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftTestFabric(clock);
    }
}
