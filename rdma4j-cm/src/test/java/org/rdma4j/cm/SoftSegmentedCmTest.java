// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import org.junit.jupiter.params.Parameter;
import org.junit.jupiter.params.ParameterizedClass;
import org.junit.jupiter.params.provider.MethodSource;
import org.rdma4j.common.ManualClock;
import org.rdma4j.dma.DmaMode;
import org.rdma4j.testkit.AbstractCmTest;
import org.rdma4j.testkit.CmFabric;

/** The CM conformance suite on an in-process fabric that cuts messages at the path MTU, in each DMA mode. */
@ParameterizedClass(name = "{0}")
@MethodSource("org.rdma4j.cm.SoftCmFabric#modes")
class SoftSegmentedCmTest extends AbstractCmTest {
    /** How the devices reach memory. */
    @Parameter
    DmaMode mode;

    @Override
    protected CmFabric createCmFabric(ManualClock clock) {
        return SoftCmFabric.inProcess(clock, true, mode);
    }
}
