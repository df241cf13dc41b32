// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

/**
 * The BTH opcode table for RC, UC and UD (IBA 9.2 table 42 / include/rdma/ib_pack.h), with what each
 * opcode carries as rxe's {@code rxe_opcode[]} table (drivers/infiniband/sw/rxe/rxe_opcode.c) has it: which
 * extension headers follow the BTH and in what order, whether a payload follows, where the packet sits in a
 * message (first/middle/last/only) and whether it is a request or a response. RC FLUSH and ATOMIC_WRITE are
 * included as rxe (&ge; 6.2) defines them. RD and XRC opcodes are unknown here, as they are to rxe.
 *
 * <p>The opcode's top three bits are the transport (RC 0x00, UC 0x20, RD 0x40, UD 0x60, CNP 0x80 block,
 * XRC 0xA0), the low five the operation. Extension headers always follow the BTH in the IBA order DETH,
 * FETH, RETH | AtomicETH | AETH, AtomicAckETH, ImmDt | IETH (IBA 9.2 and 9.3; the
 * offsets in rxe_opcode.c agree), so {@link #offset} is computed from the mask.
 */
public final class RoceOpcode {
    /** Transport prefix: Reliable Connection. */
    public static final int RC = 0x00;
    /** Transport prefix: Unreliable Connection. */
    public static final int UC = 0x20;
    /** Transport prefix: Unreliable Datagram. */
    public static final int UD = 0x60;
    /** RoCEv2 Congestion Notification Packet (A17.9.3): BTH + 16 reserved bytes, no payload. */
    public static final int CNP = 0x81;
    /** Length of the reserved block after a CNP's BTH (A17.9.3). */
    public static final int CNP_BODY_LENGTH = 16;

    /** Operation: SEND First. */
    public static final int SEND_FIRST = 0x00;
    /** Operation: SEND Middle. */
    public static final int SEND_MIDDLE = 0x01;
    /** Operation: SEND Last. */
    public static final int SEND_LAST = 0x02;
    /** Operation: SEND Last with Immediate. */
    public static final int SEND_LAST_IMM = 0x03;
    /** Operation: SEND Only. */
    public static final int SEND_ONLY = 0x04;
    /** Operation: SEND Only with Immediate. */
    public static final int SEND_ONLY_IMM = 0x05;
    /** Operation: RDMA WRITE First. */
    public static final int WRITE_FIRST = 0x06;
    /** Operation: RDMA WRITE Middle. */
    public static final int WRITE_MIDDLE = 0x07;
    /** Operation: RDMA WRITE Last. */
    public static final int WRITE_LAST = 0x08;
    /** Operation: RDMA WRITE Last with Immediate. */
    public static final int WRITE_LAST_IMM = 0x09;
    /** Operation: RDMA WRITE Only. */
    public static final int WRITE_ONLY = 0x0A;
    /** Operation: RDMA WRITE Only with Immediate. */
    public static final int WRITE_ONLY_IMM = 0x0B;
    /** Operation: RDMA READ Request. */
    public static final int READ_REQUEST = 0x0C;
    /** Operation: RDMA READ Response First. */
    public static final int READ_RESPONSE_FIRST = 0x0D;
    /** Operation: RDMA READ Response Middle. */
    public static final int READ_RESPONSE_MIDDLE = 0x0E;
    /** Operation: RDMA READ Response Last. */
    public static final int READ_RESPONSE_LAST = 0x0F;
    /** Operation: RDMA READ Response Only. */
    public static final int READ_RESPONSE_ONLY = 0x10;
    /** Operation: Acknowledge. */
    public static final int ACKNOWLEDGE = 0x11;
    /** Operation: ATOMIC Acknowledge. */
    public static final int ATOMIC_ACKNOWLEDGE = 0x12;
    /** Operation: CmpSwap. */
    public static final int COMPARE_SWAP = 0x13;
    /** Operation: FetchAdd. */
    public static final int FETCH_ADD = 0x14;
    /** Operation: SEND Last with Invalidate. */
    public static final int SEND_LAST_INV = 0x16;
    /** Operation: SEND Only with Invalidate. */
    public static final int SEND_ONLY_INV = 0x17;
    /** Operation: FLUSH (IBA 1.5). */
    public static final int FLUSH = 0x1C;
    /** Operation: ATOMIC WRITE (IBA 1.5). */
    public static final int ATOMIC_WRITE = 0x1D;

