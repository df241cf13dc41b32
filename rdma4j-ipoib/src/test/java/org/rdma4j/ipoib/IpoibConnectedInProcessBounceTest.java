// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import org.rdma4j.dma.DmaConfig;

/**
 * {@link IpoibConnectedInProcessTest} with every mapping forced through bounce buffers, DMA checker on; the
 * pool holds the mapped rings (16 MiB of SRQ buffers, 2 MiB of UD ones) and the sends in flight.
 */
class IpoibConnectedInProcessBounceTest extends IpoibConnectedInProcessTest {
    @Override
    DmaConfig dmaConfig() {
        return DmaConfig.bounce().withForceBounce(true).withBouncePool(64L << 20);
    }
}
