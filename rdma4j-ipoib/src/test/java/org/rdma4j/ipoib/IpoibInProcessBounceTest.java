// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import org.rdma4j.dma.DmaConfig;

/**
 * {@link IpoibInProcessTest} on devices that bounce every mapping (swiotlb=force): a packet reaches the
 * device only through map/sync copies. The pool holds the mapped receive ring (1024 buffers of two 2 KiB
 * slots) plus the sends in flight.
 */
class IpoibInProcessBounceTest extends IpoibInProcessTest {
    @Override
    DmaConfig dmaConfig() {
        return DmaConfig.bounce().withForceBounce(true).withBouncePool(16L << 20);
    }
}