    // Mask bits, after rxe_opcode.h's RXE_*_MASK (values are ours).
    /** Carries a RETH. */
    public static final int M_RETH = 1;
    /** Carries an AtomicETH. */
    public static final int M_ATMETH = 1 << 1;
    /** Carries an AETH. */
    public static final int M_AETH = 1 << 2;
    /** Carries an AtomicAckETH. */
    public static final int M_ATMACK = 1 << 3;
    /** Carries ImmDt. */
    public static final int M_IMMDT = 1 << 4;
    /** Carries an IETH. */
    public static final int M_IETH = 1 << 5;
    /** Carries a DETH. */
    public static final int M_DETH = 1 << 6;
    /** Carries a FETH. */
    public static final int M_FETH = 1 << 7;
    /** A payload may follow the headers. */
    public static final int M_PAYLOAD = 1 << 8;
    /** A request (requester to responder). */
    public static final int M_REQ = 1 << 9;
    /** A response (responder to requester). */
    public static final int M_ACK = 1 << 10;
    /** First packet of a message (FIRST or ONLY). */
    public static final int M_START = 1 << 11;
    /** Middle packet of a message. */
    public static final int M_MIDDLE = 1 << 12;
    /** Last packet of a message (LAST or ONLY). */
    public static final int M_END = 1 << 13;
    /** Part of a SEND. */
    public static final int M_SEND = 1 << 14;
    /** Part of an RDMA WRITE. */
    public static final int M_WRITE = 1 << 15;
    /** An RDMA READ request. */
    public static final int M_READ = 1 << 16;
    /** An atomic request (CmpSwap, FetchAdd). */
    public static final int M_ATOMIC = 1 << 17;
    /** Consumes a receive WQE (first packet of SEND, WRITE with immediate): rxe's RXE_RWR_MASK. */
    public static final int M_RWR = 1 << 18;
    /** Completes a receive WQE (last packet of SEND, WRITE with immediate): rxe's RXE_COMP_MASK. */
    public static final int M_COMP = 1 << 19;
    /** RC FLUSH. */
    public static final int M_FLUSH = 1 << 20;
    /** RC ATOMIC_WRITE. */
    public static final int M_ATOMIC_WRITE = 1 << 21;

    private static final int[] MASK = new int[256];
    private static final String[] NAME = new String[256];
    private static final byte[] LENGTH = new byte[256];
    /** Extension headers in wire order, and their sizes. */
    private static final int[] ORDER = {M_DETH, M_FETH, M_RETH, M_ATMETH, M_AETH, M_ATMACK, M_IMMDT, M_IETH};
    private static final int[] SIZE = {Deth.LENGTH, Feth.LENGTH, Reth.LENGTH, AtomicEth.LENGTH, Aeth.LENGTH,
        AtomicAckEth.LENGTH, ImmDt.LENGTH, Ieth.LENGTH};
    /** OFFSET[opcode * 8 + log2(header bit)]: offset from the BTH, -1 when absent. */
    private static final byte[] OFFSET = new byte[256 * 8];

