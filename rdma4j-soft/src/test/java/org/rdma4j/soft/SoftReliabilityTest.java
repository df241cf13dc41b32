// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.rdma4j.common.Psn;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcOpcode;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * RC reliability rules as rxe applies them (roce-wire.md section 4), each forced with a scripted loss
 * on a {@link FaultInjectingLink} over a segmenting fabric, and observed on the packets themselves:
 * retry and RNR exhaustion, go-back-N on a sequence NAK, READ replay from the middle, the atomic
 * replay cache, the PSN window, AckReq spacing, the initiator depth, and PSNs wrapping at 2^24.
 */
class SoftReliabilityTest {
    private static final int SRC = 0;
    private static final int DST = 1 << 20;

    /** A packet as the link saw it. */
    record Seen(int opcode, int destQpn, int psn, boolean ackReq, int syndrome, long va, int dmaLen, long orig,
                int payloadLen) {
        boolean is(int op) {
            return opcode == op;
        }
    }

    private LossyPair pair;
    private final List<Seen> seen = new ArrayList<>();

    @AfterEach
    void tearDown() {
        if (pair != null) {
            pair.close();
        }
    }

    private LossyPair open(LossyPair.Config cfg, FaultInjectingLink.Faults faults) {
        pair = new LossyPair(cfg, 1, faults);
        pair.link.tap(p -> seen.add(new Seen(p.opcode, p.destQpn, p.psn, p.ackReq, p.syndrome, p.va, p.dmaLen,
                p.origValue, p.payloadLen)));
        return pair;
    }

    /** Drops the first packet the predicate accepts, once. */
    private void dropOnce(Predicate<Packet> which) {
        boolean[] done = {false};
        pair.link.dropIf(p -> {
            if (!done[0] && which.test(p)) {
                done[0] = true;
                return true;
            }
            return false;
        });
    }

    /** Drops the first packet of each of the given opcodes, once each. */
    private void dropFirstOf(int... opcodes) {
        boolean[] dropped = new boolean[opcodes.length];
        pair.link.dropIf(p -> {
            for (int i = 0; i < opcodes.length; i++) {
                if (!dropped[i] && p.opcode == opcodes[i]) {
                    return dropped[i] = true;
                }
            }
            return false;
        });
    }

    private static SendWorkRequest wr(long id, WrOpcode op, LossyPair.Side s, long off, int len) {
        return new SendWorkRequest(1).wrId(id).opcode(op).sendFlags(SendFlags.SIGNALED)
                .singleSge(s.addr(off), len, s.mr.lkey());
    }

    private static void post(LossyPair.Side s, SendWorkRequest w) {
        assertTrue(s.qp.postSend(w), () -> "postSend: " + w.postError());
    }

    private static void postRecv(LossyPair.Side s, long id, long off, int len) {
        RecvWorkRequest r = new RecvWorkRequest(1).wrId(id).singleSge(s.addr(off), len, s.mr.lkey());
        assertTrue(s.qp.postRecv(r), () -> "postRecv: " + r.postError());
    }

    private static WorkCompletion poll(CompletionQueue cq) {
        WorkCompletion wc = new WorkCompletion();
        return cq.poll(wc) ? wc : null;
    }

    /** Steps the clock by {@code stepNs} until a completion arrives; returns it and sets elapsed[0]. */
    private WorkCompletion awaitOne(CompletionQueue cq, long stepNs, int maxSteps, long[] elapsed) {
        long t0 = pair.clock.nanoTime();
        for (int i = 0; i <= maxSteps; i++) {
            WorkCompletion wc = poll(cq);
            if (wc != null) {
                if (elapsed != null) {
                    elapsed[0] = pair.clock.nanoTime() - t0;
                }
                return wc;
            }
            pair.clock.advance(stepNs);
        }
        throw new AssertionError("no completion after " + maxSteps + " steps of " + stepNs + " ns\n" + pair.describe());
    }

    private static byte[] bytes(LossyPair.Side s, long off, int len) {
        byte[] b = new byte[len];
        MemorySegment.copy(s.mem, ValueLayout.JAVA_BYTE, off, b, 0, len);
        return b;
    }

    // ------------------------------------------------------------------ retry exhaustion

