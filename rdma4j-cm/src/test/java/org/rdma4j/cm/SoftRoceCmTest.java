// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import java.time.Duration;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractCmTest;
import org.rdma4j.testkit.CmFabric;

/** The CM conformance suite between two RoCEv2 soft devices that meet only through UDP on loopback. */
class SoftRoceCmTest extends AbstractCmTest {
    @Override
    protected CmFabric createCmFabric(ManualClock clock) {
        return SoftCmFabric.roce(clock);
    }

    @Override
    protected Duration quietWindow() {
        return Duration.ofMillis(300);
    }
}
