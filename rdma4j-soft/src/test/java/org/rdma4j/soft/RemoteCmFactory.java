// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.util.Map;

import org.rdma4j.common.ManualClock;
import org.rdma4j.verbs.spi.CmProvider;

/**
 * Makes the CM provider that the remote peer hosts for device B ({@link SoftRemoteTestFabric#openCm}): a
 * module with a CM (rdma4j-cm) implements it, and the child creates it by class name, so the soft device's
 * tests do not depend on that module. The implementation needs a public constructor without arguments.
 */
public interface RemoteCmFactory {
    /**
     * Starts a CM on the child's device.
     *
     * @param device the remote fabric's device (RoCEv2 on 127.0.0.2)
     * @param clock  that fabric's clock, which the test JVM moves: the CM's timers must follow it
     * @param seed   the seed of the CM's random choices (comm IDs, PSNs, ports)
     * @return the running CM
     */
    Hosted open(SoftDevice device, ManualClock clock, long seed);

    /** A CM the child hosts: driven by the test JVM ({@link #progress}), with counters. */
    interface Hosted extends AutoCloseable {
        /** {@return the provider the test JVM's front reaches through the remote protocol} */
        CmProvider provider();

        /** {@return whether anything was processed} Processes what arrived (a driven CM). */
        boolean progress();

        /** {@return the CM's counters by name} */
        Map<String, Long> counters();

        /** Stops the CM. */
        @Override
        void close();
    }
}
