// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;

/** Flyweight over an Atomic Acknowledge Extended Transport Header (IBA 9.3; rxe_hdr.h struct rxe_atmack; 8 bytes): the original remote data. */
public final class AtomicAckEth {
    /** Creates an {@code AtomicAckEth}. */
    public AtomicAckEth() {
    }

    /** Length of the AtomicAckETH in bytes. */
    public static final int LENGTH = 8;

    private MemorySegment seg;
    private long off;

    /**
     * Points this view at the header at {@code offset} in {@code segment}.
     *
     * @param segment memory
     * @param offset offset of the header
     * @return this
     */
    public AtomicAckEth wrap(MemorySegment segment, long offset) {
        this.seg = segment;
        this.off = offset;
        return this;
    }

    /** {@return the offset of the header in the segment} */
    public long offset() {
        return off;
    }

    /** {@return the value the target held before the atomic operation} */
    public long origRemoteData() {
        return Be.i64(seg, off);
    }

    /**
     * Sets the original remote data.
     *
     * @param v original remote data
     * @return this
     */
    public AtomicAckEth origRemoteData(long v) {
        Be.i64(seg, off, v);
        return this;
    }
}
