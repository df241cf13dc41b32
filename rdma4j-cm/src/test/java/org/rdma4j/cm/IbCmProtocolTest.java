// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.CmId;

/**
 * The IB CM on the wire, against Linux's cm.c: retransmission of identical bytes with the same TID at
 * Linux's intervals, recovery from each lost message, MRA after a duplicate REQ, TIMEWAIT, stale
 * connections (REJ 10 plus DREQ), the REJ an abandoned REQ leaves, and the MAD layer's counted drops.
 */
class IbCmProtocolTest {
    private static Duration ms(long m) {
        return Duration.ofMillis(m);
    }

    @Test
    void anUnansweredReqIsResentIdenticallyAtLinuxsIntervalThenUnreachable() {
        try (CmPair p = new CmPair(1)) {
            p.tap[1].drop = (a, n) -> true; // B answers nothing
            p.listen();
            p.connect();
            p.settle();
            List<CmPair.Sent> reqs = p.tap[0].of(CmMsg.REQ);
            assertEquals(1, reqs.size());
            // timeout_ms = 2 * convert(packet life time 16) + convert(CM response timeout 20) = 512 + 4096
            p.advance(ms(4607));
            assertEquals(1, p.tap[0].of(CmMsg.REQ).size());
            p.advance(ms(2));
            reqs = p.tap[0].of(CmMsg.REQ);
            assertEquals(2, reqs.size());
            assertArrayEquals(reqs.get(0).mad(), reqs.get(1).mad(), "a retransmission is the same bytes, TID included");
            p.advance(ms(4608 * 14), ms(4608));
            assertEquals(16, p.tap[0].of(CmMsg.REQ).size(), "15 retries (CMA_MAX_CM_RETRIES)");
            assertNull(p.poll(0));
            p.advance(ms(4608));
            CmEvent u = p.expect(0, CmEventType.UNREACHABLE);
            assertEquals(-110, u.status());
            u.ack();
            assertEquals(15, p.cm[0].counter(CmCounter.MAD_RETRANSMISSIONS));
            assertEquals(1, p.cm[0].counter(CmCounter.MAD_TIMEOUTS));
        }
    }

    @Test
    void aLostRepIsResentAndTheConnectionComesUpOnce() {
        try (CmPair p = new CmPair(2)) {
            p.tap[1].drop = (a, n) -> a == CmMsg.REP && n == 0;
            p.listen();
            p.connect();
            p.accept();
            assertNull(p.poll(0), "the REP was lost");
            p.advance(ms(4096)); // the passive side's REP timer: convert(REQ.LocalCMResponseTimeout 20)
            p.expectAck(0, CmEventType.ESTABLISHED);
            p.expectAck(1, CmEventType.ESTABLISHED);
            assertEquals(2, p.tap[1].of(CmMsg.REP).size());
            assertEquals(1, p.tap[0].of(CmMsg.RTU).size());
            p.advance(ms(70_000), ms(1000));
            assertNull(p.poll(0));
            assertNull(p.poll(1));
        }
    }

    @Test
    void aLostRtuIsRecoveredByTheDuplicateRep() {
        try (CmPair p = new CmPair(3)) {
            p.tap[0].drop = (a, n) -> a == CmMsg.RTU && n == 0;
            p.listen();
            p.connect();
            p.accept();
            p.expectAck(0, CmEventType.ESTABLISHED);
            assertNull(p.poll(1), "the RTU was lost");
            p.advance(ms(4096));
            p.expectAck(1, CmEventType.ESTABLISHED);
            assertEquals(2, p.tap[0].of(CmMsg.RTU).size(), "cm_dup_rep_handler answers with the RTU again");
            assertEquals(1, p.cm[0].counter(CmCounter.CM_DUPLICATE_REP));
        }
    }

