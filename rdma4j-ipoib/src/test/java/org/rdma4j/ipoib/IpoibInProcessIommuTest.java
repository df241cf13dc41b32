// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import org.rdma4j.dma.DmaConfig;

/** {@link IpoibInProcessTest} on devices behind an IOMMU: every buffer the device touches must be mapped. */
class IpoibInProcessIommuTest extends IpoibInProcessTest {
    @Override
    DmaConfig dmaConfig() {
        return DmaConfig.iommu();
    }
}