    @ParameterizedTest
    @ValueSource(ints = {0, 1, 3, 6})
    void retryExhaustionAfterRetryCntPlusOneTimeouts(int retryCnt) {
        open(LossyPair.Config.of(QpType.RC).retries(10, retryCnt, 7), FaultInjectingLink.Faults.dropping(1.0));
        LossyPair.Side a = pair.a;
        post(a, wr(1, WrOpcode.SEND, a, SRC, 600));
        post(a, wr(2, WrOpcode.RDMA_WRITE, a, SRC, 100).remoteAddr(pair.b.addr(DST)).rkey(pair.b.mr.rkey()));
        post(a, wr(3, WrOpcode.RDMA_READ, a, DST, 100).remoteAddr(pair.b.addr(SRC)).rkey(pair.b.mr.rkey()));
        long t = pair.timeoutNs(); // 4.096 us << 10
        long[] elapsed = new long[1];
        WorkCompletion wc = awaitOne(a.scq, t / 16, 16 * (retryCnt + 2), elapsed);
        // rxe: every timeout retries while retry_cnt lasts; the (retry_cnt+1)-th gives up.
        assertEquals((retryCnt + 1) * t, elapsed[0], "failed after " + elapsed[0] + " ns, timeout " + t + " ns");
        assertEquals(1, wc.wrId());
        assertEquals(WcStatus.RETRY_EXC_ERR, wc.status());
        assertEquals(WcOpcode.SEND, wc.opcode());
        for (long id = 2; id <= 3; id++) {
            WorkCompletion f = poll(a.scq);
            assertNotNull(f, "the rest of the send queue is flushed");
            assertEquals(id, f.wrId());
            assertEquals(WcStatus.WR_FLUSH_ERR, f.status());
        }
        assertEquals(QpState.ERR, a.qp.state());
        assertEquals(retryCnt, a.dev.counter(SoftCounter.COMPLETER_RETRY_ERR));
        assertEquals(1, a.dev.counter(SoftCounter.RETRY_EXCEEDED_ERR));
        assertEquals(retryCnt + 1, seen.stream().filter(s -> s.is(Opcodes.RC | Opcodes.SEND_FIRST)).count(),
                "the SEND went out retry_cnt + 1 times");
        post(a, wr(4, WrOpcode.SEND, a, SRC, 8));
        WorkCompletion late = poll(a.scq);
        assertNotNull(late, "a WQE posted in ERR is flushed at once");
        assertEquals(WcStatus.WR_FLUSH_ERR, late.status());
        assertNull(poll(pair.b.rcq));
        assertEquals(QpState.RTS, pair.b.qp.state());
    }

    @Test
    void retryCnt7RetriesForeverAsRxeDoesAndRecoversWhenTheLinkHeals() {
        open(LossyPair.Config.of(QpType.RC).retries(10, 7, 7), FaultInjectingLink.Faults.dropping(1.0));
        LossyPair.Side a = pair.a;
        postRecv(pair.b, 9, DST, 4096);
        post(a, wr(1, WrOpcode.SEND, a, SRC, 1000));
        long t = pair.timeoutNs();
        for (int i = 0; i < 30; i++) {
            pair.clock.advance(t);
        }
        assertNull(poll(a.scq), "retry_cnt 7 never gives up (rxe; IBA reserves 'infinite' for rnr_retry)");
        assertEquals(30, a.dev.counter(SoftCounter.COMPLETER_RETRY_ERR));
        pair.link.faults(FaultInjectingLink.Faults.NONE);
        WorkCompletion wc = awaitOne(a.scq, t / 4, 8, null);
        assertEquals(WcStatus.SUCCESS, wc.status());
        WorkCompletion r = poll(pair.b.rcq);
        assertNotNull(r);
        assertEquals(1000, r.byteLen());
        assertArrayEquals(bytes(a, SRC, 1000), bytes(pair.b, DST, 1000));
        assertNull(poll(pair.b.rcq), "delivered once");
    }

    // ------------------------------------------------------------------ RNR

