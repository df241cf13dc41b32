// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;

/**
 * Flyweight over the Immediate Data header (IBA 9.3; rxe_hdr.h struct rxe_immdt; 4 bytes). The 32 bits are opaque: they travel
 * unchanged from the sender's work request to the receiver's completion (a {@code __be32} in verbs).
 */
public final class ImmDt {
    /** Creates an {@code ImmDt}. */
    public ImmDt() {
    }

    /** Length of ImmDt in bytes. */
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
    public ImmDt wrap(MemorySegment segment, long offset) {
        this.seg = segment;
        this.off = offset;
        return this;
    }

    /** {@return the offset of the header in the segment} */
    public long offset() {
        return off;
    }

    /** {@return the immediate data, read big-endian} */
    public int imm() {
        return Be.i32(seg, off);
    }

    /**
     * Sets the immediate data, written big-endian.
     *
     * @param v immediate data, written big-endian
     * @return this
     */
    public ImmDt imm(int v) {
        Be.i32(seg, off, v);
        return this;
    }
}
