// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractUdTest;
import org.rdma4j.testkit.Fabric;

/** The conformance suite {@link AbstractUdTest} between two RoCEv2 devices that meet only through UDP on loopback. */
class SoftRoceUdTest extends AbstractUdTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftRoceTestFabric(clock);
    }
}
