// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.testkit.model.AbstractConcurrencyTest;

/** The concurrency suite on a libibverbs device (skipped without one). */
class IbvConcurrencyTest extends AbstractConcurrencyTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        IbvTestFabric.assumeIb("iWARP QPs are connected through rdma_cm");
        return IbvTestFabric.create(clock);
    }
}
