package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractUcTest;
import org.rdma4j.testkit.Fabric;

/**
 * The conformance suite {@link AbstractUcTest} on a soft fabric that cuts messages at the path MTU,
 * as a wire does: multi-packet SEND, WRITE and READ responses go through the same checks as on RoCE.
 */
class SoftSegmentedUcTest extends AbstractUcTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftTestFabric(clock, true);
    }
}
