// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.Gid;

/**
 * An inbox slot gives back every header field and the payload it was given (Inbox packs them into words), and an
 * inbox that grows keeps each producer's packets in order.
 */
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

    private static Packet numbered(int producer, int k) {
        Packet p = new Packet();
        p.opcode = Opcodes.RC | Opcodes.ACKNOWLEDGE;
        p.srcQpn = producer;
        p.psn = k;
        return p;
    }

    @Test
    void aGrowingInboxKeepsTheOrderAndLosesOnlyAtItsMaximum() {
        Inbox in = new Inbox(2, 16);
        assertEquals(2, in.capacity());
        int next = 0;
        int taken = 0;
        // fill, take a few (the first ring keeps unread packets when the producers move on), fill again
        for (int round = 0; round < 3; round++) {
            while (in.offer(numbered(0, next))) {
                next++;
            }
            assertEquals(16, in.capacity(), "grown to its maximum, and not beyond");
            for (int i = 0; i < 5; i++) {
                long seq = in.poll();
                assertEquals(taken++, in.packet(seq).psn, "order");
                in.done(seq);
            }
            assertEquals(taken, in.consumed(), "the consumer position counts across rings");
        }
        for (Packet p; (p = in.peek()) != null;) {
            assertEquals(taken, p.psn, "a peeked packet is the next one");
            long seq = in.poll();
            assertEquals(taken++, in.packet(seq).psn, "order");
            in.done(seq);
        }
        assertEquals(next, taken, "every packet offered is taken");
        assertTrue(in.isEmpty());
        assertTrue(!in.claimedAny());
        assertEquals(0, in.size());
    }

    /**
     * Producers on their own threads and the consumer on the test's: every packet arrives once, and each
     * producer's in the order it offered them, while the inbox grows (many small inboxes, so that claims race
     * with growth many times; a producer that claims in a ring after it was replaced would strand its packet).
     */
    @Test
    void producersOnTheirOwnThreadsKeepTheirOrderWhileItGrows() throws Exception {
        int producers = 2;
        int perProducer = 2_000;
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(40);
        for (int round = 0; round < 150 && System.nanoTime() < deadline; round++) {
            Inbox in = new Inbox(2, 32);
            Thread[] ts = new Thread[producers];
            for (int t = 0; t < producers; t++) {
                int id = t;
                ts[t] = Thread.ofPlatform().name("inbox-producer-" + t).start(() -> {
                    Packet p = numbered(id, 0);
                    for (int k = 0; k < perProducer && System.nanoTime() < deadline; ) {
                        p.psn = k;
                        if (in.offer(p)) {
                            k++;
                        } else {
                            Thread.onSpinWait(); // full at its maximum: the consumer frees slots
                        }
                    }
                });
            }
            int[] nextOf = new int[producers];
            StringBuilder log = new StringBuilder();
            int total = 0;
            while (total < producers * perProducer && System.nanoTime() < deadline) {
                long seq = in.poll();
                if (seq < 0) {
                    Thread.onSpinWait();
                    continue;
                }
                Packet p = in.packet(seq);
                int want = nextOf[p.srcQpn];
                int got = p.psn;
                int src = p.srcQpn;
                in.done(seq);
                log.append(src).append(':').append(got).append(' ');
                assertEquals(want, got, "round " + round + ", producer " + src + ": order; " + log);
                nextOf[p.srcQpn] = got + 1;
                total++;
            }
            for (Thread t : ts) {
                t.join(java.util.concurrent.TimeUnit.SECONDS.toMillis(10));
            }
            assertEquals(producers * perProducer, total, "round " + round + ": every packet, within the deadline");
            assertEquals(32, in.capacity(), "it grew under the load");
            assertTrue(in.isEmpty());
        }
    }
}
