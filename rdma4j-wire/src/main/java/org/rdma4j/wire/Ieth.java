// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;

/** Flyweight over the Invalidate Extended Transport Header (IBA 9.3; rxe_hdr.h struct rxe_ieth; 4 bytes): the R_Key to invalidate. */
public final class Ieth {
    /** Creates an {@code Ieth}. */
    public Ieth() {
    }

    /** Length of the IETH in bytes. */
    public static final int LENGTH = 4;

    private MemorySegment seg;
    private long off;

    /**
     * Points this view at the header at {@code offset} in {@code segment}.
     *
     * @param segment memory
     * @param offset offset of the header
     * @return this
     */
    public Ieth wrap(MemorySegment segment, long offset) {
        this.seg = segment;
        this.off = offset;
        return this;
    }

    /** {@return the offset of the header in the segment} */
    public long offset() {
        return off;
    }

    /** {@return the R_Key to invalidate} */
    public int rkey() {
        return Be.i32(seg, off);
    }

    /**
     * Sets the R_Key.
     *
     * @param v R_Key
     * @return this
     */
    public Ieth rkey(int v) {
        Be.i32(seg, off, v);
        return this;
    }
}
