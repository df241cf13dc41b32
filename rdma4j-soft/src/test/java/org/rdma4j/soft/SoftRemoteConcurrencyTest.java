// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.testkit.model.AbstractConcurrencyTest;

/**
 * The concurrency tests {@link AbstractConcurrencyTest} with device B in another JVM: the posting and
 * polling threads on B share the one connection to the child, which serialises their calls.
 */
class SoftRemoteConcurrencyTest extends AbstractConcurrencyTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftRemoteTestFabric(clock);
    }
}
