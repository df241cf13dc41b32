package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractRcTest;
import org.rdma4j.testkit.Fabric;

/**
 * The conformance suite {@link AbstractRcTest} on a soft fabric that cuts messages at the path MTU,
 * as a wire does: multi-packet SEND, WRITE and READ responses go through the same checks as on RoCE.
 */
class SoftSegmentedRcTest extends AbstractRcTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftTestFabric(clock, true);
    }
}
