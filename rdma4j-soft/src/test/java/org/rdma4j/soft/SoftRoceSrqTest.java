// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractSrqTest;
import org.rdma4j.testkit.Fabric;

/** The conformance suite {@link AbstractSrqTest} between two RoCEv2 devices that meet only through UDP on loopback. */
class SoftRoceSrqTest extends AbstractSrqTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftRoceTestFabric(clock);
    }
}
