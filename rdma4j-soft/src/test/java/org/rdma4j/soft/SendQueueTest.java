// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WrOpcode;

/** The send queue's packed slots give back what was put in, whatever the bits, and its indexes move as named. */
class SendQueueTest {
    private static final int MAX_SGE = 3;

    @Property(tries = 500)
    void everyFieldReadsBackAsWritten(@ForAll long wrId, @ForAll WrOpcode op, @ForAll int flags, @ForAll int imm,
                                      @ForAll long remoteAddr, @ForAll int rkey, @ForAll long compareAdd,
                                      @ForAll long swap, @ForAll int remoteQpn, @ForAll int remoteQkey,
                                      @ForAll boolean signaled, @ForAll @IntRange(min = 0, max = MAX_SGE) int numSge,
                                      @ForAll long addr, @ForAll @IntRange(min = 0) int len, @ForAll int lkey,
                                      @ForAll int firstPsn, @ForAll int lastPsn, @ForAll long sent,
                                      @ForAll long received, @ForAll long length, @ForAll long crc,
                                      @ForAll @IntRange(min = 0, max = 6) int posts) {
        SendQueue q = new SendQueue(5, MAX_SGE, 16, null);
        MemorySegment seg = Arena.global().allocate(8);
        for (int k = 0; k < posts; k++) {
            q.publish(q.headSlot()); // a different slot each run, and neighbours written before
        }
        for (int k = 0; k < posts; k++) {
            q.advanceComp();
        }
        int s = q.headSlot();
        SendWorkRequest wr = new SendWorkRequest(MAX_SGE).wrId(wrId).opcode(op).sendFlags(flags).immData(imm)
                .remoteAddr(remoteAddr).rkey(rkey).compareAdd(compareAdd).swap(swap).remoteQpn(remoteQpn)
                .remoteQkey(remoteQkey).numSge(numSge);
        q.write(s, wr, signaled);
        for (int i = 0; i < numSge; i++) {
            q.setSge(s, i, wr.sge(i).dma(addr + i, len - i < 0 ? len : len - i, lkey ^ i, i == 1 ? seg : null));
        }
        q.setLength(s, length);
        q.publish(s);
        q.setPsns(s, firstPsn, lastPsn);
        q.setSent(s, sent);
        q.setReceived(s, received);
        q.setPostCrc(s, crc);
        q.setTookCredit(s, true);
        q.setState(s, SendQueue.REWOUND);

        assertEquals(wrId, q.wrId(s));
        assertSame(op, q.opcode(s));
        assertEquals(flags, q.flags(s));
        assertEquals((flags & SendFlags.INLINE) != 0, q.inline(s));
        assertEquals(signaled, q.signaled(s));
        assertEquals(numSge, q.numSge(s));
        assertEquals(imm, q.imm(s));
        assertEquals(rkey, q.rkey(s));
        assertEquals(remoteAddr, q.remoteAddr(s));
        assertEquals(compareAdd, q.compareAdd(s));
        assertEquals(swap, q.swap(s));
        assertEquals(remoteQpn, q.remoteQpn(s));
        assertEquals(remoteQkey, q.remoteQkey(s));
        assertNull(q.ah(s));
        for (int i = 0; i < numSge; i++) {
            assertEquals(addr + i, q.sgeAddr(s, i));
            assertEquals(len - i < 0 ? len : len - i, q.sgeLen(s, i));
            assertEquals(lkey ^ i, q.sgeLkey(s, i));
            assertSame(i == 1 ? seg : null, q.sgeBuf(s, i));
        }
        assertEquals(length, q.length(s));
        assertEquals(firstPsn, q.firstPsn(s));
        assertEquals(lastPsn, q.lastPsn(s));
        assertEquals(sent, q.sent(s));
        assertEquals(received, q.received(s));
        assertEquals(crc, q.postCrc(s));
        assertTrue(q.tookCredit(s));
        assertEquals(SendQueue.REWOUND, q.state(s));
        assertEquals((long) s * 16, q.inlineOff(s));
    }

    @Test
    void publishStartsAWqeWithNoProgress() {
        SendQueue q = new SendQueue(1, 1, 8, null);
        int s = q.headSlot();
        q.setState(s, SendQueue.DONE);
        q.setSent(s, 7);
        q.setReceived(s, 7);
        q.setTookCredit(s, true);
        q.publish(s);
        assertEquals(SendQueue.POSTED, q.state(s));
        assertEquals(0, q.sent(s));
        assertEquals(0, q.received(s));
        assertFalse(q.tookCredit(s));
    }

    @Test
    void indexesMoveAsTheRolesNameThem() {
        SendQueue q = new SendQueue(3, 1, 8, null);
        assertEquals(4, q.slots());
        assertTrue(q.isEmpty());
        assertFalse(q.hasWork());
        for (int i = 0; i < 3; i++) {
            assertFalse(q.isFull());
            q.publish(q.headSlot());
        }
        assertTrue(q.isFull()); // max_send_wr, not the ring's power of two
        assertEquals(3, q.count());
        assertTrue(q.hasWork());
        assertTrue(q.reqAtComp());
        assertEquals(q.compSlot(), q.reqSlot());

        q.advanceReq();
        q.advanceReq();
        assertTrue(q.reqIsLast());
        assertFalse(q.reqAtComp());
        q.rewindReq(); // go-back-N
        assertTrue(q.reqAtComp());
        assertEquals(0, q.req());

        q.advanceComp(); // the completer finished the WQE the requester is resending
        assertTrue(q.reqBehindComp());
        q.rewindReq();
        assertFalse(q.reqBehindComp());
        assertEquals(1, q.req());
        assertFalse(q.isFull());

        q.moveReq(3);
        assertFalse(q.hasWork());
        q.publish(q.headSlot()); // slot 3 of 4
        assertTrue(q.isFull());
        q.advanceComp();
        q.publish(q.headSlot()); // the ring wraps
        assertEquals(0, q.slot(q.head() - 1));
        assertTrue(q.hasWork());
        q.reqToHead();
        assertFalse(q.hasWork());
        assertEquals(3, q.count());

        q.reset();
        assertTrue(q.isEmpty());
        assertEquals(0, q.head());
        assertEquals(0, q.req());
        assertEquals(0, q.comp());
    }
}
