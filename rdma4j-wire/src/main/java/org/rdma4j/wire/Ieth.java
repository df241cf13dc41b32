// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;

/** Flyweight over the Invalidate Extended Transport Header (IBA 9.3; rxe_hdr.h struct rxe_ieth; 4 bytes): the R_Key to invalidate. */
public final class Ieth {
    /** Length of the IETH in bytes. */
    public static final int LENGTH = 4;

    private MemorySegment seg;
    private long off;

    /**

     * @param segment memory

     * @param offset offset of the header

     * @return this

     */
    public Ieth wrap(MemorySegment segment, long offset) {
        this.seg = segment;
        this.off = offset;
        return this;
    }

    /** @return the offset of the header in the segment */
    public long offset() {
        return off;
    }

    /** @return the R_Key to invalidate */
    public int rkey() {
        return Be.i32(seg, off);
    }

    /**

     * @param v R_Key

     * @return this

     */
    public Ieth rkey(int v) {
        Be.i32(seg, off, v);
        return this;
    }
}
