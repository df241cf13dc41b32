// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The connection messages of IPoIB connected mode as rdma4j carries them (a documented deviation from RFC
 * 4755, which uses the InfiniBand CM's MADs on QP1: the soft device has no QP1 or CM, so the same
 * REQ/REP/RTU/REJ exchange travels as UD datagrams between the interfaces' IPoIB UD QPs, under the IPoIB
 * header with the IEEE 802 "local experimental" EtherType 0x88B5). Every field the RFC's exchange carries
 * is kept: the service ID ({@code 0x1000000000000000 | UD QPN} of the target, RFC 4755 section 6.1 and
 * Linux's {@code IPOIB_CM_IETF_ID}), the local and remote communication IDs, the sender's RC QPN and
 * starting PSN (the CM REQ/REP fields), and the RFC 4755 private data: the sender's UD QPN and its receive
 * MTU (the largest IPoIB packet, header included, it accepts on the connection).
 *
 * <pre>
 * offset  size  field
 *  0      1     version (1)
 *  1      1     op: 1 REQ, 2 REP, 3 RTU, 4 REJ
 *  2      2     reserved, 0
 *  4      4     local communication ID (non-zero)
 *  8      4     remote communication ID (0 in a REQ)
 * 12      8     service ID
 * 20      4     RC QPN (24 bits)
 * 24      4     starting PSN (24 bits)
 * 28      4     private data: the sender's UD QPN (24 bits)
 * 32      4     private data: receive MTU
 * </pre>
 * All big-endian; 36 bytes exactly.
 */
final class CmMessage {
    static final int TYPE = 0x88B5;
    static final int BYTES = 36;
    static final int VERSION = 1;
    static final int OP_REQ = 1;
    static final int OP_REP = 2;
    static final int OP_RTU = 3;
    static final int OP_REJ = 4;
    /** Linux ipoib_cm.c IPOIB_CM_IETF_ID: RFC 4755's service ID prefix, the UD QPN in the low 24 bits. */
    static final long IETF_ID = 0x1000_0000_0000_0000L;

    private static final ValueLayout.OfInt INT_BE = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfLong LONG_BE = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    int op;
    int localId;
    int remoteId;
    long serviceId;
    int rcQpn;
    int psn;
    int udQpn;
    int mtu;

    /** Why a message was refused; OK for a well-formed one. */
    enum Verdict { OK, LENGTH, VERSION, OP, RESERVED, FIELD }

    static long serviceId(int udQpn) {
        return IETF_ID | (udQpn & 0xFF_FFFFL);
    }

    /**
     * Decodes and checks the form of a message (what it means for a connection is the caller's).
     *
     * @param seg    the buffer
     * @param off    where the message starts (after the IPoIB header)
     * @param length the bytes that arrived for it
     * @return the verdict; the fields are set only when OK
     */
    Verdict read(MemorySegment seg, long off, int length) {
        if (length != BYTES) {
            return Verdict.LENGTH;
        }
        int w0 = seg.get(INT_BE, off);
        if ((w0 >>> 24) != VERSION) {
            return Verdict.VERSION;
        }
        int o = (w0 >>> 16) & 0xFF;
        if (o < OP_REQ || o > OP_REJ) {
            return Verdict.OP;
        }
        if ((w0 & 0xFFFF) != 0) {
            return Verdict.RESERVED;
        }
        int lid = seg.get(INT_BE, off + 4);
        int rid = seg.get(INT_BE, off + 8);
        long sid = seg.get(LONG_BE, off + 12);
        int q = seg.get(INT_BE, off + 20);
        int p = seg.get(INT_BE, off + 24);
        int u = seg.get(INT_BE, off + 28);
        int m = seg.get(INT_BE, off + 32);
        if (lid == 0 || (q & 0xFF00_0000) != 0 || (p & 0xFF00_0000) != 0 || (u & 0xFF00_0000) != 0
                || (o == OP_REQ) != (rid == 0) || (sid & 0xFFFF_FFFF_FF00_0000L) != IETF_ID) {
            return Verdict.FIELD;
        }
        op = o;
        localId = lid;
        remoteId = rid;
        serviceId = sid;
        rcQpn = q;
        psn = p;
        udQpn = u;
        mtu = m;
        return Verdict.OK;
    }

    /** Writes a message at {@code off}. */
    static void write(MemorySegment seg, long off, int op, int localId, int remoteId, long serviceId, int rcQpn,
                      int psn, int udQpn, int mtu) {
        seg.set(INT_BE, off, (VERSION << 24) | (op << 16));
        seg.set(INT_BE, off + 4, localId);
        seg.set(INT_BE, off + 8, remoteId);
        seg.set(LONG_BE, off + 12, serviceId);
        seg.set(INT_BE, off + 20, rcQpn & 0xFF_FFFF);
        seg.set(INT_BE, off + 24, psn & 0xFF_FFFF);
        seg.set(INT_BE, off + 28, udQpn & 0xFF_FFFF);
        seg.set(INT_BE, off + 32, mtu);
    }
}
