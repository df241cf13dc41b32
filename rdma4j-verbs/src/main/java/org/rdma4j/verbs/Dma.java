// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

import java.lang.foreign.MemorySegment;

import org.rdma4j.verbs.spi.DmaOps;

/**
 * The DMA-mapping calls an upper-layer protocol makes for per-I/O buffers (Linux ib_dma_*): map and
 * unmap a buffer or a scatter/gather list, check for a mapping error, sync for the CPU or the device,
 * and allocate coherent memory for rings. Get it from {@link Context#dma()} once and keep it.
 *
 * <p>Post a mapped buffer with the PD's {@link ProtectionDomain#localDmaLkey() local DMA L_Key} and
 * the DMA address this class returned, giving the CPU buffer as well
 * ({@link ScatterGatherEntry#dma}): a virtual-DMA device copies with the CPU and needs it.
 *
 * <p>The final form of Linux's helpers: a device that uses virtual DMA (a CPU-copy device such as
 * rxe, siw or the soft device) is told by one final boolean field ({@code ib_uses_virt_dma()}), and
 * the calls then do nothing or return the buffer's address, with no call through an interface; only
 * the other devices pay for the {@link DmaOps} call. The buffer's address for a heap segment is its
 * offset in the array (what {@link MemorySegment#address()} gives): only a virtual device can reach
 * heap memory that way, and a bus device bounces it.
 *
 * <p>Contract, checked by the DMA checker when it is on: call {@link #mappingError} on every result
 * of {@link #map} before using it; unmap with the same size and direction; the device owns a mapped
 * buffer until {@link #syncForCpu} or unmap; after {@link #syncForCpu} the CPU owns it until
 * {@link #syncForDevice}; do not change a send buffer between post and completion. Thread-safe.
 */
public final class Dma {
    /** What a failed map returns (Linux DMA_MAPPING_ERROR, all ones). */
    public static final long MAPPING_ERROR = -1L;

    /**
     * A thread no segment is confined to, to ask whether threads other than a segment's maker may touch it
     * ({@link MemorySegment#isAccessibleBy}: one comparison with the segment's owner thread).
     */
    private static final Thread ANY_OTHER_THREAD = Thread.ofPlatform().unstarted(() -> { });

    private final boolean virt;
    private final DmaOps ops;

    /**
     * Creates the mapping calls of one context (providers call this).
     *
     * @param virtual whether map/unmap/sync may be skipped: the DMA address is the buffer's address
     * @param ops the provider's operations (coherent allocation always goes there)
     */
    public Dma(boolean virtual, DmaOps ops) {
        if (ops == null) {
            throw new IllegalArgumentException("ops is null");
        }
        this.virt = virtual;
        this.ops = ops;
    }

    /** {@return whether the device uses virtual DMA (ib_uses_virt_dma): map returns the buffer's address} */
    public boolean usesVirtDma() {
        return virt;
    }

    /**
     * Maps a buffer for one I/O (ib_dma_map_single).
     *
     * <p>A virtual-DMA device copies with the CPU from threads of its own (the soft device's timer and
     * receive agents, and whichever thread drives its peer), so it cannot use a segment of a confined arena
     * (only its owner thread may touch it) or of a closed one: the fast path hands such a segment to the
     * provider, which refuses it like registration does.
     *
     * @param cpu the buffer
     * @param dir the direction of the I/O
     * @return the DMA address, or {@link #MAPPING_ERROR}: check it with {@link #mappingError}
     * @throws IllegalArgumentException if the device cannot reach the buffer (the message says why)
     */
    public long map(MemorySegment cpu, DmaDirection dir) {
        if (virt && reachable(cpu)) {
            return cpu.address();
        }
        return ops.map(cpu, dir);
    }