    @Test
    void aDuplicateReqBeforeTheAcceptGetsAnMraThatHoldsTheRetransmissions() {
        try (CmPair p = new CmPair(4)) {
            p.listen();
            p.connect();
            CmEvent req = p.expect(1, CmEventType.CONNECT_REQUEST); // the application is slow to accept
            p.advance(ms(4608));
            List<CmPair.Sent> mras = p.tap[1].of(CmMsg.MRA);
            assertEquals(1, mras.size(), "MRA_REQ_SENT answers a duplicate REQ with an MRA");
            byte[] mra = mras.getFirst().mad();
            assertEquals(CmMsg.MSG_REQ, Mad.bits(mra, CmMsg.MRA_BYTE32, 6, 2));
            assertEquals(24, Mad.bits(mra, CmMsg.MRA_BYTE33, 3, 5), "CMA_CM_MRA_SETTING");
            assertEquals(Mad.tid(p.tap[0].of(CmMsg.REQ).getFirst().mad()), Mad.tid(mra), "an MRA carries the REQ's TID");
            // the REQ now waits convert(24) + convert(av.timeout 17) = 65536 + 512 ms
            p.advance(ms(60_000), ms(1000));
            assertEquals(2, p.tap[0].of(CmMsg.REQ).size());
            CmId s = req.id();
            req.ack();
            p.qp(s);
            s.accept(null);
            p.expectAck(0, CmEventType.ESTABLISHED);
            p.expectAck(1, CmEventType.ESTABLISHED);
        }
    }

    @Test
    void aLostDreqIsResent() {
        try (CmPair p = new CmPair(5)) {
            p.tap[0].drop = (a, n) -> a == CmMsg.DREQ && n == 0;
            CmPair.Conn conn = p.establish();
            conn.client().disconnect();
            assertNull(p.poll(1), "the DREQ was lost");
            p.advance(ms(4608)); // the active side's timeout_ms
            p.expectAck(1, CmEventType.DISCONNECTED);
            conn.server().disconnect();
            p.expectAck(0, CmEventType.DISCONNECTED);
            assertEquals(2, p.tap[0].of(CmMsg.DREQ).size());
        }
    }

    @Test
    void aLostDrepIsAnsweredInTimewaitOrByTheCmOnceTheIdIsGone() {
        try (CmPair p = new CmPair(15)) {
            p.tap[1].drop = (a, n) -> a == CmMsg.DREP && n == 0;
            p.tap[0].hold = (a, n) -> a == CmMsg.DREQ && n == 1; // the first retransmission comes late
            CmPair.Conn conn = p.establish();
            conn.client().disconnect();
            p.expectAck(1, CmEventType.DISCONNECTED);
            conn.server().disconnect(); // its DREP is lost; B is in TIMEWAIT for 512 ms
            p.advance(ms(4608)); // A resends its DREQ; the tap holds it
            p.release(0); // ... and delivers it while B is in TIMEWAIT? No: 4.6 s > 512 ms, B left TIMEWAIT
            p.expectAck(1, CmEventType.TIMEWAIT_EXIT);
            assertNull(p.poll(0), "an IDLE ID ignores the DREQ (cm_dreq_handler)");
            conn.server().close(); // once B's ID is gone, cm_dreq_handler finds no ID and answers anyway (cm_issue_drep)
            p.advance(ms(4608));
            p.expectAck(0, CmEventType.DISCONNECTED);
            assertTrue(p.cm[1].counter(CmCounter.CM_DUPLICATE_DREQ) >= 1);
            assertEquals(2, p.tap[1].of(CmMsg.DREP).size());
        }
    }

