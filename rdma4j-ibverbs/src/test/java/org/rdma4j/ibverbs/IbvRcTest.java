// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.time.Duration;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractRcTest;
import org.rdma4j.testkit.Fabric;

/** The conformance suite {@link AbstractRcTest} on a libibverbs device (skipped without one). */
class IbvRcTest extends AbstractRcTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
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
