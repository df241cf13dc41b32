// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.rdma4j.wire.RoceOpcode.*;

import org.junit.jupiter.api.Test;

/** The opcode table against IBA 9.2 table 42 / rxe_opcode.c, written out independently here. */
class RoceOpcodeTest {
    /** {opcode, header length incl. BTH, payload?} for every opcode rxe knows (roce-wire.md 2.3). */
    private static final int[][] TABLE = {
        {0x00, 12, 1}, {0x01, 12, 1}, {0x02, 12, 1}, {0x03, 16, 1}, {0x04, 12, 1}, {0x05, 16, 1},
        {0x06, 28, 1}, {0x07, 12, 1}, {0x08, 12, 1}, {0x09, 16, 1}, {0x0A, 28, 1}, {0x0B, 32, 1},
        {0x0C, 28, 0}, {0x0D, 16, 1}, {0x0E, 12, 1}, {0x0F, 16, 1}, {0x10, 16, 1}, {0x11, 16, 0},
        {0x12, 24, 0}, {0x13, 40, 0}, {0x14, 40, 0}, {0x16, 16, 1}, {0x17, 16, 1}, {0x1C, 32, 0}, {0x1D, 28, 1},
        {0x20, 12, 1}, {0x21, 12, 1}, {0x22, 12, 1}, {0x23, 16, 1}, {0x24, 12, 1}, {0x25, 16, 1},
        {0x26, 28, 1}, {0x27, 12, 1}, {0x28, 12, 1}, {0x29, 16, 1}, {0x2A, 28, 1}, {0x2B, 32, 1},
        {0x64, 20, 1}, {0x65, 24, 1},
    };

    @Test
    void everyKnownOpcodeHasItsLengthAndPayloadRule() {
        int known = 0;
        for (int op = 0; op < 256; op++) {
            if (RoceOpcode.known(op)) {
                known++;
            }
        }
        assertEquals(TABLE.length, known, "no opcode beyond the table");
        for (int[] row : TABLE) {
            String n = RoceOpcode.name(row[0]);
            assertTrue(RoceOpcode.known(row[0]), n);
            assertEquals(row[1], RoceOpcode.headerLength(row[0]), n);
            assertEquals(row[2] == 1, RoceOpcode.has(row[0], M_PAYLOAD), n);
            assertTrue(RoceOpcode.has(row[0], M_REQ) != RoceOpcode.has(row[0], M_ACK), n + " is a request xor a response");
        }
    }

    @Test
    void headerOrderMatchesRxe() {
        assertEquals(12, offset(RC | ATOMIC_ACKNOWLEDGE, M_AETH));
        assertEquals(16, offset(RC | ATOMIC_ACKNOWLEDGE, M_ATMACK));
        assertEquals(12, offset(RC | WRITE_ONLY_IMM, M_RETH));
        assertEquals(28, offset(RC | WRITE_ONLY_IMM, M_IMMDT));
        assertEquals(12, offset(UD | SEND_ONLY_IMM, M_DETH));
        assertEquals(20, offset(UD | SEND_ONLY_IMM, M_IMMDT));
        assertEquals(12, offset(RC | FLUSH, M_FETH));
        assertEquals(16, offset(RC | FLUSH, M_RETH));
        assertEquals(12, offset(RC | SEND_ONLY_INV, M_IETH));
        assertEquals(12, offset(RC | COMPARE_SWAP, M_ATMETH));
        assertEquals(-1, offset(RC | READ_RESPONSE_MIDDLE, M_AETH), "READ response MIDDLE has no AETH");
        assertEquals(-1, offset(RC | SEND_ONLY, M_RETH));
        assertEquals(-1, offset(0x15, M_RETH), "reserved opcode");
        assertEquals(-1, offset(RC | WRITE_FIRST, M_RETH | M_IMMDT), "one header at a time");
    }

    @Test
    void positionsAndKinds() {
        assertTrue(has(RC | SEND_FIRST, M_START) && !has(RC | SEND_FIRST, M_END));
        assertTrue(has(UC | WRITE_MIDDLE, M_MIDDLE));
        assertTrue(has(RC | READ_RESPONSE_ONLY, M_START) && has(RC | READ_RESPONSE_ONLY, M_END));
        assertTrue(has(RC | READ_RESPONSE_LAST, M_ACK));
        assertTrue(has(RC | WRITE_LAST_IMM, M_RWR) && has(RC | WRITE_LAST_IMM, M_COMP));
        assertFalse(has(RC | WRITE_LAST, M_COMP));
        assertFalse(known(UD | SEND_FIRST), "UD is SEND Only only");
        assertFalse(known(UC | READ_REQUEST), "UC has no READ");
        assertFalse(known(0x40), "RD is not supported (nor by rxe)");
        assertFalse(known(CNP), "CNP is parsed specially, not an rxe opcode");
        assertEquals("RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", name(0x0B));
        assertEquals("UD_SEND_ONLY", name(0x64));
        assertEquals("CNP", name(0x81));
        assertEquals("0xff", name(0xFF));
        assertEquals(UC, transport(0x2A));
        assertEquals(WRITE_ONLY, operation(0x2A));
    }
}
