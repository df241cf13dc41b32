// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractMulticastTest;
import org.rdma4j.testkit.Fabric;

/** The conformance suite {@link AbstractMulticastTest} on the soft device's in-process fabric. */
class SoftMulticastTest extends AbstractMulticastTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftTestFabric(clock);
    }
}