    @ParameterizedTest
    @ValueSource(ints = {0, 2, 6})
    void rnrExhaustionWithoutAReceive(int rnrRetry) {
        // min_rnr_timer 14 = 1.28 ms (IBA table 45), far below the 67 ms ACK timeout.
        open(LossyPair.Config.of(QpType.RC).retries(14, 7, rnrRetry).minRnrTimer(14), FaultInjectingLink.Faults.NONE);
        LossyPair.Side a = pair.a;
        post(a, wr(1, WrOpcode.SEND, a, SRC, 300));
        post(a, wr(2, WrOpcode.RDMA_WRITE, a, SRC, 10).remoteAddr(pair.b.addr(DST)).rkey(pair.b.mr.rkey()));
        long rnr = Aeth.rnrDelayNs(14);
        long[] elapsed = new long[1];
        WorkCompletion wc = rnrRetry == 0 ? poll(a.scq) : awaitOne(a.scq, rnr / 8, 8 * (rnrRetry + 2), elapsed);
        assertNotNull(wc);
        assertEquals(rnrRetry * rnr, elapsed[0], "each RNR NAK waits the responder's min_rnr_timer");
        assertEquals(1, wc.wrId());
        assertEquals(WcStatus.RNR_RETRY_EXC_ERR, wc.status());
        WorkCompletion f = poll(a.scq);
        assertNotNull(f);
        assertEquals(2, f.wrId());
        assertEquals(WcStatus.WR_FLUSH_ERR, f.status());
        assertEquals(QpState.ERR, a.qp.state());
        assertEquals(rnrRetry + 1, a.dev.counter(SoftCounter.RCV_RNR_ERR));
        assertEquals(rnrRetry + 1, pair.b.dev.counter(SoftCounter.SND_RNR));
        assertEquals(1, a.dev.counter(SoftCounter.RNR_RETRY_EXCEEDED_ERR));
        for (Seen s : seen) {
            if (s.is(Opcodes.RC | Opcodes.ACKNOWLEDGE)) {
                assertEquals(Aeth.TYPE_RNR_NAK | 14, s.syndrome(), "RNR NAK carries the responder's min_rnr_timer");
                assertEquals(LossyPair.Config.of(QpType.RC).psnA(), s.psn(), "RNR NAK PSN = the request's PSN");
            }
        }
        assertEquals(QpState.RTS, pair.b.qp.state(), "RNR is no error at the responder");
        assertNull(poll(pair.b.rcq));
    }

    // ------------------------------------------------------------------ go-back-N, wrap

    @Test
    void sequenceNakResendsFromTheMissingPacketWithoutWaitingForTheTimer() {
        int psn = 0xFF_FFFE; // the message crosses the 24-bit PSN wrap
        open(LossyPair.Config.of(QpType.RC).psns(psn, 0), FaultInjectingLink.Faults.NONE);
        int lost = Psn.add(psn, 3);
        dropOnce(p -> p.is(Opcodes.M_REQ) && p.psn == lost);
        postRecv(pair.b, 9, DST, 4096);
        post(pair.a, wr(1, WrOpcode.SEND, pair.a, SRC, 2000)); // 8 packets of 256 bytes
        // No clock step: the responder's NAK alone drives the retransmission.
        WorkCompletion wc = poll(pair.a.scq);
        assertNotNull(wc, pair.describe());
        assertEquals(WcStatus.SUCCESS, wc.status());
        WorkCompletion r = poll(pair.b.rcq);
        assertNotNull(r);
        assertEquals(2000, r.byteLen());
        assertArrayEquals(bytes(pair.a, SRC, 2000), bytes(pair.b, DST, 2000));
        List<Seen> naks = seen.stream().filter(s -> s.is(Opcodes.RC | Opcodes.ACKNOWLEDGE)
                && s.syndrome() == Aeth.NAK_PSN_SEQ_ERROR).toList();
        assertEquals(1, naks.size(), "one NAK per gap (rxe sent_psn_nak)");
        assertEquals(lost, naks.getFirst().psn(), "the NAK names the expected PSN");
        List<Integer> reqPsns = seen.stream().filter(s -> (Opcodes.mask(s.opcode()) & Opcodes.M_REQ) != 0)
                .map(Seen::psn).toList();
        // In process the NAK for the gap arrives while the third packet after it is being sent
        // (HeldRequests.NAK_THRESHOLD), so the requester goes back at once to the NAK's PSN, not to the message
        // start: psn..psn+6 (psn+3 lost), then psn+3 again; the responder held psn+4..psn+6 (rxe drops
        // them), its ACK says so, and the requester goes on with psn+7.
        List<Integer> expected = new ArrayList<>();
        for (int i = 0; i < 7; i++) {
            expected.add(Psn.add(psn, i));
        }
        expected.add(Psn.add(psn, 3));
        expected.add(Psn.add(psn, 7));
        assertEquals(expected, reqPsns);
        assertEquals(1, pair.a.dev.counter(SoftCounter.RCV_SEQ_ERR));
        assertEquals(0, pair.a.dev.counter(SoftCounter.RETRY_EXCEEDED_ERR));
    }

    // ------------------------------------------------------------------ responder replay

