// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractSrqTest;
import org.rdma4j.testkit.Fabric;

/** The conformance suite {@link AbstractSrqTest} with device B in another JVM, over RoCEv2 on loopback. */
class SoftRemoteSrqTest extends AbstractSrqTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftRemoteTestFabric(clock);
    }
}
