// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;
import org.rdma4j.wire.RoceOpcode;

/** The engine's opcode names are the wire table's: same bits, and only the opcodes the engine executes. */
class OpcodesTest {
    @Test
    void shouldGiveTheWireTablesMaskForEveryOpcodeTheEngineExecutesAndZeroForTheRest() {
        int executed = 0;
        for (int op = 0; op < 256; op++) {
            int t = op & 0xE0;
            int o = op & 0x1F;
            boolean engine = (t == RoceOpcode.RC || t == RoceOpcode.UC) && o <= RoceOpcode.WRITE_ONLY_IMM
                    || t == RoceOpcode.RC && o >= RoceOpcode.READ_REQUEST && o <= RoceOpcode.FETCH_ADD
                    || op == (RoceOpcode.UD | RoceOpcode.SEND_ONLY) || op == (RoceOpcode.UD | RoceOpcode.SEND_ONLY_IMM);
            assertEquals(engine ? RoceOpcode.mask(op) : 0, Opcodes.mask(op), RoceOpcode.name(op));
            if (engine) {
                executed++;
                assertEquals(true, RoceOpcode.known(op), RoceOpcode.name(op));
            }
        }
        assertEquals(2 * 12 + 9 + 2, executed);
        // in the table but not executed: SEND with invalidate, FLUSH, ATOMIC_WRITE
        assertEquals(0, Opcodes.mask(RoceOpcode.RC | RoceOpcode.SEND_ONLY_INV));
        assertEquals(0, Opcodes.mask(RoceOpcode.RC | RoceOpcode.FLUSH));
        assertEquals(0, Opcodes.mask(RoceOpcode.RC | RoceOpcode.ATOMIC_WRITE));
    }

    @Test
    void shouldNameTheAethSyndromesAsRxeDoes() {
        assertEquals(0x1F, Aeth.ACK_UNLIMITED);
        assertEquals(0x60, Aeth.NAK_PSN_SEQ_ERROR);
        assertEquals(0x61, Aeth.NAK_INVALID_REQ);
        assertEquals(0x62, Aeth.NAK_REM_ACC_ERR);
        assertEquals(0x63, Aeth.NAK_REM_OP_ERR);
        assertEquals(0xE0, Aeth.TYPE_MASK);
        assertEquals(655_360_000L, Aeth.rnrDelayNs(0));
        assertEquals(10_000L, Aeth.rnrDelayNs(1));
        assertEquals(491_520_000L, Aeth.rnrDelayNs(31));
    }
}
