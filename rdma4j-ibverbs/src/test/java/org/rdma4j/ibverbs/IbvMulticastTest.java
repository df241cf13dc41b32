// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.time.Duration;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractMulticastTest;
import org.rdma4j.testkit.Fabric;

/** The conformance suite {@link AbstractMulticastTest} on a libibverbs device (skipped without one). */
class IbvMulticastTest extends AbstractMulticastTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        IbvTestFabric.assumeIb("iWARP has no UD QPs");
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