    /**
     * What bench/cm-bench's accept rounds count once per connection: closing a connected ID without
     * {@code rdma_disconnect} sends one DREQ and forgets the ID ({@code cm_destroy_id}: ESTABLISHED -> DREQ
     * sent -> DREQ_SENT -> TIMEWAIT -> erased from the local ID table), so the peer's DREP finds no ID and is
     * dropped as unmatched, as {@code cm_drep_handler}'s failed {@code cm_acquire_id} drops it. Nothing is
     * resent: the DREQ's retransmission is cancelled with the ID.
     */
    @Test
    void theDrepAnsweringTheDreqOfAClosedIdIsDroppedUnmatchedOnceAndNothingIsResent() {
        try (CmPair p = new CmPair(45)) {
            CmPair.Conn conn = p.establish();
            conn.client().destroyQp();
            conn.client().close(); // no rdma_disconnect first
            p.expectAck(1, CmEventType.DISCONNECTED);
            conn.server().disconnect(); // B's DREP, to an ID A no longer has
            p.settle();
            assertEquals(1, p.tap[0].of(CmMsg.DREQ).size());
            assertEquals(1, p.tap[1].of(CmMsg.DREP).size());
            assertEquals(1, p.cm[0].counter(CmCounter.CM_DROP_UNMATCHED), "the DREP");
            assertEquals(0, p.cm[1].counter(CmCounter.CM_DROP_UNMATCHED));
            p.advance(ms(70_000), ms(1000)); // past every DREQ retransmission and TIMEWAIT
            assertEquals(1, p.tap[0].of(CmMsg.DREQ).size(), "the DREQ of a destroyed ID is not resent");
            assertEquals(0, p.cm[0].counter(CmCounter.MAD_RETRANSMISSIONS));
            assertEquals(0, p.cm[1].counter(CmCounter.MAD_RETRANSMISSIONS));
            assertEquals(1, p.cm[0].counter(CmCounter.CM_DROP_UNMATCHED));
            assertEquals(0, p.cm[0].counter(CmCounter.CM_DUPLICATE_DREQ) + p.cm[1].counter(CmCounter.CM_DUPLICATE_DREQ));
            p.expectAck(1, CmEventType.TIMEWAIT_EXIT);
            assertNull(p.poll(0));
        }
    }

    @Test
    void aDreqInTimewaitIsAnsweredWithTheDrepAgain() {
        try (CmPair p = new CmPair(25)) {
            p.tap[1].drop = (a, n) -> a == CmMsg.DREP && n == 0;
            CmPair.Conn conn = p.establish();
            conn.client().disconnect();
            p.expectAck(1, CmEventType.DISCONNECTED);
            conn.server().disconnect();
            byte[] dreq = p.tap[0].of(CmMsg.DREQ).getFirst().mad();
            MadPort a = p.cm[0].ports().getFirst();
            CmAv toB = new CmAv(a, p.dev[1].open().queryGid(1, 0), 0, 64, 0, 0, 0);
            p.cm[0].runLocked(() -> a.sendNow(dreq, toB)); // a duplicate DREQ while B is in TIMEWAIT
            p.settle();
            p.expectAck(0, CmEventType.DISCONNECTED);
            assertEquals(1, p.cm[1].counter(CmCounter.CM_DUPLICATE_DREQ));
        }
    }

    @Test
    void anUnansweredDreqEndsInDisconnectedWithTimeout() {
        try (CmPair p = new CmPair(35)) {
            CmPair.Conn conn = p.establish();
            p.tap[1].drop = (a, n) -> true; // B goes silent (its application never calls rdma_disconnect anyway)
            conn.client().disconnect();
            p.advance(ms(4608 * 15), ms(4608));
            assertNull(p.poll(0));
            p.advance(ms(4608));
            CmEvent d = p.expect(0, CmEventType.DISCONNECTED);
            assertEquals(-110, d.status(), "DREQ_ERROR: DISCONNECTED with -ETIMEDOUT");
            d.ack();
        }
    }

    @Test
    void timewaitLastsConvertOfTheAckTimeout() {
        try (CmPair p = new CmPair(6)) {
            CmPair.Conn conn = p.establish();
            conn.client().disconnect();
            p.expectAck(1, CmEventType.DISCONNECTED);
            conn.server().disconnect();
            p.expectAck(0, CmEventType.DISCONNECTED);
            p.advance(ms(510));
            assertNull(p.poll(0));
            assertNull(p.poll(1));
            p.advance(ms(4)); // av.timeout 17: 2^(17-8) = 512 ms
            p.expectAck(0, CmEventType.TIMEWAIT_EXIT);
            p.expectAck(1, CmEventType.TIMEWAIT_EXIT);
        }
    }

