// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.dma;

/** How a device reaches host memory. */
public enum DmaMode {
    /** A CPU-copy device (ipath, rxe): the DMA address is the virtual address; map and unmap do nothing. */
    VIRTUAL,
    /** Bus addresses translated by an IOMMU page table with a limited window. */
    IOMMU,
    /** Bus addresses through a limited pool of bounce buffers (map registers, swiotlb). */
    BOUNCE
}