    static {
        for (int t : new int[] {RC, UC}) {
            String p = t == RC ? "RC_" : "UC_";
            def(t | SEND_FIRST, p + "SEND_FIRST", M_REQ | M_START | M_PAYLOAD | M_SEND | M_RWR);
            def(t | SEND_MIDDLE, p + "SEND_MIDDLE", M_REQ | M_MIDDLE | M_PAYLOAD | M_SEND);
            def(t | SEND_LAST, p + "SEND_LAST", M_REQ | M_END | M_PAYLOAD | M_SEND | M_COMP);
            def(t | SEND_LAST_IMM, p + "SEND_LAST_WITH_IMMEDIATE", M_REQ | M_END | M_PAYLOAD | M_SEND | M_COMP | M_IMMDT);
            def(t | SEND_ONLY, p + "SEND_ONLY", M_REQ | M_START | M_END | M_PAYLOAD | M_SEND | M_RWR | M_COMP);
            def(t | SEND_ONLY_IMM, p + "SEND_ONLY_WITH_IMMEDIATE",
                    M_REQ | M_START | M_END | M_PAYLOAD | M_SEND | M_RWR | M_COMP | M_IMMDT);
            def(t | WRITE_FIRST, p + "RDMA_WRITE_FIRST", M_REQ | M_START | M_PAYLOAD | M_WRITE | M_RETH);
            def(t | WRITE_MIDDLE, p + "RDMA_WRITE_MIDDLE", M_REQ | M_MIDDLE | M_PAYLOAD | M_WRITE);
            def(t | WRITE_LAST, p + "RDMA_WRITE_LAST", M_REQ | M_END | M_PAYLOAD | M_WRITE);
            def(t | WRITE_LAST_IMM, p + "RDMA_WRITE_LAST_WITH_IMMEDIATE",
                    M_REQ | M_END | M_PAYLOAD | M_WRITE | M_IMMDT | M_RWR | M_COMP);
            def(t | WRITE_ONLY, p + "RDMA_WRITE_ONLY", M_REQ | M_START | M_END | M_PAYLOAD | M_WRITE | M_RETH);
            def(t | WRITE_ONLY_IMM, p + "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
                    M_REQ | M_START | M_END | M_PAYLOAD | M_WRITE | M_RETH | M_IMMDT | M_RWR | M_COMP);
        }
        def(RC | READ_REQUEST, "RC_RDMA_READ_REQUEST", M_REQ | M_START | M_END | M_READ | M_RETH);
        def(RC | READ_RESPONSE_FIRST, "RC_RDMA_READ_RESPONSE_FIRST", M_ACK | M_START | M_PAYLOAD | M_AETH);
        // rxe_opcode.c (and IBA 9.2): a READ response MIDDLE carries no AETH.
        def(RC | READ_RESPONSE_MIDDLE, "RC_RDMA_READ_RESPONSE_MIDDLE", M_ACK | M_MIDDLE | M_PAYLOAD);
        def(RC | READ_RESPONSE_LAST, "RC_RDMA_READ_RESPONSE_LAST", M_ACK | M_END | M_PAYLOAD | M_AETH);
        def(RC | READ_RESPONSE_ONLY, "RC_RDMA_READ_RESPONSE_ONLY", M_ACK | M_START | M_END | M_PAYLOAD | M_AETH);
        def(RC | ACKNOWLEDGE, "RC_ACKNOWLEDGE", M_ACK | M_START | M_END | M_AETH);
        def(RC | ATOMIC_ACKNOWLEDGE, "RC_ATOMIC_ACKNOWLEDGE", M_ACK | M_START | M_END | M_AETH | M_ATMACK);
        def(RC | COMPARE_SWAP, "RC_COMPARE_SWAP", M_REQ | M_START | M_END | M_ATOMIC | M_ATMETH);
        def(RC | FETCH_ADD, "RC_FETCH_ADD", M_REQ | M_START | M_END | M_ATOMIC | M_ATMETH);
        def(RC | SEND_LAST_INV, "RC_SEND_LAST_WITH_INVALIDATE", M_REQ | M_END | M_PAYLOAD | M_SEND | M_COMP | M_IETH);
        def(RC | SEND_ONLY_INV, "RC_SEND_ONLY_WITH_INVALIDATE",
                M_REQ | M_START | M_END | M_PAYLOAD | M_SEND | M_RWR | M_COMP | M_IETH);
        // rxe_opcode.c IB_OPCODE_RC_FLUSH: BTH, FETH, RETH and no payload.
        def(RC | FLUSH, "RC_FLUSH", M_REQ | M_START | M_END | M_FLUSH | M_FETH | M_RETH);
        // rxe_opcode.c IB_OPCODE_RC_ATOMIC_WRITE: BTH, RETH, then an 8-byte payload.
        def(RC | ATOMIC_WRITE, "RC_ATOMIC_WRITE", M_REQ | M_START | M_END | M_ATOMIC_WRITE | M_RETH | M_PAYLOAD);
        // UD has SEND Only (with immediate) only; the DETH precedes ImmDt (IBA 9.2, rxe_opcode.c).
        def(UD | SEND_ONLY, "UD_SEND_ONLY", M_REQ | M_START | M_END | M_PAYLOAD | M_SEND | M_RWR | M_COMP | M_DETH);
        def(UD | SEND_ONLY_IMM, "UD_SEND_ONLY_WITH_IMMEDIATE",
                M_REQ | M_START | M_END | M_PAYLOAD | M_SEND | M_RWR | M_COMP | M_DETH | M_IMMDT);
    }

