// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.time.Duration;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.Parameter;
import org.junit.jupiter.params.ParameterizedClass;
import org.junit.jupiter.params.provider.MethodSource;
import org.rdma4j.common.ManualClock;
import org.rdma4j.dma.DmaMode;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.testkit.model.AbstractConcurrencyTest;

/**
 * The long run of the concurrency suite for {@code ./rdma4j test -Pslow} (issue 16 item 15): several QPs
 * and threads ({@link AbstractConcurrencyTest}: four posting threads on four QPs sharing CQs polled by
 * two threads, and four threads on one QP) with up to 27 times the messages per thread, on messages cut at the
 * path MTU, in each DMA mode with the checker on.
 */
@Tag("slow")
@ParameterizedClass(name = "{0}")
@MethodSource("org.rdma4j.soft.SoftTestFabric#modes")
class SoftConcurrencySlowTest extends AbstractConcurrencyTest {
    /** How the devices reach memory. */
    @Parameter
    DmaMode mode;

    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftTestFabric(clock, true, mode);
    }

    @Override
    protected int messagesPerThread() {
        return 8000;
    }

    @Override
    protected Duration deadline() {
        return Duration.ofMinutes(5);
    }
}
