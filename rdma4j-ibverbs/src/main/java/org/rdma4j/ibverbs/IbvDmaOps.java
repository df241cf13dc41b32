// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicBoolean;

import org.rdma4j.verbs.CoherentBuffer;
import org.rdma4j.verbs.Dma;
import org.rdma4j.verbs.DmaDirection;
import org.rdma4j.verbs.DmaSgList;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.spi.DmaOps;

/**
 * The DMA-mapping calls of a libibverbs device: there are none in user space. {@code ib_dma_map_*} and the
 * PD's {@code local_dma_lkey} are kernel interfaces; a user-space program reaches a device only through
 * registered memory. Every map therefore fails ({@link Dma#MAPPING_ERROR}, with one warning saying why) and
 * coherent allocation throws EOPNOTSUPP: a ULP written against {@link Dma} sees the failure at its first
 * map, as it would on a device whose IOMMU window is full.
 */
final class IbvDmaOps implements DmaOps {
    private static final System.Logger LOG = System.getLogger("org.rdma4j.ibverbs");
    private final String device;
    private final AtomicBoolean warned = new AtomicBoolean();

    IbvDmaOps(String device) {
        this.device = device;
    }

    static String why(String device) {
        return device + " is driven through libibverbs, where DMA mapping and the local DMA L_Key are kernel-only"
                + " (ib_dma_map_*, pd->local_dma_lkey): register the buffers with ProtectionDomain.regMr instead";
    }

    private long refuse() {
        if (warned.compareAndSet(false, true)) {
            LOG.log(System.Logger.Level.WARNING, "DMA map refused: {0}", why(device));
        }
        return Dma.MAPPING_ERROR;
    }

    @Override
    public long map(MemorySegment cpu, DmaDirection dir) {
        return refuse();
    }

    @Override
    public void unmap(long dmaAddress, long size, DmaDirection dir) {
        // nothing was mapped
    }

    @Override
    public boolean mappingError(long dmaAddress) {
        return true;
    }

    @Override
    public int mapSg(DmaSgList sg, int nents, DmaDirection dir) {
        refuse();
        return 0;
    }

    @Override
    public void unmapSg(DmaSgList sg, int nents, DmaDirection dir) {
        // nothing was mapped
    }

    @Override
    public void syncForCpu(long dmaAddress, long size, DmaDirection dir) {
        // nothing was mapped
    }

    @Override
    public void syncForDevice(long dmaAddress, long size, DmaDirection dir) {
        // nothing was mapped
    }

    @Override
    public CoherentBuffer allocCoherent(long size) {
        throw new VerbsException(Errno.EOPNOTSUPP, "coherent DMA memory: " + why(device));
    }

    @Override
    public void freeCoherent(CoherentBuffer buffer) {
        throw new VerbsException(Errno.EOPNOTSUPP, "coherent DMA memory: " + why(device));
    }
}