    @Test
    void lostReadResponseIsReplayedFromTheMiddle() {
        int psn = 0xFF_FFFC;
        open(LossyPair.Config.of(QpType.RC).psns(psn, 0), FaultInjectingLink.Faults.NONE);
        int lost = Psn.add(psn, 3);
        dropOnce(p -> p.opcode == (Opcodes.RC | Opcodes.READ_RESPONSE_MIDDLE) && p.psn == lost);
        post(pair.a, wr(1, WrOpcode.RDMA_READ, pair.a, DST, 2000).remoteAddr(pair.b.addr(SRC + 8))
                .rkey(pair.b.mr.rkey()));
        // The response after the gap asks again for the rest at once (an implied NAK; rxe drops it and
        // waits for the retransmit timer): no clock step is needed.
        WorkCompletion wc = poll(pair.a.scq);
        assertNotNull(wc, pair::describe);
        assertEquals(WcStatus.SUCCESS, wc.status());
        assertEquals(2000, wc.byteLen());
        assertEquals(1, pair.a.dev.counter(SoftCounter.RETRY_NAKS));
        assertEquals(0, pair.a.dev.counter(SoftCounter.RETRY_TIMEOUTS));
        assertArrayEquals(bytes(pair.b, SRC + 8, 2000), bytes(pair.a, DST, 2000));
        List<Seen> reads = seen.stream().filter(s -> s.is(Opcodes.RC | Opcodes.READ_REQUEST)).toList();
        assertEquals(2, reads.size());
        Seen retry = reads.get(1);
        // rxe req_retry: the rest of the READ only, at the PSN of the first missing response.
        assertEquals(lost, retry.psn());
        assertEquals(pair.b.addr(SRC + 8) + 3 * 256, retry.va());
        assertEquals(2000 - 3 * 256, retry.dmaLen());
        int at = seen.indexOf(retry);
        List<Seen> replay = seen.subList(at + 1, seen.size());
        assertEquals(5, replay.size(), "responses " + replay);
        assertEquals(Opcodes.RC | Opcodes.READ_RESPONSE_MIDDLE, replay.getFirst().opcode(),
                "a replay from the middle continues with MIDDLE (rxe duplicate_request/read_reply)");
        assertEquals(lost, replay.getFirst().psn());
        assertEquals(Opcodes.RC | Opcodes.READ_RESPONSE_LAST, replay.getLast().opcode());
        assertEquals(1, pair.b.dev.counter(SoftCounter.DUPLICATE_REQUEST));
    }

    @Test
    void aResponseThatMakesNoProgressStillPostponesTheRetryAsRxeDoes() {
        open(LossyPair.Config.of(QpType.RC), FaultInjectingLink.Faults.NONE);
        Packet[] ack = new Packet[1];
        pair.link.dropIf(p -> {
            if (ack[0] == null && p.opcode == (Opcodes.RC | Opcodes.ACKNOWLEDGE)) {
                ack[0] = p.deepCopy();
                return true;
            }
            return false;
        });
        postRecv(pair.b, 9, DST, 4096);
        post(pair.a, wr(1, WrOpcode.SEND, pair.a, SRC, 100)); // its ACK is lost: A waits for the timer
        assertNotNull(ack[0]);
        long t = pair.timeoutNs();
        pair.clock.advance(t * 3 / 4);
        // A stale ACK (one PSN before the SEND) arrives: no progress, but the peer is alive.
        Packet stale = ack[0];
        stale.psn = Psn.add(stale.psn, -1);
        pair.link.send(pair.b.dev, stale); // as B's link would carry it (links take packets from any thread)
        assertNull(poll(pair.a.scq), "a stale ACK completes nothing");
        pair.clock.advance(t / 2); // past the first deadline
        assertEquals(0, pair.a.dev.counter(SoftCounter.COMPLETER_RETRY_ERR),
                "rxe_completer re-arms the timer on any response, so no retry yet");
        pair.clock.advance(t);
        assertEquals(1, pair.a.dev.counter(SoftCounter.COMPLETER_RETRY_ERR),
                "with nothing more from the peer the timer fires");
        WorkCompletion wc = awaitOne(pair.a.scq, pair.stepNs(), 16, null);
        assertEquals(WcStatus.SUCCESS, wc.status());
        assertEquals(1, wc.wrId());
    }

