// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractOwnershipTest;
import org.rdma4j.testkit.Fabric;

/** The conformance suite {@link AbstractOwnershipTest} with device B in another JVM, over RoCEv2 on loopback. */
class SoftRemoteOwnershipTest extends AbstractOwnershipTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftRemoteTestFabric(clock);
    }
}
