// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;

/**
 * Flyweight over the Flush Extended Transport Header (IBA 1.5 / RDMA FLUSH, 4 bytes), carried before the
 * RETH by RC FLUSH (rxe_opcode.c {@code IB_OPCODE_RC_FLUSH}): bits 3..0 of the last byte are the
 * placement type, bits 5..4 the selectivity level. The word is kept whole so reserved bits survive a copy.
 */
public final class Feth {
    /** Creates a {@code Feth}. */
    public Feth() {
    }

    /** Length of the FETH in bytes. */
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
    public Feth wrap(MemorySegment segment, long offset) {
        this.seg = segment;
        this.off = offset;
        return this;
    }

    /** {@return the offset of the header in the segment} */
    public long offset() {
        return off;
    }

    /** {@return the whole 32-bit FETH word} */
    public int word() {
        return Be.i32(seg, off);
    }

    /**
     * Sets the whole 32-bit FETH word.
     *
     * @param v the whole 32-bit FETH word
     * @return this
     */
    public Feth word(int v) {
        Be.i32(seg, off, v);
        return this;
    }

    /** {@return placement type (bits 3..0)} */
    public int placementType() {
        return word() & 0xF;
    }

    /** {@return selectivity level (bits 5..4)} */
    public int selectivityLevel() {
        return (word() >>> 4) & 3;
    }
}