    @Test
    void impliedNaksStartOneRetryUntilProgressAsRxeDoes() {
        LossyPair.Config cfg = LossyPair.Config.of(QpType.RC);
        open(cfg, FaultInjectingLink.Faults.NONE);
        // A wire with latency, so both reads and all their responses are in flight together.
        pair.link.latency(10_000);
        pair.stepNs(5_000);
        int lost = Psn.add(cfg.psnA(), 1); // read 1: PSNs psnA..+3, read 2: +4..+7 (MTU 256)
        dropOnce(p -> p.opcode == (Opcodes.RC | Opcodes.READ_RESPONSE_MIDDLE) && p.psn == lost);
        post(pair.a, wr(1, WrOpcode.RDMA_READ, pair.a, DST, 1000).remoteAddr(pair.b.addr(SRC))
                .rkey(pair.b.mr.rkey()));
        post(pair.a, wr(2, WrOpcode.RDMA_READ, pair.a, DST + 1000, 1000).remoteAddr(pair.b.addr(SRC + 1000))
                .rkey(pair.b.mr.rkey()));
        // Read 1's third response, after the gap, starts a retry; its last one and all of read 2's are
        // implied NAKs of the same episode (rxe comp.started_retry): no second retry until progress.
        WorkCompletion w1 = awaitOne(pair.a.scq, pair.stepNs(), 64, null);
        WorkCompletion w2 = awaitOne(pair.a.scq, pair.stepNs(), 64, null);
        assertEquals(1, w1.wrId());
        assertEquals(2, w2.wrId());
        assertEquals(WcStatus.SUCCESS, w1.status());
        assertEquals(WcStatus.SUCCESS, w2.status());
        assertArrayEquals(bytes(pair.b, SRC, 2000), bytes(pair.a, DST, 2000));
        assertEquals(1, pair.a.dev.counter(SoftCounter.COMPLETER_RETRY_ERR), pair::describe);
        assertEquals(0, pair.a.dev.counter(SoftCounter.RETRY_TIMEOUTS));
        List<Seen> reads = seen.stream().filter(s -> s.is(Opcodes.RC | Opcodes.READ_REQUEST)).toList();
        assertEquals(4, reads.size(), "two reads, then the rest of read 1 and read 2 again (go-back-N): " + reads);
        assertEquals(lost, reads.get(2).psn());
    }

    @Test
    void aDuplicateSendIsAcknowledgedAgainAndNotDeliveredTwice() {
        open(LossyPair.Config.of(QpType.RC), FaultInjectingLink.Faults.NONE);
        dropOnce(p -> p.opcode == (Opcodes.RC | Opcodes.ACKNOWLEDGE));
        postRecv(pair.b, 9, DST, 4096);
        postRecv(pair.b, 10, DST + 4096, 4096);
        post(pair.a, wr(1, WrOpcode.SEND, pair.a, SRC, 700)); // 3 packets, the ACK of the last is lost
        assertNull(poll(pair.a.scq));
        WorkCompletion wc = awaitOne(pair.a.scq, pair.stepNs(), 16, null);
        assertEquals(WcStatus.SUCCESS, wc.status());
        WorkCompletion r = poll(pair.b.rcq);
        assertNotNull(r);
        assertEquals(700, r.byteLen());
        assertNull(poll(pair.b.rcq), "the resent SEND consumed no second receive");
        // The first resent packet is a duplicate; its re-ACK covers the whole message, which completes
        // it, so the requester stops resending there.
        assertEquals(1, pair.b.dev.counter(SoftCounter.DUPLICATE_REQUEST));
        int last = Psn.add(LossyPair.Config.of(QpType.RC).psnA(), 2);
        List<Seen> acks = seen.stream().filter(s -> s.is(Opcodes.RC | Opcodes.ACKNOWLEDGE)).toList();
        assertTrue(acks.size() >= 2, acks.toString());
        for (Seen s : acks) {
            // C9-105 / rxe duplicate_request: re-ACK with the last PSN the responder executed.
            assertEquals(last, s.psn());
            assertEquals(Aeth.ACK_UNLIMITED, s.syndrome());
        }
    }

    /**
     * The plain ACKs B sent A, checked against rxe's completer: rxe_comp.c check_ack takes an RC_ACKNOWLEDGE for
     * any pending WQE (COMPST_WRITE_SEND) and completes it when the ACK's PSN is the WQE's last PSN
     * (COMPST_COMP_ACK), an RDMA READ or an atomic too, with SUCCESS and without the data. So no plain ACK may
     * name a READ's or an atomic's PSN (rxe's responder never does for a READ: read_reply advances resp.psn,
     * not resp.ack_psn, which duplicate_request acknowledges). Seen between a Linux rping server and our client
     * at 20 % loss: the server's READ of ping 1 completed from such an ACK and it printed ping 0's bytes again.
     */
    private void assertNoPlainAckNames(int readOrAtomicPsn) {
        int toA = pair.a.qp.qpNum();
        List<Seen> acks = seen.stream().filter(s -> s.is(Opcodes.RC | Opcodes.ACKNOWLEDGE) && s.destQpn() == toA)
                .toList();
        for (Seen s : acks) {
            assertTrue(s.psn() != readOrAtomicPsn, () -> "a plain ACK with the PSN of a READ/atomic (0x"
                    + Integer.toHexString(readOrAtomicPsn) + "): rxe's completer completes it without its data; "
                    + acks + "\n" + pair.describe());
        }
    }

