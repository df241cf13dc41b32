// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.spi;

import org.rdma4j.verbs.CoherentBuffer;
import org.rdma4j.verbs.DmaDirection;
import org.rdma4j.verbs.DmaSgList;

import java.lang.foreign.MemorySegment;

/**
 * A provider's DMA-mapping operations for one open device, called by {@link org.rdma4j.verbs.Dma}
 * for every device that does not use virtual DMA (and for virtual ones while a DMA checker watches).
 * The shape is Linux's dma_map_ops / 2006 ib_dma_mapping_ops. Implementations must be thread-safe.
 */
public interface DmaOps {
    /**
     * {@return the DMA address, or {@link org.rdma4j.verbs.Dma#MAPPING_ERROR}}
     *
     * @param cpu the buffer
     * @param dir the direction
     */
    long map(MemorySegment cpu, DmaDirection dir);

    /**
     * Unmaps a buffer (dma_unmap_single).
     *
     * @param dmaAddress what {@link #map} returned
     * @param size the mapped size
     * @param dir the direction it was mapped with
     */
    void unmap(long dmaAddress, long size, DmaDirection dir);

    /**
     * {@return whether it is the error value}
     *
     * @param dmaAddress a result of {@link #map}
     */
    boolean mappingError(long dmaAddress);

    /**
     * {@return the number of mapped entries, 0 on failure (nothing stays mapped then)}
     *
     * @param sg    the list; DMA addresses are filled in
     * @param nents entries in use
     * @param dir   direction
     */
    int mapSg(DmaSgList sg, int nents, DmaDirection dir);

    /**
     * Unmaps a scatter list (dma_unmap_sg).
     *
     * @param sg the list
     * @param nents the count given to mapSg
     * @param dir the direction given to mapSg
     */
    void unmapSg(DmaSgList sg, int nents, DmaDirection dir);

    /**
     * Gives a mapped range back to the CPU (dma_sync_single_for_cpu).
     *
     * @param dmaAddress start
     * @param size bytes
     * @param dir the mapping's direction
     */
    void syncForCpu(long dmaAddress, long size, DmaDirection dir);

    /**
     * Gives a mapped range to the device (dma_sync_single_for_device).
     *
     * @param dmaAddress start
     * @param size bytes
     * @param dir the mapping's direction
     */
    void syncForDevice(long dmaAddress, long size, DmaDirection dir);

    /**
     * {@return coherent memory}
     *
     * @param size bytes
     */
    CoherentBuffer allocCoherent(long size);

    /**
     * Frees a coherent buffer (dma_free_coherent).
     *
     * @param buffer what {@link #allocCoherent} returned
     */
    void freeCoherent(CoherentBuffer buffer);
}
