// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.wire.RoceOpcode;

/**
 * The engine's names for the BTH opcode table, which is {@link RoceOpcode} (one table, one set of mask bits:
 * wire and engine agree by construction). What remains here is which opcodes the engine executes: RC, UC
 * and UD SEND/WRITE/READ/atomics and their responses, as the engine implements them (no SEND with
 * invalidate, FLUSH or ATOMIC_WRITE yet: {@link #mask} is 0 for those, and the receive dispatcher drops
 * them as malformed, as rxe drops opcodes its QP cannot take). The constants are aliases kept while the
 * engine's roles move onto {@link RoceOpcode} directly.
 */
final class Opcodes {
    static final int RC = RoceOpcode.RC;
    static final int UC = RoceOpcode.UC;
    static final int UD = RoceOpcode.UD;
    static final int SEND_FIRST = RoceOpcode.SEND_FIRST;
    static final int SEND_MIDDLE = RoceOpcode.SEND_MIDDLE;
    static final int SEND_LAST = RoceOpcode.SEND_LAST;
    static final int SEND_LAST_IMM = RoceOpcode.SEND_LAST_IMM;
    static final int SEND_ONLY = RoceOpcode.SEND_ONLY;
    static final int SEND_ONLY_IMM = RoceOpcode.SEND_ONLY_IMM;
    static final int WRITE_FIRST = RoceOpcode.WRITE_FIRST;
    static final int WRITE_MIDDLE = RoceOpcode.WRITE_MIDDLE;
    static final int WRITE_LAST = RoceOpcode.WRITE_LAST;
    static final int WRITE_LAST_IMM = RoceOpcode.WRITE_LAST_IMM;
    static final int WRITE_ONLY = RoceOpcode.WRITE_ONLY;
    static final int WRITE_ONLY_IMM = RoceOpcode.WRITE_ONLY_IMM;
    static final int READ_REQUEST = RoceOpcode.READ_REQUEST;
    static final int READ_RESPONSE_FIRST = RoceOpcode.READ_RESPONSE_FIRST;
    static final int READ_RESPONSE_MIDDLE = RoceOpcode.READ_RESPONSE_MIDDLE;
    static final int READ_RESPONSE_LAST = RoceOpcode.READ_RESPONSE_LAST;
    static final int READ_RESPONSE_ONLY = RoceOpcode.READ_RESPONSE_ONLY;
    static final int ACKNOWLEDGE = RoceOpcode.ACKNOWLEDGE;
    static final int ATOMIC_ACKNOWLEDGE = RoceOpcode.ATOMIC_ACKNOWLEDGE;
    static final int COMPARE_SWAP = RoceOpcode.COMPARE_SWAP;
    static final int FETCH_ADD = RoceOpcode.FETCH_ADD;

    static final int M_REQ = RoceOpcode.M_REQ;
    static final int M_ACK = RoceOpcode.M_ACK;
    static final int M_START = RoceOpcode.M_START;
    static final int M_MIDDLE = RoceOpcode.M_MIDDLE;
    static final int M_END = RoceOpcode.M_END;
    static final int M_PAYLOAD = RoceOpcode.M_PAYLOAD;
    static final int M_RETH = RoceOpcode.M_RETH;
    static final int M_IMM = RoceOpcode.M_IMMDT;
    static final int M_AETH = RoceOpcode.M_AETH;
    static final int M_ATMETH = RoceOpcode.M_ATMETH;
    static final int M_ATMACK = RoceOpcode.M_ATMACK;
    static final int M_DETH = RoceOpcode.M_DETH;
    static final int M_SEND = RoceOpcode.M_SEND;
    static final int M_WRITE = RoceOpcode.M_WRITE;
    static final int M_READ = RoceOpcode.M_READ;
    static final int M_ATOMIC = RoceOpcode.M_ATOMIC;
    static final int M_RWR = RoceOpcode.M_RWR;
    static final int M_COMP = RoceOpcode.M_COMP;

    /** RoceOpcode's mask of each opcode the engine executes, 0 for the others. */
    private static final int[] MASK = new int[256];

    static {
        for (int t : new int[] {RC, UC}) {
            for (int op = SEND_FIRST; op <= WRITE_ONLY_IMM; op++) {
                engine(t | op);
            }
        }
        for (int op = READ_REQUEST; op <= FETCH_ADD; op++) {
            engine(RC | op);
        }
        engine(UD | SEND_ONLY);
        engine(UD | SEND_ONLY_IMM);
    }

    private Opcodes() {
    }

    private static void engine(int opcode) {
        MASK[opcode] = RoceOpcode.mask(opcode);
    }

    /** {@return the mask bits of a BTH opcode the engine executes, 0 for any other} */
    static int mask(int opcode) {
        return MASK[opcode & 0xFF];
    }

    /** {@return the opcode's name for traces} */
    static String name(int opcode) {
        return RoceOpcode.name(opcode);
    }

    static boolean has(int opcode, int m) {
        return (MASK[opcode & 0xFF] & m) != 0;
    }
}
