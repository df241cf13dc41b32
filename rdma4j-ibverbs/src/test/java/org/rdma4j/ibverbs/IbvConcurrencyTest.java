// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.testkit.model.AbstractConcurrencyTest;

/**
 * The concurrency suite on a libibverbs device (skipped without one). On iWARP (siw) its RC pairs are connected
 * through the kernel's CM (the testkit's CmConnector) and the UC and UD tests skip: iWARP has RC QPs only.
 */
class IbvConcurrencyTest extends AbstractConcurrencyTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return IbvTestFabric.create(clock);
    }
}