    private RoceOpcode() {
    }

    private static void def(int opcode, String name, int mask) {
        MASK[opcode] = mask;
        NAME[opcode] = name;
        LENGTH[opcode] = (byte) offset0(mask, 0);
        for (int h : ORDER) {
            OFFSET[opcode * 8 + Integer.numberOfTrailingZeros(h)] = (byte) offset0(mask, h);
        }
    }

    /**
     * Offset after BTH of the header {@code which} (one M_ header bit) or, for which == 0, the total
     * length of BTH + extension headers.
     */
    private static int offset0(int mask, int which) {
        int o = Bth.LENGTH;
        for (int i = 0; i < ORDER.length; i++) {
            if (ORDER[i] == which) {
                return (mask & which) != 0 ? o : -1;
            }
            if ((mask & ORDER[i]) != 0) {
                o += SIZE[i];
            }
        }
        return o;
    }

    /**
     * {@return whether it is in this table}
     *
     * @param opcode a BTH opcode
     */
    public static boolean known(int opcode) {
        return MASK[opcode & 0xFF] != 0;
    }

    /**
     * {@return its M_ bits, 0 for an opcode not in the table}
     *
     * @param opcode a BTH opcode
     */
    public static int mask(int opcode) {
        return MASK[opcode & 0xFF];
    }

    /**
     * {@return whether the opcode has any of them}
     *
     * @param opcode a BTH opcode
     * @param m M_ bits
     */
    public static boolean has(int opcode, int m) {
        return (MASK[opcode & 0xFF] & m) != 0;
    }

    /**
     * {@return bytes of BTH + extension headers, 0 if unknown}
     *
     * @param opcode a known BTH opcode
     */
    public static int headerLength(int opcode) {
        return LENGTH[opcode & 0xFF];
    }

    /**
     * {@return the header's offset from the BTH's first byte, -1 if the opcode does not carry it}
     *
     * @param opcode a BTH opcode
     * @param header one of M_RETH, M_ATMETH, M_AETH, M_ATMACK, M_IMMDT, M_IETH, M_DETH, M_FETH
     */
    public static int offset(int opcode, int header) {
        if (MASK[opcode & 0xFF] == 0 || Integer.bitCount(header) != 1 || header > M_FETH) {
            return -1;
        }
        return OFFSET[(opcode & 0xFF) * 8 + Integer.numberOfTrailingZeros(header)];
    }

    /**
     * {@return e.g. "RC_SEND_ONLY", or "0x81" style hex for an unknown opcode}
     *
     * @param opcode a BTH opcode
     */
    public static String name(int opcode) {
        if ((opcode & 0xFF) == CNP) {
            return "CNP";
        }
        String n = NAME[opcode & 0xFF];
        return n != null ? n : "0x" + Integer.toHexString(opcode & 0xFF);
    }

    /**
     * {@return its transport prefix (top three bits)}
     *
     * @param opcode a BTH opcode
     */
    public static int transport(int opcode) {
        return opcode & 0xE0;
    }

    /**
     * {@return its operation (low five bits)}
     *
     * @param opcode a BTH opcode
     */
    public static int operation(int opcode) {
        return opcode & 0x1F;
    }
}
