// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractMrTest;
import org.rdma4j.testkit.Fabric;

/** The conformance suite {@link AbstractMrTest} on two RoCEv2 devices bound to loopback addresses. */
class SoftRoceMrTest extends AbstractMrTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftRoceTestFabric(clock);
    }
}
