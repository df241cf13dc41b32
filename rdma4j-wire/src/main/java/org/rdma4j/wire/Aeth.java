// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;

/**
 * Flyweight over an ACK Extended Transport Header (IBA 9.3; rxe_hdr.h struct rxe_aeth; 4 bytes): {@code 0 Syndrome, 1-3 MSN}.
 * The syndrome's bits 6..5 give the kind (00 ACK, 01 RNR NAK, 11 NAK; rxe_hdr.h enum aeth_syndrome) and bits 4..0 the
 * credit count, RNR timer or NAK code. Not thread-safe.
 */
public final class Aeth {
    /** Creates an {@code Aeth}. */
    public Aeth() {
    }

    /** Length of the AETH in bytes. */
    public static final int LENGTH = 4;
    /** Syndrome bits 6..5 = 00: ACK; bits 4..0 a credit count. */
    public static final int ACK = 0x00;
    /** Syndrome bits 6..5 = 01: RNR NAK; bits 4..0 the RNR timer code. */
    public static final int RNR_NAK = 0x20;
    /** Syndrome bits 6..5 = 11: NAK; bits 4..0 the NAK code. */
    public static final int NAK = 0x60;
    /** ACK credit code 0x1F: "invalid credit count", what rxe always sends (no end-to-end flow control). */
    public static final int CREDITS_INVALID = 0x1F;
    /** NAK code 0: PSN sequence error. */
    public static final int NAK_PSN_SEQUENCE_ERROR = 0;
    /** NAK code 1: invalid request. */
    public static final int NAK_INVALID_REQUEST = 1;
    /** NAK code 2: remote access error. */
    public static final int NAK_REMOTE_ACCESS_ERROR = 2;
    /** NAK code 3: remote operational error. */
    public static final int NAK_REMOTE_OPERATIONAL_ERROR = 3;
    /** NAK code 4: invalid RD request. */
    public static final int NAK_INVALID_RD_REQUEST = 4;

    // Whole syndromes, named as rxe_hdr.h names them (enum aeth_syndrome): what the engine sends and tests.
    /**
     * Mask of the syndrome's type: bits 7..5 (rxe AETH_TYPE_MASK; bit 7 is reserved, so a syndrome with it set
     * matches none of the types below).
     */
    public static final int TYPE_MASK = 0xE0;
    /** Syndrome type ACK (rxe AETH_ACK). */
    public static final int TYPE_ACK = ACK;
    /** Syndrome type RNR NAK (rxe AETH_RNR_NAK). */
    public static final int TYPE_RNR_NAK = RNR_NAK;
    /** Syndrome type NAK (rxe AETH_NAK). */
    public static final int TYPE_NAK = NAK;
    /** An ACK with the invalid credit count: rxe AETH_ACK_UNLIMITED, the only ACK rxe sends. */
    public static final int ACK_UNLIMITED = ACK | CREDITS_INVALID;
    /** NAK, PSN sequence error (rxe AETH_NAK_PSN_SEQ_ERROR). */
    public static final int NAK_PSN_SEQ_ERROR = NAK | NAK_PSN_SEQUENCE_ERROR;
    /** NAK, invalid request (rxe AETH_NAK_INVALID_REQ). */
    public static final int NAK_INVALID_REQ = NAK | NAK_INVALID_REQUEST;
    /** NAK, remote access error (rxe AETH_NAK_REM_ACC_ERR). */
    public static final int NAK_REM_ACC_ERR = NAK | NAK_REMOTE_ACCESS_ERROR;
    /** NAK, remote operational error (rxe AETH_NAK_REM_OP_ERR). */
    public static final int NAK_REM_OP_ERR = NAK | NAK_REMOTE_OPERATIONAL_ERROR;

    /** The RNR NAK timer field's values, codes 0..31, in microseconds (IBA table 45; rxe rnrnak_usec). */
    private static final long[] RNR_USEC = {
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920,
        2_560, 3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880,
        163_840, 245_760, 327_680, 491_520,
    };

    /**
     * The delay an RNR NAK asks for.
     *
     * @param code an RNR timer code: the low five bits of an RNR NAK's syndrome, or a QP's min_rnr_timer
     * @return the delay in nanoseconds (IBA table 45; code 0 is the longest, 655.36 ms)
     */
    public static long rnrTimerNs(int code) {
        return RNR_USEC[code & 0x1F] * 1_000L;
    }

    private MemorySegment seg;
    private long off;

    /**
     * Points this view at the header at {@code offset} in {@code segment}.
     *
     * @param segment memory
     * @param offset offset of the header
     * @return this
     */
    public Aeth wrap(MemorySegment segment, long offset) {
        this.seg = segment;
        this.off = offset;
        return this;
    }

    /** {@return the offset of the header in the segment} */
    public long offset() {
        return off;
    }

    /** {@return the syndrome byte (bit 7 reserved)} */
    public int syndrome() {
        return Be.u8(seg, off);
    }

    /**
     * Sets the syndrome.
     *
     * @param v syndrome
     * @return this
     */
    public Aeth syndrome(int v) {
        Be.u8(seg, off, v);
        return this;
    }

    /** {@return the kind of the syndrome: {@link #ACK}, {@link #RNR_NAK}, {@link #NAK} or 0x40 (reserved)} */
    public int kind() {
        return syndrome() & 0x60;
    }

    /** {@return syndrome bits 4..0: credit code, RNR timer code or NAK code} */
    public int code() {
        return syndrome() & 0x1F;
    }

    /** {@return MSN: message sequence number (24 bits)} */
    public int msn() {
        return Be.u24(seg, off + 1);
    }

    /**
     * Sets the MSN (24 bits).
     *
     * @param v MSN (24 bits)
     * @return this
     */
    public Aeth msn(int v) {
        Be.u24(seg, off + 1, v & 0xFF_FFFF);
        return this;
    }
}
