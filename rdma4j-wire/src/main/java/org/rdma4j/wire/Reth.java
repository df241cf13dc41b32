// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;

/**
 * Flyweight over an RDMA Extended Transport Header (IBA 9.3; rxe_hdr.h struct rxe_reth; 16 bytes): {@code 0-7 VA, 8-11 R_Key,
 * 12-15 DMA Length}. Carried by RDMA WRITE FIRST/ONLY, READ REQUEST, ATOMIC_WRITE and FLUSH. Not thread-safe.
 */
public final class Reth {
    /** Creates a {@code Reth}. */
    public Reth() {
    }

    /** Length of the RETH in bytes. */
    public static final int LENGTH = 16;

    private MemorySegment seg;
    private long off;

    /**
     * Points this view at the header at {@code offset} in {@code segment}.
     *
     * @param segment memory
     * @param offset offset of the header
     * @return this
     */
    public Reth wrap(MemorySegment segment, long offset) {
        this.seg = segment;
        this.off = offset;
        return this;
    }

    /** {@return the offset of the header in the segment} */
    public long offset() {
        return off;
    }

    /** {@return VA: the remote virtual address} */
    public long va() {
        return Be.i64(seg, off);
    }

    /**
     * Sets the VA.
     *
     * @param v VA
     * @return this
     */
    public Reth va(long v) {
        Be.i64(seg, off, v);
        return this;
    }

    /** {@return R_Key} */
    public int rkey() {
        return Be.i32(seg, off + 8);
    }

    /**
     * Sets the R_Key.
     *
     * @param v R_Key
     * @return this
     */
    public Reth rkey(int v) {
        Be.i32(seg, off + 8, v);
        return this;
    }

    /** {@return DMA Length, the whole message's length (unsigned 32 bits in an int)} */
    public int dmaLength() {
        return Be.i32(seg, off + 12);
    }

    /**
     * Sets the DMA Length.
     *
     * @param v DMA Length
     * @return this
     */
    public Reth dmaLength(int v) {
        Be.i32(seg, off + 12, v);
        return this;
    }
}
