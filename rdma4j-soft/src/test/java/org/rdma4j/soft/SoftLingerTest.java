// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.rdma4j.verbs.Linger;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * The end of ibv_rc_pingpong under loss, on a {@link FaultInjectingLink} and a manual clock: B (the
 * server) sends the last SEND, A (the client) receives it, which is A's last event, and A's ACK of it
 * is lost. B resends after its local ACK timeout and, with {@code retry_cnt} 7, forever (rxe). The
 * server completes only if A's QP is still there to ACK the duplicate (IBA 9.9.2): that is what
 * {@link Linger} is for. Also the linger's own rules: quiet period restarted by arrivals, the cap,
 * and {@code rcvd_pkts} from {@code queryPortCounters}.
 */
class SoftLingerTest {
    private static final int TIMEOUT = 8;
    private LossyPair pair;

    @AfterEach
    void tearDown() {
        if (pair != null) {
            pair.close();
        }
    }

    /** A and B connected RC with retry_cnt 7 (infinite in rxe); A's first {@code lostAcks} ACKs to B are lost. */
    private void open(int lostAcks) {
        pair = new LossyPair(LossyPair.Config.of(QpType.RC).retries(TIMEOUT, 7, 7), 42, FaultInjectingLink.Faults.NONE);
        int bQpn = pair.b.qp.qpNum();
        int[] dropped = {0};
        pair.link.dropIf(p -> {
            if (p.opcode == (Opcodes.RC | Opcodes.ACKNOWLEDGE) && p.destQpn == bQpn && dropped[0] < lostAcks) {
                dropped[0]++;
                return true;
            }
            return false;
        });
    }

    /** B's last SEND reaches A; returns once A has its receive completion (A's data phase is over). */
    private void lastSendArrives() {
        RecvWorkRequest r = new RecvWorkRequest(1).wrId(1).singleSge(pair.a.addr(0), 4096, pair.a.mr.lkey());
        assertTrue(pair.a.qp.postRecv(r), () -> "postRecv: " + r.postError());
        SendWorkRequest s = new SendWorkRequest(1).wrId(2).opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                .singleSge(pair.b.addr(0), 4096, pair.b.mr.lkey());
        assertTrue(pair.b.qp.postSend(s), () -> "postSend: " + s.postError());
        WorkCompletion wc = pair.collect(new org.rdma4j.verbs.CompletionQueue[] {pair.a.rcq}, new int[] {1}, 100)
                .get(0).get(0);
        assertEquals(WcStatus.SUCCESS, wc.status(), pair::describe);
    }

    /**
     * Steps the clock; A's QP is destroyed when A's linger ends (at once without a linger). Returns B's
     * send completion, or null if it never came within {@code maxSteps}.
     */
    private WorkCompletion runEnd(Linger linger, int maxSteps, Linger.End[] ended) {
        boolean aClosed = false;
        WorkCompletion wc = new WorkCompletion();
        for (int i = 0; i < maxSteps; i++) {
            if (!aClosed) {
                Linger.End e = linger == null ? Linger.End.QUIET : linger.poll(pair.clock.nanoTime(), false);
                if (e != null) {
                    ended[0] = e;
                    pair.a.qp.close(); // as the program's close after the data phase
                    aClosed = true;
                }
            }
            if (pair.b.scq.poll(wc)) {
                return wc;
            }
            pair.step();
        }
        return null;
    }

    @Test
    void withoutALingerALostLastAckLeavesThePeerResendingForever() {
        open(1);
        lastSendArrives();
        Linger.End[] ended = new Linger.End[1];
        // 50 local ACK timeouts: rxe's retry_cnt 7 would have given up after 8 had it been finite.
        WorkCompletion wc = runEnd(null, 200, ended);
        assertNull(wc, pair::describe);
        assertTrue(pair.a.dev.counter(SoftCounter.DROP_NO_QP) >= 10, pair::describe);
        assertTrue(pair.b.dev.counter(SoftCounter.COMPLETER_RETRY_ERR) >= 10, pair::describe);
    }

