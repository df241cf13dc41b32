// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import org.rdma4j.dma.DmaConfig;

/** {@link IpoibConnectedInProcessTest} with devices behind a simulated IOMMU, DMA checker on. */
class IpoibConnectedInProcessIommuTest extends IpoibConnectedInProcessTest {
    @Override
    DmaConfig dmaConfig() {
        return DmaConfig.iommu();
    }
}
