// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.rdma4j.common.Psn;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * The states A's {@link Completer} enters ({@link CompState}, traced through {@link SoftQp#trace}) for each kind
 * of response, against the order of rxe_completer's loop (drivers/infiniband/sw/rxe/rxe_comp.c, Linux 6.1). Two
 * QPs on a {@link LossyPair} (path MTU 256, manual clock); in process a response reaches the completer before
 * the post returns, so most cases need no clock step.
 *
 * <p>rxe's loop leaves from inside ERROR_RETRY, RNR_RETRY and ERROR ({@code goto done}/{@code goto exit}) without
 * entering another state, so those sequences end there, as rxe's {@code pr_debug} trace does. One difference in
 * order is rdma4j's and documented in {@link Completer}: UPDATE_COMP comes before COMP_ACK (rxe: COMP_ACK, then
 * UPDATE_COMP when the packet's PSN is not behind comp.psn).
 */
class SoftCompleterStatesTest {
    private static final int SRC = 0;
    private static final int DST = 1 << 20;

    /** rxe: GET_ACK -> GET_WQE (get_wqe: a WQE and a packet) -> CHECK_PSN -> CHECK_ACK. */
    private static final List<String> CHECKED = List.of("GET_ACK", "GET_WQE", "CHECK_PSN", "CHECK_ACK");

    private LossyPair pair;
    private final RecordingTrace trace = new RecordingTrace();

    @AfterEach
    void tearDown() {
        if (pair != null) {
            pair.close();
        }
    }

    private void open(LossyPair.Config cfg) {
        pair = new LossyPair(cfg, 1, FaultInjectingLink.Faults.NONE);
        ((SoftQp) pair.a.qp).trace = trace;
    }

    private static List<String> concat(List<String> first, String... rest) {
        List<String> l = new ArrayList<>(first);
        l.addAll(List.of(rest));
        return l;
    }

    private SendWorkRequest wr(long id, WrOpcode op, long off, int len) {
        return new SendWorkRequest(1).wrId(id).opcode(op).sendFlags(SendFlags.SIGNALED)
                .singleSge(pair.a.addr(off), len, pair.a.mr.lkey());
    }

    private void post(SendWorkRequest w) {
        assertTrue(pair.a.qp.postSend(w), () -> "postSend: " + w.postError());
    }

    private void postRecv(long id, int len) {
        RecvWorkRequest r = new RecvWorkRequest(1).wrId(id).singleSge(pair.b.addr(DST), len, pair.b.mr.lkey());
        assertTrue(pair.b.qp.postRecv(r), () -> "postRecv: " + r.postError());
    }

