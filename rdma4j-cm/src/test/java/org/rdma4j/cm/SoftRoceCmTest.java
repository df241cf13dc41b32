// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import java.time.Duration;

import org.junit.jupiter.params.Parameter;
import org.junit.jupiter.params.ParameterizedClass;
import org.junit.jupiter.params.provider.MethodSource;
import org.rdma4j.common.ManualClock;
import org.rdma4j.dma.DmaMode;
import org.rdma4j.testkit.AbstractCmTest;
import org.rdma4j.testkit.CmFabric;

/**
 * The CM conformance suite between two RoCEv2 soft devices that meet only through UDP on loopback, in each
 * DMA mode.
 */
@ParameterizedClass(name = "{0}")
@MethodSource("org.rdma4j.cm.SoftCmFabric#modes")
class SoftRoceCmTest extends AbstractCmTest {
    /** How the devices reach memory. */
    @Parameter
    DmaMode mode;

    @Override
    protected CmFabric createCmFabric(ManualClock clock) {
        return SoftCmFabric.roce(clock, mode);
    }

    @Override
    protected Duration quietWindow() {
        return Duration.ofMillis(300);
    }
}
