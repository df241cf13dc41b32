// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.Gid;

/** An inbox slot gives back every header field and the payload it was given (Inbox packs them into words). */
class InboxTest {
    private static Packet header(int opcode) {
        Packet p = new Packet();
        p.opcode = opcode;
        p.solicited = true;
        p.ackReq = true;
        p.hopLimit = 0xFE;
        p.trafficClass = 0xA5;
        p.pkey = 0xFFFF;
        p.destQpn = 0xFF_FFFF;
        p.psn = 0xFF_FFFE;
        p.va = 0xFEDC_BA98_7654_3210L;
        p.rkey = 0x8765_4321;
        p.dmaLen = 0x8000_0001; // above 2^31: unsigned in the RETH
        p.imm = 0xDEAD_BEEF;
        p.syndrome = Aeth.TYPE_RNR_NAK | 12;
        p.msn = 0xAB_CDEF;
        p.qkey = 0x8000_0002;
        p.srcQpn = 0x12_3456;
        p.sgid = new Gid(1, 2);
        p.dgid = new Gid(3, 4);
        return p;
    }

    private static void assertHeader(Packet want, Packet got) {
        assertEquals(want.opcode, got.opcode, "opcode");
        assertEquals(want.solicited, got.solicited, "solicited");
        assertEquals(want.ackReq, got.ackReq, "ackReq");
        assertEquals(want.hopLimit, got.hopLimit, "hopLimit");
        assertEquals(want.trafficClass, got.trafficClass, "trafficClass");
        assertEquals(want.pkey, got.pkey, "pkey");
        assertEquals(want.destQpn, got.destQpn, "destQpn");
        assertEquals(want.psn, got.psn, "psn");
        assertEquals(want.va, got.va, "va");
        assertEquals(want.rkey, got.rkey, "rkey");
        assertEquals(want.dmaLen, got.dmaLen, "dmaLen");
        assertEquals(want.imm, got.imm, "imm");
        assertEquals(want.syndrome, got.syndrome, "syndrome");
        assertEquals(want.msn, got.msn, "msn");
        assertEquals(want.qkey, got.qkey, "qkey");
        assertEquals(want.srcQpn, got.srcQpn, "srcQpn");
        assertEquals(want.swapAdd, got.swapAdd, "swapAdd");
        assertEquals(want.compare, got.compare, "compare");
        assertEquals(want.origValue, got.origValue, "origValue");
        assertSame(want.sgid, got.sgid, "sgid");
        assertSame(want.dgid, got.dgid, "dgid");
        assertNull(got.sender, "a held packet has no sender");
    }

    @Test
    void everyFieldAndEachPayloadSizeComeBack() {
        Inbox in = new Inbox(4);
        for (int len : new int[] {0, 1, 8, 63, 64, 65, 4096}) {
            for (boolean stable : new boolean[] {true, false}) {
                Packet p = header(Opcodes.RC | Opcodes.SEND_ONLY);
                MemorySegment src = MemorySegment.ofArray(new byte[len + 3]);
                for (int i = 0; i < len + 3; i++) {
                    src.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i * 7 + len));
                }
                if (len > 0) {
                    Sgl s = new Sgl(1);
                    s.set(src, 0, len + 3);
                    p.payload = s;
                    p.payloadOff = 3;
                }
                p.payloadLen = len;
                p.payloadStable = stable;
                assertTrue(in.offer(p));
                long seq = in.poll();
                Packet got = in.packet(seq);
                assertHeader(p, got);
                assertEquals(len, got.payloadLen, "payloadLen");
                if (len > 0) {
                    MemorySegment dst = MemorySegment.ofArray(new byte[len]);
                    got.copyPayloadTo(dst, 0);
                    assertEquals(-1, dst.mismatch(src.asSlice(3, len)), "payload of " + len + " bytes, stable " + stable);
                }
                in.done(seq);
            }
        }
    }

    @Test
    void atomicOperandsAndAPeekedSlotComeBack() {
        Inbox in = new Inbox(2);
        Packet p = header(Opcodes.RC | Opcodes.COMPARE_SWAP);
        p.swapAdd = -1;
        p.compare = Long.MIN_VALUE;
        p.origValue = 0x0123_4567_89AB_CDEFL;
        assertTrue(in.offer(p));
        assertHeader(p, in.peek());
        long seq = in.poll();
        assertHeader(p, in.packet(seq));
        in.done(seq);
        assertNull(in.peek(), "empty after done");
    }
}
