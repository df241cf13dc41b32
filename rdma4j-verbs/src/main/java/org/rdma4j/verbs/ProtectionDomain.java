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
     * Registers memory (ibv_reg_mr).
     *
     * <p>The region does not keep the segment's arena open: FFM offers no way to pin an arena, so
     * {@code arena.close()} succeeds under a live registration. Close the arena only after deregistering
     * (try-with-resources does, when the arena is opened first). If it is closed earlier, the memory is
     * never touched again: every later device access to it fails, the work request completing with an
     * error (a protection error locally, the remote access error at a peer), and the DMA checker reports
     * it. Software devices reach memory from threads of their own, so the memory must come from an arena
     * every thread may use: {@code Arena.ofShared()}, {@code Arena.ofAuto()} or {@code Arena.global()}.
     *
     * @param segment a native segment of a live arena that every thread may access
     * @param access  access flags; REMOTE_WRITE and REMOTE_ATOMIC require LOCAL_WRITE
     * @return the memory region
     * @throws VerbsException EINVAL for a heap segment, an empty segment, a segment longer than the
     *                        device's max_mr_size, a closed arena's segment, a confined arena's segment
     *                        where the device cannot use one, or invalid flags; EOPNOTSUPP when the
     *                        device could reach the memory only through bounce buffers, which would hide
     *                        remote writes from the CPU; ENOMEM when its IOMMU window is full
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