    /** Steps the clock until A's send CQ gives a completion; returns it. */
    private WorkCompletion awaitSend(int maxSteps) {
        WorkCompletion wc = new WorkCompletion();
        for (int i = 0; !pair.a.scq.poll(wc); i++) {
            assertTrue(i < maxSteps, () -> "no send completion after " + maxSteps + " steps\n" + pair.describe());
            pair.step();
        }
        return wc;
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

    @Test
    void anAckedSignaledSend() {
        open(LossyPair.Config.of(QpType.RC));
        postRecv(9, 4096);
        post(wr(1, WrOpcode.SEND, SRC, 100)); // one packet
        WorkCompletion wc = awaitSend(0);
        assertEquals(WcStatus.SUCCESS, wc.status());
        // rxe: check_ack (ACKNOWLEDGE, AETH ACK) -> WRITE_SEND -> (pending, last_psn == psn) COMP_ACK ->
        // complete_ack -> UPDATE_COMP -> DONE; ours updates comp.psn first, then completes.
        assertEquals(concat(CHECKED, "WRITE_SEND", "UPDATE_COMP", "COMP_ACK", "DONE"), trace.take("comp"));
    }

    @Test
    void anRdmaReadResponseOfOnePacketAndOfThree() {
        open(LossyPair.Config.of(QpType.RC));
        post(wr(1, WrOpcode.RDMA_READ, DST, 100).remoteAddr(pair.b.addr(SRC)).rkey(pair.b.mr.rkey()));
        assertEquals(WcStatus.SUCCESS, awaitSend(0).status());
        // rxe: check_ack (READ_RESPONSE_ONLY, AETH ACK) -> READ -> do_read (resid 0, END) COMP_ACK -> UPDATE_COMP
        // -> DONE; ours UPDATE_COMP, then COMP_ACK.
        assertEquals(concat(CHECKED, "READ", "UPDATE_COMP", "COMP_ACK", "DONE"), trace.take("comp"));

        post(wr(2, WrOpcode.RDMA_READ, DST, 600).remoteAddr(pair.b.addr(SRC)).rkey(pair.b.mr.rkey()));
        assertEquals(WcStatus.SUCCESS, awaitSend(0).status());
        // FIRST and MIDDLE: rxe do_read -> UPDATE_COMP -> DONE; LAST as ONLY above.
        List<String> notLast = concat(CHECKED, "READ", "UPDATE_COMP", "DONE");
        List<String> want = new ArrayList<>(notLast);
        want.addAll(notLast);
        want.addAll(concat(CHECKED, "READ", "UPDATE_COMP", "COMP_ACK", "DONE"));
        assertEquals(want, trace.take("comp"));
    }

    @Test
    void anAtomicAcknowledge() {
        open(LossyPair.Config.of(QpType.RC));
        post(wr(1, WrOpcode.ATOMIC_FETCH_AND_ADD, DST, 8).remoteAddr(pair.b.addr(SRC)).rkey(pair.b.mr.rkey())
                .compareAdd(1));
        assertEquals(WcStatus.SUCCESS, awaitSend(0).status());
        // rxe: check_ack (ATOMIC_ACKNOWLEDGE) -> ATOMIC -> do_atomic COMP_ACK -> UPDATE_COMP -> DONE.
        assertEquals(concat(CHECKED, "ATOMIC", "UPDATE_COMP", "COMP_ACK", "DONE"), trace.take("comp"));
    }

    @Test
    void anRnrNakThenTheAckOfTheRetry() {
        open(LossyPair.Config.of(QpType.RC));
        post(wr(1, WrOpcode.SEND, SRC, 100)); // no receive posted: B answers with an RNR NAK
        assertEquals(1, pair.a.dev.counter(SoftCounter.RCV_RNR_ERR), pair::describe);
        // rxe: check_ack (ACKNOWLEDGE, AETH RNR NAK) -> RNR_RETRY, which sets the RNR timer and leaves (goto exit).
        assertEquals(concat(CHECKED, "RNR_RETRY"), trace.take("comp"));
        postRecv(9, 4096);
        // The RNR timer sends the SEND again (no completer state: rxe's rnr_nak_timer runs the requester), and
        // its ACK completes it.
        assertEquals(WcStatus.SUCCESS, awaitSend(4).status());
        assertEquals(concat(CHECKED, "WRITE_SEND", "UPDATE_COMP", "COMP_ACK", "DONE"), trace.take("comp"));
    }

    @Test
    void anRnrNakWithNoRetryLeftFailsTheWqe() {
        open(LossyPair.Config.of(QpType.RC).retries(8, 7, 0));
        post(wr(1, WrOpcode.SEND, SRC, 100));
        WorkCompletion wc = awaitSend(0);
        assertEquals(WcStatus.RNR_RETRY_EXC_ERR, wc.status());
        // rxe: RNR_RETRY with rnr_retry 0 -> ERROR (do_complete, rxe_qp_error, goto exit).
        assertEquals(concat(CHECKED, "RNR_RETRY", "ERROR"), trace.take("comp"));
        assertEquals(QpState.ERR, pair.a.qp.state());
    }

    @Test
    void aRetransmitTimeoutThenTheAckOfTheResend() {
        open(LossyPair.Config.of(QpType.RC));
        dropOnce(p -> p.is(Opcodes.M_REQ));
        postRecv(9, 4096);
        post(wr(1, WrOpcode.SEND, SRC, 100)); // lost: nothing answers
        assertEquals(List.of(), trace.take("comp"));
        WorkCompletion wc = awaitSend(8); // a timeout is four steps
        assertEquals(WcStatus.SUCCESS, wc.status());
        assertEquals(1, pair.a.dev.counter(SoftCounter.RETRY_TIMEOUTS));
        // rxe: retransmit_timer sets comp.timeout; rxe_completer: GET_ACK (no packet) -> GET_WQE (get_wqe without
        // a packet: EXIT) -> EXIT (timeout_retry and a WQE) -> ERROR_RETRY, which tells the requester to retry
        // and leaves (goto done). Then the resent SEND's ACK as for any SEND.
        List<String> want = concat(List.of("GET_ACK", "GET_WQE", "EXIT", "ERROR_RETRY"));
        want.addAll(concat(CHECKED, "WRITE_SEND", "UPDATE_COMP", "COMP_ACK", "DONE"));
        assertEquals(want, trace.take("comp"));
    }

    @Test
    void aRetransmitTimeoutWithNoRetryLeftFailsTheWqe() {
        open(LossyPair.Config.of(QpType.RC).retries(8, 0, 7));
        pair.link.faults(FaultInjectingLink.Faults.dropping(1.0));
        post(wr(1, WrOpcode.SEND, SRC, 100));
        WorkCompletion wc = awaitSend(8);
        assertEquals(WcStatus.RETRY_EXC_ERR, wc.status());
        // rxe: ERROR_RETRY with retry_cnt 0 -> ERROR.
        assertEquals(List.of("GET_ACK", "GET_WQE", "EXIT", "ERROR_RETRY", "ERROR"), trace.take("comp"));
    }

    @Test
    void aSequenceNakGoesToErrorRetry() {
        open(LossyPair.Config.of(QpType.RC));
        int first = pair.cfg.psnA();
        dropOnce(p -> p.is(Opcodes.M_REQ) && p.psn == Psn.add(first, 1));
        postRecv(9, 4096);
        post(wr(1, WrOpcode.SEND, SRC, 2000)); // 8 packets; the second is lost
        WorkCompletion wc = awaitSend(0);
        assertNotNull(wc);
        assertEquals(WcStatus.SUCCESS, wc.status());
        assertEquals(1, pair.a.dev.counter(SoftCounter.RETRY_NAKS), pair::describe);
        // rxe: check_ack (ACKNOWLEDGE, NAK PSN sequence error) -> ERROR_RETRY, which starts the retry and leaves.
        List<String> states = trace.take("comp");
        String nak = String.join(",", concat(CHECKED, "ERROR_RETRY"));
        assertTrue(String.join(",", states).contains(nak), () -> "no " + nak + " in " + states);
        assertEquals(concat(CHECKED, "WRITE_SEND", "UPDATE_COMP", "COMP_ACK", "DONE"),
                states.subList(states.size() - 8, states.size()), states::toString);
    }
}