    @Test
    void aDuplicateSendAfterAReadIsAcknowledgedWithThePsnOfTheSendNotOfTheRead() {
        LossyPair.Config cfg = LossyPair.Config.of(QpType.RC);
        open(cfg, FaultInjectingLink.Faults.NONE);
        int send = cfg.psnA();
        int read = Psn.add(send, 1);
        // rping's go-ahead then the next ping's READ: the SEND's ACK and the READ's response are both lost, so
        // A's timer resends the SEND (a duplicate at B) and the READ (a replay).
        dropFirstOf(Opcodes.RC | Opcodes.ACKNOWLEDGE, Opcodes.RC | Opcodes.READ_RESPONSE_ONLY);
        pair.b.mem.asSlice(SRC + 4096, 64).fill((byte) 'B');
        postRecv(pair.b, 9, DST, 4096);
        post(pair.a, wr(1, WrOpcode.SEND, pair.a, SRC, 16));
        post(pair.a, wr(2, WrOpcode.RDMA_READ, pair.a, DST, 64).remoteAddr(pair.b.addr(SRC + 4096))
                .rkey(pair.b.mr.rkey()));
        assertNull(poll(pair.a.scq));
        List<List<WorkCompletion>> got = pair.collect(new CompletionQueue[] {pair.a.scq}, new int[] {2}, 64);
        for (WorkCompletion wc : got.getFirst()) {
            assertEquals(WcStatus.SUCCESS, wc.status(), wc.toString());
        }
        assertArrayEquals(bytes(pair.b, SRC + 4096, 64), bytes(pair.a, DST, 64));
        assertEquals(2, pair.b.dev.counter(SoftCounter.DUPLICATE_REQUEST), pair::describe);
        assertNoPlainAckNames(read);
        int toA = pair.a.qp.qpNum();
        List<Seen> acks = seen.stream().filter(s -> s.is(Opcodes.RC | Opcodes.ACKNOWLEDGE) && s.destQpn() == toA)
                .toList();
        assertEquals(2, acks.size(), acks.toString());
        assertEquals(send, acks.getLast().psn(), "rxe duplicate_request: ack_psn - 1, the SEND (a READ does not move it)");
    }

    @Test
    void aDuplicateSendAfterAnAtomicIsAcknowledgedWithThePsnOfTheSend() {
        LossyPair.Config cfg = LossyPair.Config.of(QpType.RC);
        open(cfg, FaultInjectingLink.Faults.NONE);
        int send = cfg.psnA();
        int atomic = Psn.add(send, 1);
        dropFirstOf(Opcodes.RC | Opcodes.ACKNOWLEDGE, Opcodes.RC | Opcodes.ATOMIC_ACKNOWLEDGE);
        pair.b.mem.set(ValueLayout.JAVA_LONG, DST + 64, 40);
        postRecv(pair.b, 9, DST, 64);
        post(pair.a, wr(1, WrOpcode.SEND, pair.a, SRC, 16));
        post(pair.a, wr(2, WrOpcode.ATOMIC_FETCH_AND_ADD, pair.a, SRC + 64, 8).remoteAddr(pair.b.addr(DST + 64))
                .rkey(pair.b.mr.rkey()).compareAdd(2));
        List<List<WorkCompletion>> got = pair.collect(new CompletionQueue[] {pair.a.scq}, new int[] {2}, 64);
        for (WorkCompletion wc : got.getFirst()) {
            assertEquals(WcStatus.SUCCESS, wc.status(), wc.toString());
        }
        assertEquals(40, pair.a.mem.get(ValueLayout.JAVA_LONG, SRC + 64), "the original value");
        assertEquals(42, pair.b.mem.get(ValueLayout.JAVA_LONG, DST + 64), "executed once");
        assertEquals(2, pair.b.dev.counter(SoftCounter.DUPLICATE_REQUEST), pair::describe);
        // Stricter than rxe, whose atomic_reply sets resp.ack_psn: its completer would complete the atomic from
        // that ACK without the original value.
        assertNoPlainAckNames(atomic);
    }

    @Test
    void theAckAfterADrainThatEndsWithAReadNamesTheLastSendNotTheRead() {
        LossyPair.Config cfg = LossyPair.Config.of(QpType.RC);
        open(cfg, FaultInjectingLink.Faults.NONE);
        int send = cfg.psnA();
        int read = Psn.add(send, 1);
        // The SEND is lost: B holds the READ behind the gap (HeldRequests.outOfSequence), and the resent SEND drains it.
        dropOnce(p -> p.opcode == (Opcodes.RC | Opcodes.SEND_ONLY));
        pair.b.mem.asSlice(SRC + 4096, 64).fill((byte) 'D');
        postRecv(pair.b, 9, DST, 4096);
        post(pair.a, wr(1, WrOpcode.SEND, pair.a, SRC, 16));
        post(pair.a, wr(2, WrOpcode.RDMA_READ, pair.a, DST, 64).remoteAddr(pair.b.addr(SRC + 4096))
                .rkey(pair.b.mr.rkey()));
        List<List<WorkCompletion>> got = pair.collect(new CompletionQueue[] {pair.a.scq}, new int[] {2}, 64);
        for (WorkCompletion wc : got.getFirst()) {
            assertEquals(WcStatus.SUCCESS, wc.status(), wc.toString());
        }
        assertArrayEquals(bytes(pair.b, SRC + 4096, 64), bytes(pair.a, DST, 64));
        assertTrue(pair.b.dev.counter(SoftCounter.HELD_OUT_OF_SEQ) >= 1, pair::describe);
        assertNoPlainAckNames(read);
    }

