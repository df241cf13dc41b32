// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;

/**
 * Flyweight over an Atomic Extended Transport Header (IBA 9.3; rxe_hdr.h struct rxe_atmeth, packed; 28 bytes): {@code 0-7 VA, 8-11 R_Key,
 * 12-19 Swap (CmpSwap) or Add (FetchAdd) data, 20-27 Compare data}. Not thread-safe.
 */
public final class AtomicEth {
    /** Creates an {@code AtomicEth}. */
    public AtomicEth() {
    }

    /** Length of the AtomicETH in bytes. */
    public static final int LENGTH = 28;

    private MemorySegment seg;
    private long off;

    /**
     * Points this view at the header at {@code offset} in {@code segment}.
     *
     * @param segment memory
     * @param offset offset of the header
     * @return this
     */
    public AtomicEth wrap(MemorySegment segment, long offset) {
        this.seg = segment;
        this.off = offset;
        return this;
    }

    /** {@return the offset of the header in the segment} */
    public long offset() {
        return off;
    }

    /** {@return VA (8-byte aligned target)} */
    public long va() {
        return Be.i64(seg, off);
    }

    /**
     * Sets the VA.
     *
     * @param v VA
     * @return this
     */
    public AtomicEth va(long v) {
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
    public AtomicEth rkey(int v) {
        Be.i32(seg, off + 8, v);
        return this;
    }

    /** {@return Swap data (CmpSwap) or Add data (FetchAdd)} */
    public long swapAdd() {
        return Be.i64(seg, off + 12);
    }

    /**
     * Sets swap or Add data.
     *
     * @param v Swap or Add data
     * @return this
     */
    public AtomicEth swapAdd(long v) {
        Be.i64(seg, off + 12, v);
        return this;
    }

    /** {@return Compare data (CmpSwap)} */
    public long compare() {
        return Be.i64(seg, off + 20);
    }

    /**
     * Sets compare data.
     *
     * @param v Compare data
     * @return this
     */
    public AtomicEth compare(long v) {
        Be.i64(seg, off + 20, v);
        return this;
    }
}
