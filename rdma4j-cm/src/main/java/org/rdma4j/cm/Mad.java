// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import org.rdma4j.verbs.Gid;

/**
 * A MAD as bytes: the 24-byte common header ({@code struct ib_mad_hdr}, IBA 13.4.3) and big-endian field
 * access for the class data behind it. CM messages are always one full 256-byte MAD (no RMPP). Field
 * helpers take offsets from the start of the MAD; bit fields are given as (byte offset, number of bits,
 * shift from the least significant bit) of a big-endian word, as Linux's {@code IBA_FIELD*_LOC} macros
 * describe them (include/rdma/iba.h).
 */
final class Mad {
    /** Every MAD on QP1 is 256 bytes (Linux: {@code sizeof(struct ib_mad)}). */
    static final int SIZE = 256;
    /** The common header. */
    static final int HDR = 24;
    /** IB_MGMT_BASE_VERSION. */
    static final int BASE_VERSION = 1;
    /** IB_MGMT_CLASS_CM. */
    static final int CLASS_CM = 0x07;
    /** IB_CM_CLASS_VERSION ("IB spec 1.2"). */
    static final int CM_CLASS_VERSION = 2;
    /** IB_MGMT_METHOD_GET. */
    static final int METHOD_GET = 0x01;
    /** IB_MGMT_METHOD_SET. */
    static final int METHOD_SET = 0x02;
    /** IB_MGMT_METHOD_SEND: every CM message. */
    static final int METHOD_SEND = 0x03;
    /** IB_MGMT_METHOD_RESP: the response bit. */
    static final int METHOD_RESP = 0x80;

    // header offsets
    static final int OFF_BASE_VERSION = 0;
    static final int OFF_CLASS = 1;
    static final int OFF_CLASS_VERSION = 2;
    static final int OFF_METHOD = 3;
    static final int OFF_STATUS = 4;
    static final int OFF_TID = 8;
    static final int OFF_ATTR_ID = 16;
    static final int OFF_ATTR_MOD = 20;

    private Mad() {
    }

    /** Writes the common header of a CM message ({@code cm_format_mad_hdr}): v1, class 7, version 2, Send. */
    static void cmHeader(byte[] m, int attrId, long tid) {
        m[OFF_BASE_VERSION] = BASE_VERSION;
        m[OFF_CLASS] = CLASS_CM;
        m[OFF_CLASS_VERSION] = CM_CLASS_VERSION;
        m[OFF_METHOD] = METHOD_SEND;
        put16(m, OFF_STATUS, 0);
        put16(m, 6, 0);
        put64(m, OFF_TID, tid);
        put16(m, OFF_ATTR_ID, attrId);
        put16(m, 18, 0);
        put32(m, OFF_ATTR_MOD, 0);
    }

    static int baseVersion(byte[] m) {
        return m[OFF_BASE_VERSION] & 0xFF;
    }

    static int mgmtClass(byte[] m) {
        return m[OFF_CLASS] & 0xFF;
    }

    static int classVersion(byte[] m) {
        return m[OFF_CLASS_VERSION] & 0xFF;
    }

    static int method(byte[] m) {
        return m[OFF_METHOD] & 0xFF;
    }

    static long tid(byte[] m) {
        return get64(m, OFF_TID);
    }

    static int attrId(byte[] m) {
        return get16(m, OFF_ATTR_ID);
    }

    // ------------------------------------------------------------------ big-endian access

    static int get8(byte[] m, int off) {
        return m[off] & 0xFF;
    }

    static void put8(byte[] m, int off, int v) {
        m[off] = (byte) v;
    }

    static int get16(byte[] m, int off) {
        return ((m[off] & 0xFF) << 8) | (m[off + 1] & 0xFF);
    }

    static void put16(byte[] m, int off, int v) {
        m[off] = (byte) (v >>> 8);
        m[off + 1] = (byte) v;
    }

    static int get32(byte[] m, int off) {
        return ((m[off] & 0xFF) << 24) | ((m[off + 1] & 0xFF) << 16) | ((m[off + 2] & 0xFF) << 8) | (m[off + 3] & 0xFF);
    }

    static void put32(byte[] m, int off, int v) {
        m[off] = (byte) (v >>> 24);
        m[off + 1] = (byte) (v >>> 16);
        m[off + 2] = (byte) (v >>> 8);
        m[off + 3] = (byte) v;
    }

    static long get64(byte[] m, int off) {
        return ((long) get32(m, off) << 32) | (get32(m, off + 4) & 0xFFFF_FFFFL);
    }

    static void put64(byte[] m, int off, long v) {
        put32(m, off, (int) (v >>> 32));
        put32(m, off + 4, (int) v);
    }

    /** The top 24 bits of the BE32 word at {@code off} (QPNs, PSNs, EECNs: {@code IBA_FIELD32_LOC(off, 24)}). */
    static int get24(byte[] m, int off) {
        return get32(m, off) >>> 8;
    }

    /** Sets the top 24 bits of the BE32 word at {@code off}, keeping its low byte. */
    static void put24(byte[] m, int off, int v) {
        m[off] = (byte) (v >>> 16);
        m[off + 1] = (byte) (v >>> 8);
        m[off + 2] = (byte) v;
    }

    /** {@code bits} bits of byte {@code off}, {@code shift} above its least significant bit. */
    static int bits(byte[] m, int off, int shift, int bits) {
        return ((m[off] & 0xFF) >>> shift) & ((1 << bits) - 1);
    }

    /** Sets {@code bits} bits of byte {@code off} at {@code shift}; the other bits of the byte stay. */
    static void bits(byte[] m, int off, int shift, int bits, int v) {
        int mask = ((1 << bits) - 1) << shift;
        m[off] = (byte) ((m[off] & ~mask) | ((v << shift) & mask));
    }

    static Gid getGid(byte[] m, int off) {
        return new Gid(get64(m, off), get64(m, off + 8));
    }

    static void putGid(byte[] m, int off, Gid g) {
        put64(m, off, g.hi());
        put64(m, off + 8, g.lo());
    }

    static byte[] slice(byte[] m, int off, int len) {
        byte[] out = new byte[len];
        System.arraycopy(m, off, out, 0, len);
        return out;
    }

    /** Copies {@code data} (at most {@code max} bytes) to {@code off}; the rest of the field stays zero. */
    static void putData(byte[] m, int off, int max, byte[] data) {
        if (data != null && data.length > 0) {
            System.arraycopy(data, 0, m, off, Math.min(max, data.length));
        }
    }

    /** {@return a hex dump, 16 bytes a line, for traces and test failures} */
    static String hex(byte[] m) {
        StringBuilder sb = new StringBuilder(m.length * 3 + m.length / 16 * 6);
        for (int i = 0; i < m.length; i++) {
            if (i % 16 == 0) {
                sb.append(i == 0 ? "" : "\n").append(String.format("%04x ", i));
            }
            sb.append(String.format(" %02x", m[i] & 0xFF));
        }
        return sb.toString();
    }
}
