// SPDX-License-Identifier: Apache-2.0
/** The DMA-mapping layer: how a device reaches host memory (virtual, IOMMU, bounce) and the DMA checker. */
module org.rdma4j.dma {
    requires transitive org.rdma4j.verbs;
    requires transitive org.rdma4j.common;

    exports org.rdma4j.dma;
}
