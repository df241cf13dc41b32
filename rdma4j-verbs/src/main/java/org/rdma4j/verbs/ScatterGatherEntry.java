// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

import java.lang.foreign.MemorySegment;

/**
 * One scatter/gather element (ibv_sge): a virtual address inside a memory region, a length and the
 * region's L_Key. Mutable and reusable; not thread-safe.
 */
public final class ScatterGatherEntry {
    private long addr;
    private int length;
    private int lkey;
    private MemorySegment segment;

    /** Creates an empty entry. */
    public ScatterGatherEntry() {
    }

    /**
     * Creates an entry.
     *
     * @param addr start address (the registered segment's address plus an offset)
     * @param length length in bytes
     * @param lkey the memory region's L_Key
     */
    public ScatterGatherEntry(long addr, int length, int lkey) {
        set(addr, length, lkey);
    }

    /**
     * Sets all three fields.
     *
     * @param addr   start address
     * @param length length in bytes (unsigned 32-bit in verbs; negative values are rejected at post)
     * @param lkey   L_Key
     * @return this
     */
    public ScatterGatherEntry set(long addr, int length, int lkey) {
        this.addr = addr;
        this.length = length;
        this.lkey = lkey;
        this.segment = null;
        return this;
    }

    /**
     * Describes inline data by the memory that holds it instead of an address: the first
     * {@code length} bytes of {@code source} (which may be a heap segment) are copied at post time.
     * Verbs copy inline data from any address without an L_Key check; in Java an address alone can
     * only be read when it lies in registered memory, so unregistered buffers are passed this way.
     *
     * @param source the bytes to send inline
     * @return this, with addr set to the segment's address (for a heap segment its offset in the array) and lkey 0
     */
    public ScatterGatherEntry inline(MemorySegment source) {
        if (source.byteSize() > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("inline source too large: " + source.byteSize());
        }
        this.addr = source.address();
        this.length = (int) source.byteSize();
        this.lkey = 0;
        this.segment = source;
        return this;
    }

    /**
     * An entry naming DMA-mapped memory (what Linux ULPs post with pd->local_dma_lkey): {@code addr}
     * is a DMA address from {@link Dma#map} and {@code buffer} the CPU memory behind it. A virtual-DMA
     * device copies from or to {@code buffer} at offset {@code addr - buffer.address()} (Java cannot
     * dereference an address); a bus device translates {@code addr} and only uses {@code buffer} for
     * memory it reaches directly.
     *
     * @param addr   DMA address of the first byte
     * @param length length in bytes
     * @param lkey   {@link ProtectionDomain#localDmaLkey()}
     * @param buffer the mapped CPU memory that holds those bytes (the mapped segment or a slice of it)
     * @return this
     */
    public ScatterGatherEntry dma(long addr, int length, int lkey, MemorySegment buffer) {
        this.addr = addr;
        this.length = length;
        this.lkey = lkey;
        this.segment = buffer;
        return this;
    }

    /** {@return the CPU memory given with {@link #inline} or {@link #dma}, or null} */
    public MemorySegment segment() {
        return segment;
    }

    /** {@return the start address} */
    public long addr() {
        return addr;
    }

    /** {@return the length in bytes} */
    public int length() {
        return length;
    }

    /** {@return the L_Key} */
    public int lkey() {
        return lkey;
    }

    /**
     * Sets the start address.
     *
     * @param addr start address
     * @return this
     */
    public ScatterGatherEntry addr(long addr) {
        this.addr = addr;
        this.segment = null;
        return this;
    }

    /**
     * Sets the length in bytes.
     *
     * @param length length in bytes
     * @return this
     */
    public ScatterGatherEntry length(int length) {
        this.length = length;
        return this;
    }

    /**
     * Sets L_Key.
     *
     * @param lkey L_Key
     * @return this
     */
    public ScatterGatherEntry lkey(int lkey) {
        this.lkey = lkey;
        return this;
    }

    @Override
    public String toString() {
        return "sge{addr=0x" + Long.toHexString(addr) + ", length=" + length + ", lkey=0x" + Integer.toHexString(lkey) + '}';
    }
}
