// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.time.Duration;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractQpStateTest;
import org.rdma4j.testkit.Fabric;

/** The conformance suite {@link AbstractQpStateTest} on a libibverbs device (skipped without one). */
class IbvQpStateTest extends AbstractQpStateTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        IbvTestFabric.assumeIb("iWARP QPs are connected through rdma_cm, which the CM suites exercise");
        return IbvTestFabric.create(clock);
    }

    @Override
    protected Duration quietWindow() {
        return IbvTestFabric.QUIET;
    }

    @Override
    protected Duration settleWindow() {
        return IbvTestFabric.SETTLE;
    }
}