    @ParameterizedTest(name = "{0} ACKs lost")
    @ValueSource(ints = {1, 2, 5})
    void aLingeringQpAcksThePeersResendAndThePeerCompletes(int lostAcks) {
        open(lostAcks);
        lastSendArrives();
        Linger linger = Linger.forPeerOf(pair.a.ctx, 1, TIMEOUT, pair.clock.nanoTime());
        assertTrue(linger.observesArrivals());
        Linger.End[] ended = new Linger.End[1];
        WorkCompletion wc = runEnd(linger, 400, ended);
        assertNotNull(wc, () -> linger + "\n" + pair.describe());
        assertEquals(WcStatus.SUCCESS, wc.status(), pair::describe);
        assertEquals(2, wc.wrId());
        // Each resend was a duplicate to A's responder, ACKed again (IBA 9.9.2).
        assertEquals(lostAcks, pair.a.dev.counter(SoftCounter.DUPLICATE_REQUEST), pair::describe);
        // With 5 lost ACKs the last resend comes 5 timeouts after the first send: later than a fixed
        // quiet period of QUIET_RETRANSMITS timeouts from the start; the arrivals restarted it.
        assertTrue(5 > Linger.QUIET_RETRANSMITS);
        // The linger goes on after the peer completed, until the quiet period has passed, then ends.
        WorkCompletion none = runEnd(linger, 400, ended);
        assertNull(none);
        assertEquals(Linger.End.QUIET, ended[0], linger::toString);
        assertEquals(lostAcks, linger.arrivals(), linger::toString);
        assertEquals(0, pair.a.dev.counter(SoftCounter.DROP_NO_QP), pair::describe);
    }

    @Test
    void aPeerThatNeverHearsTheAckIsAbandonedAtTheCap() {
        open(Integer.MAX_VALUE);
        lastSendArrives();
        long t0 = pair.clock.nanoTime();
        Linger linger = Linger.forPeerOf(pair.a.ctx, 1, TIMEOUT, t0);
        Linger.End[] ended = new Linger.End[1];
        assertNull(runEnd(linger, 4 * Linger.CAP_RETRANSMITS + 40, ended));
        assertEquals(Linger.End.CAP, ended[0], linger::toString);
        long rto = Linger.retransmitTimeoutNs(TIMEOUT);
        assertEquals(rto * Linger.CAP_RETRANSMITS, linger.capNs());
        assertTrue(linger.arrivals() >= Linger.CAP_RETRANSMITS - 2, linger::toString);
    }

    @Test
    void aPeerKnownToBeDoneEndsTheLingerAtOnce() {
        open(0);
        lastSendArrives();
        Linger linger = Linger.forPeerOf(pair.a.ctx, 1, TIMEOUT, pair.clock.nanoTime());
        assertEquals(Linger.End.PEER_DONE, linger.poll(pair.clock.nanoTime(), true));
        assertEquals(Linger.End.PEER_DONE, linger.poll(pair.clock.nanoTime() + linger.capNs(), false));
    }

    @Test
    void timeoutZeroMeansNoResendsAndNoLinger() {
        open(0);
        Linger linger = Linger.forPeerOf(pair.a.ctx, 1, 0, pair.clock.nanoTime());
        assertEquals(Linger.End.NOTHING_TO_WAIT_FOR, linger.poll(pair.clock.nanoTime(), false));
        assertEquals(0, Linger.retransmitTimeoutNs(0));
        assertEquals(4096L << 14, Linger.retransmitTimeoutNs(14));
        assertEquals(Linger.MAX_CAP_NS, new Linger(null, Linger.retransmitTimeoutNs(31), 0).capNs());
    }

    @Test
    void portCountersCarryRxeNames() {
        open(0);
        lastSendArrives();
        Map<String, Long> a = pair.a.ctx.queryPortCounters(1);
        Map<String, Long> b = pair.b.ctx.queryPortCounters(1);
        assertEquals(pair.a.dev.counter(SoftCounter.RCVD_PKTS), a.get("rcvd_pkts"));
        assertTrue(a.get("rcvd_pkts") >= 1);
        assertTrue(b.get("sent_pkts") >= 1);
        for (String rxe : new String[] {"sent_pkts", "rcvd_pkts", "duplicate_request", "out_of_seq_request",
                "rcvd_rnr_err", "send_rnr_err", "rcvd_seq_err", "completer_retry_err", "retry_exceeded_err",
                "retry_rnr_exceeded_err"}) {
            assertTrue(a.containsKey(rxe), rxe);
        }
    }
}