    @Test
    void lostAtomicAcknowledgeIsAnsweredFromTheReplayCache() {
        open(LossyPair.Config.of(QpType.RC), FaultInjectingLink.Faults.NONE);
        pair.b.mem.set(ValueLayout.JAVA_LONG, DST, 100);
        pair.b.mem.set(ValueLayout.JAVA_LONG, DST + 8, 100);
        pair.link.dropIf(p -> p.opcode == (Opcodes.RC | Opcodes.ATOMIC_ACKNOWLEDGE)
                && seen.stream().filter(s -> s.is(Opcodes.RC | Opcodes.ATOMIC_ACKNOWLEDGE) && s.psn() == p.psn)
                .count() == 1);
        post(pair.a, wr(1, WrOpcode.ATOMIC_FETCH_AND_ADD, pair.a, SRC, 8).remoteAddr(pair.b.addr(DST))
                .rkey(pair.b.mr.rkey()).compareAdd(5));
        post(pair.a, wr(2, WrOpcode.ATOMIC_CMP_AND_SWP, pair.a, SRC + 8, 8).remoteAddr(pair.b.addr(DST + 8))
                .rkey(pair.b.mr.rkey()).compareAdd(100).swap(7));
        List<List<WorkCompletion>> got = pair.collect(new CompletionQueue[] {pair.a.scq}, new int[] {2}, 64);
        for (WorkCompletion wc : got.getFirst()) {
            assertEquals(WcStatus.SUCCESS, wc.status(), wc.toString());
        }
        // Executed once each: re-executing would give 110, and a compare against 7 would fail and return 7.
        assertEquals(105, pair.b.mem.get(ValueLayout.JAVA_LONG, DST));
        assertEquals(7, pair.b.mem.get(ValueLayout.JAVA_LONG, DST + 8));
        assertEquals(100, pair.a.mem.get(ValueLayout.JAVA_LONG, SRC));
        assertEquals(100, pair.a.mem.get(ValueLayout.JAVA_LONG, SRC + 8));
        assertEquals(2, pair.b.dev.counter(SoftCounter.DUPLICATE_REQUEST));
        List<Seen> acks = seen.stream().filter(s -> s.is(Opcodes.RC | Opcodes.ATOMIC_ACKNOWLEDGE)).toList();
        assertEquals(4, acks.size(), "each answered twice: " + acks);
        for (Seen s : acks) {
            assertEquals(100, s.orig(), "the cached original value");
        }
    }

    // ------------------------------------------------------------------ window, AckReq, depth

    @Test
    void atMost128PsnsAreUnacknowledged() {
        open(LossyPair.Config.of(QpType.RC), FaultInjectingLink.Faults.NONE);
        pair.link.dropIf(p -> p.opcode == (Opcodes.RC | Opcodes.ACKNOWLEDGE));
        SendWorkRequest[] batch = new SendWorkRequest[200];
        for (int i = 0; i < batch.length; i++) {
            batch[i] = wr(i, WrOpcode.RDMA_WRITE, pair.a, SRC + 8 * i, 8).remoteAddr(pair.b.addr(DST + 8 * i))
                    .rkey(pair.b.mr.rkey()).sendFlags(i == batch.length - 1 ? SendFlags.SIGNALED : 0);
        }
        assertEquals(200, pair.a.qp.postSend(batch, 200));
        long sent = seen.stream().filter(s -> (Opcodes.mask(s.opcode()) & Opcodes.M_REQ) != 0).count();
        // rxe wait_psn: no packet while req.psn > comp.psn + RXE_MAX_UNACKED_PSNS.
        assertEquals(SoftQp.MAX_UNACKED_PSNS + 1, sent);
        pair.link.dropIf(null);
        WorkCompletion wc = awaitOne(pair.a.scq, pair.stepNs(), 64, null);
        assertEquals(199, wc.wrId());
        assertEquals(WcStatus.SUCCESS, wc.status());
        assertArrayEquals(bytes(pair.a, SRC, 1600), bytes(pair.b, DST, 1600));
    }

