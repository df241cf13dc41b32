// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.junit.jupiter.params.Parameter;
import org.junit.jupiter.params.ParameterizedClass;
import org.junit.jupiter.params.provider.MethodSource;
import org.rdma4j.common.ManualClock;
import org.rdma4j.dma.DmaMode;
import org.rdma4j.testkit.AbstractRcTest;
import org.rdma4j.testkit.Fabric;

/** The conformance suite {@link AbstractRcTest} on the soft device, in each DMA mode. */
@ParameterizedClass(name = "{0}")
@MethodSource("org.rdma4j.soft.SoftTestFabric#modes")
class SoftRcTest extends AbstractRcTest {
    /** How the devices reach memory: every conformance class runs in each mode. */
    @Parameter
    DmaMode mode;

    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftTestFabric(clock, false, mode);
    }
}
