// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.testkit.model.AbstractConcurrencyTest;

/** The concurrency suite on a libibverbs device (skipped without one). */
class IbvConcurrencyTest extends AbstractConcurrencyTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        IbvTestFabric.assumeIb("this suite connects its RC QPs by hand (siw needs the iw_cm) and uses UC and UD");
        return IbvTestFabric.create(clock);
    }
}
