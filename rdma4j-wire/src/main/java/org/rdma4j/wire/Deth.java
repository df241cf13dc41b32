// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;

/** Flyweight over a Datagram Extended Transport Header (IBA 9.3; rxe_hdr.h struct rxe_deth; 8 bytes): {@code 0-3 Q_Key, 4 reserved, 5-7 SrcQP}. */
public final class Deth {
    /** Creates a {@code Deth}. */
    public Deth() {
    }

    /** Length of the DETH in bytes. */
    public static final int LENGTH = 8;
    /** The Q_Key of the general services interface QP1 (IBA management chapter; rxe check_keys uses it for QP1); CM MADs carry it. */
    public static final int GSI_QKEY = 0x80010000;

    private MemorySegment seg;
    private long off;

    /**
     * Points this view at the header at {@code offset} in {@code segment}.
     *
     * @param segment memory
     * @param offset offset of the header
     * @return this
     */
    public Deth wrap(MemorySegment segment, long offset) {
        this.seg = segment;
        this.off = offset;
        return this;
    }

    /** {@return the offset of the header in the segment} */
    public long offset() {
        return off;
    }

    /** {@return Q_Key} */
    public int qkey() {
        return Be.i32(seg, off);
    }

    /**
     * Sets the Q_Key.
     *
     * @param v Q_Key
     * @return this
     */
    public Deth qkey(int v) {
        Be.i32(seg, off, v);
        return this;
    }

    /** {@return the reserved byte 4 (sent as 0)} */
    public int reserved() {
        return Be.u8(seg, off + 4);
    }

    /**
     * Sets the reserved byte 4.
     *
     * @param v the reserved byte 4
     * @return this
     */
    public Deth reserved(int v) {
        Be.u8(seg, off + 4, v);
        return this;
    }

    /** {@return SrcQP (24 bits)} */
    public int srcQp() {
        return Be.u24(seg, off + 5);
    }

    /**
     * Sets srcQP (24 bits).
     *
     * @param v SrcQP (24 bits)
     * @return this
     */
    public Deth srcQp(int v) {
        Be.u24(seg, off + 5, v & 0xFF_FFFF);
        return this;
    }
}
