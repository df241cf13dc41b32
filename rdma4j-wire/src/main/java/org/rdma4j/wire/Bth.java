// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;

/**
 * Flyweight over a Base Transport Header (IBA 9.2, 12 bytes). Wrap it at an offset, then read or write
 * fields in place; nothing is copied and nothing is allocated. Not thread-safe.
 *
 * <pre>
 *  0: OpCode              1: SE|M|PadCnt(2)|TVer(4)   2-3: P_Key
 *  4: FECN|BECN|Resv6     5-7: DestQP (24)
 *  8: AckReq|Resv7        9-11: PSN (24)
 * </pre>
 */
public final class Bth {
    /** Creates a {@code Bth}. */
    public Bth() {
    }

    /** Length of the BTH in bytes. */
    public static final int LENGTH = 12;
    /** The only transport header version defined (IBA 9.2); rxe drops others (rxe_recv.c hdr_check "bad tver"). */
    public static final int TVER = 0;
    /** The default (full-member) partition key; rxe sends it and accepts keys that match it (pkey_match). */
    public static final int DEFAULT_PKEY = 0xFFFF;

    private MemorySegment seg;
    private long off;

    /**
     * Points this view at the header at {@code offset} in {@code segment}.
     *
     * @param segment memory holding the header
     * @param offset  offset of the header's first byte
     * @return this
     */
    public Bth wrap(MemorySegment segment, long offset) {
        this.seg = segment;
        this.off = offset;
        return this;
    }

    /** {@return the wrapped segment} */
    public MemorySegment segment() {
        return seg;
    }

    /** {@return the offset of the header in the segment} */
    public long offset() {
        return off;
    }

    /** {@return OpCode (byte 0): transport in bits 7..5, operation in bits 4..0} */
    public int opcode() {
        return Be.u8(seg, off);
    }

    /**
     * Sets opCode.
     *
     * @param v OpCode
     * @return this
     */
    public Bth opcode(int v) {
        Be.u8(seg, off, v);
        return this;
    }

    /** {@return SE: the solicited-event bit} */
    public boolean solicited() {
        return (Be.u8(seg, off + 1) & 0x80) != 0;
    }

    /**
     * Sets the SE.
     *
     * @param v SE
     * @return this
     */
    public Bth solicited(boolean v) {
        Be.bits(seg, off + 1, 0x80, v ? 0x80 : 0);
        return this;
    }

    /** {@return M: the migration-request bit (rxe sends 0)} */
    public boolean migReq() {
        return (Be.u8(seg, off + 1) & 0x40) != 0;
    }

    /**
     * Sets the M.
     *
     * @param v M
     * @return this
     */
    public Bth migReq(boolean v) {
        Be.bits(seg, off + 1, 0x40, v ? 0x40 : 0);
        return this;
    }

    /** {@return PadCnt: pad bytes (0..3) between the payload and the ICRC} */
    public int padCount() {
        return (Be.u8(seg, off + 1) >>> 4) & 3;
    }

    /**
     * Sets padCnt (0..3).
     *
     * @param v PadCnt (0..3)
     * @return this
     */
    public Bth padCount(int v) {
        Be.bits(seg, off + 1, 0x30, v << 4);
        return this;
    }

    /** {@return TVer: transport header version, 0 for IBA 1.x} */
    public int tver() {
        return Be.u8(seg, off + 1) & 0x0F;
    }

    /**
     * Sets the TVer (0..15).
     *
     * @param v TVer (0..15)
     * @return this
     */
    public Bth tver(int v) {
        Be.bits(seg, off + 1, 0x0F, v);
        return this;
    }

    /** {@return P_Key} */
    public int pkey() {
        return Be.u16(seg, off + 2);
    }

    /**
     * Sets the P_Key (16 bits).
     *
     * @param v P_Key (16 bits)
     * @return this
     */
    public Bth pkey(int v) {
        Be.u16(seg, off + 2, v);
        return this;
    }

    /** {@return FECN: forward explicit congestion notification (masked in the ICRC)} */
    public boolean fecn() {
        return (Be.u8(seg, off + 4) & 0x80) != 0;
    }

    /**
     * Sets the FECN.
     *
     * @param v FECN
     * @return this
     */
    public Bth fecn(boolean v) {
        Be.bits(seg, off + 4, 0x80, v ? 0x80 : 0);
        return this;
    }

    /** {@return BECN: backward explicit congestion notification (set in a CNP; masked in the ICRC)} */
    public boolean becn() {
        return (Be.u8(seg, off + 4) & 0x40) != 0;
    }

    /**
     * Sets the BECN.
     *
     * @param v BECN
     * @return this
     */
    public Bth becn(boolean v) {
        Be.bits(seg, off + 4, 0x40, v ? 0x40 : 0);
        return this;
    }

    /** {@return the 6 reserved bits of byte 4 (sent as 0, masked in the ICRC)} */
    public int resv6() {
        return Be.u8(seg, off + 4) & 0x3F;
    }

    /**
     * Sets the 6 reserved bits of byte 4.
     *
     * @param v the 6 reserved bits of byte 4
     * @return this
     */
    public Bth resv6(int v) {
        Be.bits(seg, off + 4, 0x3F, v);
        return this;
    }

    /** {@return DestQP (24 bits)} */
    public int destQp() {
        return Be.u24(seg, off + 5);
    }

    /**
     * Sets destQP (24 bits).
     *
     * @param v DestQP (24 bits)
     * @return this
     */
    public Bth destQp(int v) {
        Be.u24(seg, off + 5, v & 0xFF_FFFF);
        return this;
    }

    /** {@return A: acknowledge request} */
    public boolean ackReq() {
        return (Be.u8(seg, off + 8) & 0x80) != 0;
    }

    /**
     * Sets the A.
     *
     * @param v A
     * @return this
     */
    public Bth ackReq(boolean v) {
        Be.bits(seg, off + 8, 0x80, v ? 0x80 : 0);
        return this;
    }

    /** {@return the 7 reserved bits of byte 8 (sent as 0, covered by the ICRC)} */
    public int resv7() {
        return Be.u8(seg, off + 8) & 0x7F;
    }

    /**
     * Sets the 7 reserved bits of byte 8.
     *
     * @param v the 7 reserved bits of byte 8
     * @return this
     */
    public Bth resv7(int v) {
        Be.bits(seg, off + 8, 0x7F, v);
        return this;
    }

    /** {@return PSN (24 bits)} */
    public int psn() {
        return Be.u24(seg, off + 9);
    }

    /**
     * Sets the PSN (24 bits).
     *
     * @param v PSN (24 bits)
     * @return this
     */
    public Bth psn(int v) {
        Be.u24(seg, off + 9, v & 0xFF_FFFF);
        return this;
    }
}
