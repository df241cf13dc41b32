// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractUcTest;
import org.rdma4j.testkit.Fabric;

/** The conformance suite {@link AbstractUcTest} with device B in another JVM, over RoCEv2 on loopback. */
class SoftRemoteUcTest extends AbstractUcTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftRemoteTestFabric(clock);
    }
}