    @Test
    void aReqFromTheQpOfALiveConnectionIsStaleAndTearsItDown() {
        try (CmPair p = new CmPair(7)) {
            CmPair.Conn conn = p.establish();
            // a REQ with a fresh comm ID from the same CA GUID and QPN (a peer that restarted and reused its QPN)
            byte[] req = p.tap[0].of(CmMsg.REQ).getFirst().mad().clone();
            Mad.put32(req, CmMsg.LOCAL_COMM_ID, 0x1234_5678);
            MadPort a = p.cm[0].ports().getFirst();
            CmAv toB = new CmAv(a, p.dev[1].open().queryGid(1, 0), 0, 64, 0, 0, 0);
            p.cm[0].runLocked(() -> a.sendNow(req, toB));
            p.settle();
            List<CmPair.Sent> rejs = p.tap[1].of(CmMsg.REJ);
            assertEquals(1, rejs.size());
            assertEquals(10, Mad.get16(rejs.getFirst().mad(), CmMsg.REJ_REASON), "IB_CM_REJ_STALE_CONN");
            assertEquals(1, p.cm[1].counter(CmCounter.CM_STALE_CONNECTIONS));
            p.expectAck(0, CmEventType.DISCONNECTED); // ... and a DREQ on the old connection
            conn.client().disconnect();
            assertEquals(QpState.ERR, conn.client().qp().state());
            p.expectAck(1, CmEventType.DISCONNECTED);
            assertEquals(QpState.RTS, conn.server().qp().state(),
                    "rdma_cm leaves the QP to the application's rdma_disconnect");
        }
    }

    @Test
    void anAbandonedReqIsRejectedWithTimeoutAndTheNodeGuid() {
        try (CmPair p = new CmPair(8)) {
            p.listen();
            CmId c = p.connect();
            CmEvent req = p.expect(1, CmEventType.CONNECT_REQUEST);
            CmId s = req.id();
            req.ack();
            c.close(); // REQ_SENT: REJ(4) with our node GUID as ARI (cm_destroy_id)
            p.settle();
            byte[] rej = p.tap[0].of(CmMsg.REJ).getFirst().mad();
            assertEquals(4, Mad.get16(rej, CmMsg.REJ_REASON));
            assertEquals(8, Mad.bits(rej, CmMsg.REJ_BYTE33, 1, 7), "ARI length");
            assertEquals(p.dev[0].guid(), Mad.get64(rej, CmMsg.REJ_ARI));
            CmEvent r = p.expect(1, CmEventType.REJECTED);
            assertEquals(4, r.status());
            assertEquals(s, r.id());
            r.ack();
        }
    }

    @Test
    void theMadLayerCountsWhatItDrops() {
        try (CmPair p = new CmPair(9)) {
            MadPort a = p.cm[0].ports().getFirst();
            CmAv toB = new CmAv(a, p.dev[1].open().queryGid(1, 0), 0, 64, 0, 0, 0);
            byte[] good = new byte[Mad.SIZE];
            Mad.cmHeader(good, CmMsg.RTU, 1);
            byte[] v2 = good.clone();
            v2[Mad.OFF_BASE_VERSION] = 2;
            byte[] cv1 = good.clone();
            cv1[Mad.OFF_CLASS_VERSION] = 1;
            byte[] get = good.clone();
            get[Mad.OFF_METHOD] = Mad.METHOD_GET;
            byte[] resp = good.clone();
            resp[Mad.OFF_METHOD] = (byte) (Mad.METHOD_SEND | Mad.METHOD_RESP);
            byte[] lap = good.clone();
            Mad.put16(lap, Mad.OFF_ATTR_ID, CmMsg.LAP);
            p.cm[0].runLocked(() -> {
                for (byte[] m : List.of(v2, cv1, get, resp, lap, good)) {
                    a.sendNow(m, toB);
                }
            });
            p.settle();
            UserCm b = p.cm[1];
            assertEquals(6, b.counter(CmCounter.MADS_RECEIVED));
            assertEquals(1, b.counter(CmCounter.DROP_BAD_BASE_VERSION));
            assertEquals(1, b.counter(CmCounter.DROP_NO_AGENT), "a CM MAD of class version 1 finds no agent");
            assertEquals(1, b.counter(CmCounter.DROP_BAD_METHOD), "the CM takes Send only");
            assertEquals(1, b.counter(CmCounter.DROP_UNMATCHED_RESPONSE));
            assertEquals(1, b.counter(CmCounter.CM_DROP_UNKNOWN_ATTRIBUTE), "LAP: not on RoCE");
            assertEquals(1, b.counter(CmCounter.CM_DROP_UNMATCHED), "an RTU for no communication");
        }
    }
}