    @Test
    void ackReqAtLeastEvery64PacketsAndOnTheLastOne() {
        open(LossyPair.Config.of(QpType.RC), FaultInjectingLink.Faults.NONE);
        SendWorkRequest[] batch = new SendWorkRequest[250];
        for (int i = 0; i < batch.length; i++) {
            batch[i] = wr(i, WrOpcode.RDMA_WRITE, pair.a, SRC, 100 + i * 3).remoteAddr(pair.b.addr(DST))
                    .rkey(pair.b.mr.rkey()).sendFlags(i == batch.length - 1 ? SendFlags.SIGNALED : 0);
        }
        assertEquals(250, pair.a.qp.postSend(batch, 250));
        WorkCompletion wc = poll(pair.a.scq);
        assertNotNull(wc, "completed without any timer");
        assertEquals(WcStatus.SUCCESS, wc.status());
        List<Seen> reqs = seen.stream().filter(s -> (Opcodes.mask(s.opcode()) & Opcodes.M_REQ) != 0).toList();
        int run = 0;
        for (Seen s : reqs) {
            run = s.ackReq() ? 0 : run + 1;
            assertTrue(run < 64, "rxe RXE_MAX_PKT_PER_ACK: an AckReq at least every 64 packets");
        }
        assertTrue(reqs.getLast().ackReq(), "the last packet asks for an ACK");
        long acks = seen.stream().filter(s -> s.is(Opcodes.RC | Opcodes.ACKNOWLEDGE)).count();
        assertTrue(acks < reqs.size() / 8, acks + " ACKs for " + reqs.size() + " packets: ACKs are coalesced");
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 2, 3})
    void readsInFlightAreBoundedByMaxRdAtomicRoundedUpToAPowerOfTwo(int depth) {
        open(LossyPair.Config.of(QpType.RC).rdAtomic(depth), FaultInjectingLink.Faults.NONE);
        pair.link.dropIf(p -> (p.opcode & 0x1F) >= Opcodes.READ_RESPONSE_FIRST
                && (p.opcode & 0x1F) <= Opcodes.READ_RESPONSE_ONLY);
        SendWorkRequest[] batch = new SendWorkRequest[6];
        for (int i = 0; i < batch.length; i++) {
            batch[i] = wr(i, WrOpcode.RDMA_READ, pair.a, DST + 1000 * i, 700).remoteAddr(pair.b.addr(SRC + 100 * i))
                    .rkey(pair.b.mr.rkey());
        }
        assertEquals(6, pair.a.qp.postSend(batch, 6));
        long reads = seen.stream().filter(s -> s.is(Opcodes.RC | Opcodes.READ_REQUEST)).count();
        assertEquals(Bytes.ceilPow2(depth), reads, "rxe check_init_depth with rd_atomic rounded up to 2^n");
        pair.link.dropIf(null);
        List<List<WorkCompletion>> got = pair.collect(new CompletionQueue[] {pair.a.scq}, new int[] {6}, 64);
        for (int i = 0; i < 6; i++) {
            WorkCompletion wc = got.getFirst().get(i);
            assertEquals(i, wc.wrId());
            assertEquals(WcStatus.SUCCESS, wc.status());
            assertArrayEquals(bytes(pair.b, SRC + 100 * i, 700), bytes(pair.a, DST + 1000 * i, 700));
        }
    }
    /**
     * A WRITE whose RETH says 0 bytes but which carries payload (a hostile or broken peer): a length error, NAK
     * Invalid Request, the requester completes REM_INV_REQ_ERR; the responder neither touches memory (no region
     * was resolved: C9-88 needs no R_Key for zero bytes) nor fails with an engine error (it threw a
     * NullPointerException on its missing region before).
     */
    @Test
    void aZeroLengthWriteThatCarriesPayloadIsALengthErrorNotAnEngineError() {
        open(LossyPair.Config.of(QpType.RC), FaultInjectingLink.Faults.NONE);
        pair.link.tap(p -> {
            if (p.opcode == Opcodes.WRITE_ONLY && p.payloadLen > 0) {
                p.dmaLen = 0;
            }
        });
        byte[] before = bytes(pair.b, DST, 64);
        post(pair.a, wr(1, WrOpcode.RDMA_WRITE, pair.a, SRC, 64).remoteAddr(pair.b.addr(DST)).rkey(pair.b.mr.rkey()));
        WorkCompletion wc = awaitOne(pair.a.scq, 1_000_000, 1_000, null);
        assertEquals(WcStatus.REM_INV_REQ_ERR, wc.status(), wc::toString);
        assertEquals(0, pair.b.dev.counter(SoftCounter.ENGINE_ERRORS), pair::describe);
        assertArrayEquals(before, bytes(pair.b, DST, 64));
    }
}
