// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.time.Duration;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractMulticastTest;
import org.rdma4j.testkit.Fabric;

/**
 * The conformance suite {@link AbstractMulticastTest} with device B in another JVM: groups are IPv4
 * multicast groups joined on lo by both processes.
 */
class SoftRemoteMulticastTest extends AbstractMulticastTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftRemoteTestFabric(clock);
    }

    @Override
    protected Duration quietWindow() {
        return Duration.ofMillis(200);
    }
}
