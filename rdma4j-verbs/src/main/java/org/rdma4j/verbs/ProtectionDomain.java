// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

import java.lang.foreign.MemorySegment;
import java.util.Set;

/**
 * A protection domain (ibv_pd). Owns memory regions, queue pairs, SRQs and address handles; closing
 * fails with EBUSY while any is open. Thread-safe.
 */
public interface ProtectionDomain extends AutoCloseable {
    /** {@return the context} */
    Context context();

    /**
     * Registers memory (ibv_reg_mr). The region keeps the segment alive until it is deregistered.
     *
     * @param segment a native segment
     * @param access  access flags; REMOTE_WRITE and REMOTE_ATOMIC require LOCAL_WRITE
     * @return the memory region
     * @throws VerbsException EINVAL for a heap segment, an empty segment or invalid flags; EOPNOTSUPP
     *                        when the device could reach the memory only through bounce buffers, which
     *                        would hide remote writes from the CPU; ENOMEM when its IOMMU window is full
     */
    MemoryRegion regMr(MemorySegment segment, Set<AccessFlag> access);

    /**
     * The L_Key that lets a scatter/gather entry name memory by a DMA address from {@link Dma#map}
     * instead of by a registered region (Linux pd->local_dma_lkey). The device checks such an entry
     * against its DMA mappings (direction, bounds, IOMMU page table), not against a memory region.
     *
     * @return the local DMA L_Key
     */
    int localDmaLkey();

    /**
     * ibv_create_qp.
     *
     * @param attrs creation attributes
     * @return the queue pair, in RESET
     */
    QueuePair createQp(QpInitAttributes attrs);

    /**
     * ibv_create_srq.
     *
     * @param maxWr  minimum number of outstanding receive requests
     * @param maxSge scatter entries per request
     * @return the SRQ
     */
    SharedReceiveQueue createSrq(int maxWr, int maxSge);

    /**
     * ibv_create_ah.
     *
     * @param attrs the address vector
     * @return the address handle
     */
    AddressHandle createAh(AhAttributes attrs);

    /**
     * ibv_dealloc_pd.
     *
     * @throws VerbsException EBUSY while children are open
     */
    @Override
    void close();
}
