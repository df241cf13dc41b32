// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.time.Duration;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractMulticastTest;
import org.rdma4j.testkit.Fabric;

/**
 * The conformance suite {@link AbstractMulticastTest} between two RoCEv2 devices on loopback: groups are
 * IPv4 multicast groups joined on lo, and the sender's own host gets its copies through IP multicast
 * loopback, as rxe's do.
 */
class SoftRoceMulticastTest extends AbstractMulticastTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftRoceTestFabric(clock);
    }

    @Override
    protected Duration quietWindow() {
        return Duration.ofMillis(200);
    }
}