    /**
     * Whether a virtual-DMA device may use the buffer without asking its provider: its arena is alive and
     * not confined (heap segments and {@code Arena.ofShared()}, {@code Arena.ofAuto()},
     * {@code Arena.global()} memory are). Two field loads and compares on the per-I/O path; the reason
     * for a refusal, and the refusal, are the provider's ({@link DmaOps#map}).
     */
    private static boolean reachable(MemorySegment cpu) {
        return cpu.isAccessibleBy(ANY_OTHER_THREAD) && cpu.scope().isAlive();
    }

    /**
     * {@return whether the map failed (ib_dma_mapping_error); a virtual device never fails}
     *
     * @param dmaAddress what {@link #map} returned
     */
    public boolean mappingError(long dmaAddress) {
        if (virt) {
            return false;
        }
        return ops.mappingError(dmaAddress);
    }

    /**
     * Ends a mapping (ib_dma_unmap_single); with FROM_DEVICE or BIDIRECTIONAL the CPU then sees what
     * the device wrote.
     *
     * @param dmaAddress what {@link #map} returned
     * @param size       the size that was mapped
     * @param dir        the direction it was mapped with
     */
    public void unmap(long dmaAddress, long size, DmaDirection dir) {
        if (!virt) {
            ops.unmap(dmaAddress, size, dir);
        }
    }

    /**
     * Maps every entry of a scatter/gather list (ib_dma_map_sg).
     *
     * @param sg    the list
     * @param nents entries in use
     * @param dir   direction
     * @return entries mapped; 0 means failure and nothing is mapped
     * @throws IllegalArgumentException if the device cannot reach an entry's buffer (see {@link #map})
     */
    public int mapSg(DmaSgList sg, int nents, DmaDirection dir) {
        if (virt && reachable(sg, nents)) {
            for (int i = 0; i < nents; i++) {
                sg.dmaAddress(i, sg.buffer(i).address());
            }
            return nents;
        }
        return ops.mapSg(sg, nents, dir);
    }

    private static boolean reachable(DmaSgList sg, int nents) {
        for (int i = 0; i < nents; i++) {
            if (!reachable(sg.buffer(i))) {
                return false;
            }
        }
        return true;
    }

    /**
     * Unmaps a scatter list (ib_dma_unmap_sg).
     *
     * @param sg the list given to {@link #mapSg}
     * @param nents the count given to {@link #mapSg} (not its result, as in Linux)
     * @param dir the direction given to {@link #mapSg}
     */
    public void unmapSg(DmaSgList sg, int nents, DmaDirection dir) {
        if (!virt) {
            ops.unmapSg(sg, nents, dir);
        }
    }

    /**
     * Gives the buffer to the CPU: what the device wrote becomes visible (ib_dma_sync_single_for_cpu).
     *
     * @param dmaAddress start (inside a mapping)
     * @param size       bytes
     * @param dir        the mapping's direction
     */
    public void syncForCpu(long dmaAddress, long size, DmaDirection dir) {
        if (!virt) {
            ops.syncForCpu(dmaAddress, size, dir);
        }
    }

    /**
     * Gives the buffer back to the device: what the CPU wrote becomes visible to it
     * (ib_dma_sync_single_for_device).
     *
     * @param dmaAddress start (inside a mapping)
     * @param size       bytes
     * @param dir        the mapping's direction
     */
    public void syncForDevice(long dmaAddress, long size, DmaDirection dir) {
        if (!virt) {
            ops.syncForDevice(dmaAddress, size, dir);
        }
    }

    /**
     * Allocates memory the CPU and the device share without syncs, for rings (dma_alloc_coherent).
     *
     * @param size bytes
     * @return the buffer
     * @throws VerbsException ENOMEM when the device cannot reach any more memory
     */
    public CoherentBuffer allocCoherent(long size) {
        return ops.allocCoherent(size);
    }

    /**
     * Frees a coherent buffer (ib_dma_free_coherent).
     *
     * @param buffer what {@link #allocCoherent} returned
     */
    public void freeCoherent(CoherentBuffer buffer) {
        ops.freeCoherent(buffer);
    }

    /** {@return the provider's operations behind this object} */
    public DmaOps ops() {
        return ops;
    }
}
