// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

/**
 * BTH opcodes (IBA 9.2, table 42; include/rdma/ib_pack.h) and what each carries, as rxe's
 * {@code rxe_opcode[]} table does. The top three bits are the transport (RC 0x00, UC 0x20, UD 0x60), the
 * low five the operation.
 */
final class Opcodes {
    static final int RC = 0x00;
    static final int UC = 0x20;
    static final int UD = 0x60;

    static final int SEND_FIRST = 0x00;
    static final int SEND_MIDDLE = 0x01;
    static final int SEND_LAST = 0x02;
    static final int SEND_LAST_IMM = 0x03;
    static final int SEND_ONLY = 0x04;
    static final int SEND_ONLY_IMM = 0x05;
    static final int WRITE_FIRST = 0x06;
    static final int WRITE_MIDDLE = 0x07;
    static final int WRITE_LAST = 0x08;
    static final int WRITE_LAST_IMM = 0x09;
    static final int WRITE_ONLY = 0x0A;
    static final int WRITE_ONLY_IMM = 0x0B;
    static final int READ_REQUEST = 0x0C;
    static final int READ_RESPONSE_FIRST = 0x0D;
    static final int READ_RESPONSE_MIDDLE = 0x0E;
    static final int READ_RESPONSE_LAST = 0x0F;
    static final int READ_RESPONSE_ONLY = 0x10;
    static final int ACKNOWLEDGE = 0x11;
    static final int ATOMIC_ACKNOWLEDGE = 0x12;
    static final int COMPARE_SWAP = 0x13;
    static final int FETCH_ADD = 0x14;

    // Masks, after rxe_hdr.h's RXE_*_MASK.
    static final int M_REQ = 1;
    static final int M_ACK = 1 << 1;
    static final int M_START = 1 << 2;
    static final int M_MIDDLE = 1 << 3;
    static final int M_END = 1 << 4;
    static final int M_PAYLOAD = 1 << 5;
    static final int M_RETH = 1 << 6;
    static final int M_IMM = 1 << 7;
    static final int M_AETH = 1 << 8;
    static final int M_ATMETH = 1 << 9;
    static final int M_ATMACK = 1 << 10;
    static final int M_DETH = 1 << 11;
    static final int M_SEND = 1 << 12;
    static final int M_WRITE = 1 << 13;
    static final int M_READ = 1 << 14;
    static final int M_ATOMIC = 1 << 15;
    /** The request consumes a receive WQE (SEND, WRITE with immediate). */
    static final int M_RWR = 1 << 16;
    /** The request completes a receive WQE. */
    static final int M_COMP = 1 << 17;

    private static final int[] MASK = new int[256];
    private static final String[] NAME = new String[256];

    static {
        for (int t : new int[] {RC, UC}) {
            String p = t == RC ? "RC_" : "UC_";
            def(t | SEND_FIRST, p + "SEND_FIRST", M_REQ | M_START | M_PAYLOAD | M_SEND | M_RWR);
            def(t | SEND_MIDDLE, p + "SEND_MIDDLE", M_REQ | M_MIDDLE | M_PAYLOAD | M_SEND);
            def(t | SEND_LAST, p + "SEND_LAST", M_REQ | M_END | M_PAYLOAD | M_SEND | M_COMP);
            def(t | SEND_LAST_IMM, p + "SEND_LAST_WITH_IMMEDIATE", M_REQ | M_END | M_PAYLOAD | M_SEND | M_COMP | M_IMM);
            def(t | SEND_ONLY, p + "SEND_ONLY", M_REQ | M_START | M_END | M_PAYLOAD | M_SEND | M_RWR | M_COMP);
            def(t | SEND_ONLY_IMM, p + "SEND_ONLY_WITH_IMMEDIATE",
                    M_REQ | M_START | M_END | M_PAYLOAD | M_SEND | M_RWR | M_COMP | M_IMM);
            def(t | WRITE_FIRST, p + "RDMA_WRITE_FIRST", M_REQ | M_START | M_PAYLOAD | M_WRITE | M_RETH);
            def(t | WRITE_MIDDLE, p + "RDMA_WRITE_MIDDLE", M_REQ | M_MIDDLE | M_PAYLOAD | M_WRITE);
            def(t | WRITE_LAST, p + "RDMA_WRITE_LAST", M_REQ | M_END | M_PAYLOAD | M_WRITE);
            def(t | WRITE_LAST_IMM, p + "RDMA_WRITE_LAST_WITH_IMMEDIATE",
                    M_REQ | M_END | M_PAYLOAD | M_WRITE | M_IMM | M_RWR | M_COMP);
            def(t | WRITE_ONLY, p + "RDMA_WRITE_ONLY", M_REQ | M_START | M_END | M_PAYLOAD | M_WRITE | M_RETH);
            def(t | WRITE_ONLY_IMM, p + "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
                    M_REQ | M_START | M_END | M_PAYLOAD | M_WRITE | M_RETH | M_IMM | M_RWR | M_COMP);
        }
        def(RC | READ_REQUEST, "RC_RDMA_READ_REQUEST", M_REQ | M_START | M_END | M_READ | M_RETH);
        def(RC | READ_RESPONSE_FIRST, "RC_RDMA_READ_RESPONSE_FIRST", M_ACK | M_START | M_PAYLOAD | M_AETH);
        def(RC | READ_RESPONSE_MIDDLE, "RC_RDMA_READ_RESPONSE_MIDDLE", M_ACK | M_MIDDLE | M_PAYLOAD);
        def(RC | READ_RESPONSE_LAST, "RC_RDMA_READ_RESPONSE_LAST", M_ACK | M_END | M_PAYLOAD | M_AETH);
        def(RC | READ_RESPONSE_ONLY, "RC_RDMA_READ_RESPONSE_ONLY", M_ACK | M_START | M_END | M_PAYLOAD | M_AETH);
        def(RC | ACKNOWLEDGE, "RC_ACKNOWLEDGE", M_ACK | M_START | M_END | M_AETH);
        def(RC | ATOMIC_ACKNOWLEDGE, "RC_ATOMIC_ACKNOWLEDGE", M_ACK | M_START | M_END | M_AETH | M_ATMACK);
        def(RC | COMPARE_SWAP, "RC_COMPARE_SWAP", M_REQ | M_START | M_END | M_ATOMIC | M_ATMETH);
        def(RC | FETCH_ADD, "RC_FETCH_ADD", M_REQ | M_START | M_END | M_ATOMIC | M_ATMETH);
        def(UD | SEND_ONLY, "UD_SEND_ONLY", M_REQ | M_START | M_END | M_PAYLOAD | M_SEND | M_RWR | M_COMP | M_DETH);
        def(UD | SEND_ONLY_IMM, "UD_SEND_ONLY_WITH_IMMEDIATE",
                M_REQ | M_START | M_END | M_PAYLOAD | M_SEND | M_RWR | M_COMP | M_DETH | M_IMM);
    }

    private Opcodes() {
    }

    private static void def(int opcode, String name, int mask) {
        MASK[opcode] = mask;
        NAME[opcode] = name;
    }

    /** {@return the mask bits of a BTH opcode, 0 for an opcode we do not implement} */
    static int mask(int opcode) {
        return MASK[opcode & 0xFF];
    }

    /** {@return the opcode's name for traces} */
    static String name(int opcode) {
        String n = NAME[opcode & 0xFF];
        return n != null ? n : "0x" + Integer.toHexString(opcode & 0xFF);
    }

    static boolean has(int opcode, int m) {
        return (MASK[opcode & 0xFF] & m) != 0;
    }
}
