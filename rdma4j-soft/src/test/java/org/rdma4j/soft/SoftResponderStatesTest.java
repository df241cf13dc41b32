// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * The states B's responder enters ({@link RespState}, seen through its QP's {@link StateTrace}) for one request
 * each, two in-process RC QPs on a manual clock ({@link LossyPair}, MTU 256). The expected sequences are those of
 * rxe_responder()'s loop in rxe_resp.c (read in torvalds/linux at commit 034e285f, a kernel later than 6.1), function
 * by function: get_req returns CHK_PSN, check_psn CHK_OP_SEQ (DUPLICATE_REQUEST behind ePSN), check_op_seq
 * CHK_OP_VALID, check_op_valid CHK_RESOURCE, check_resource CHK_LENGTH (ERR_RNR without a receive WQE),
 * check_length CHK_RKEY, check_rkey EXECUTE (ERR_RKEY_VIOLATION), execute COMPLETE for a SEND and READ_REPLY for a
 * READ, do_complete ACKNOWLEDGE on RC, acknowledge CLEANUP, cleanup DONE; RESPST_ERR_RKEY_VIOLATION on RC goes to
 * COMPLETE (do_class_ac_error sets goto_error) and DONE with goto_error to ERROR; RESPST_ERR_RNR to CLEANUP;
 * duplicate_request READ_REPLY for a READ it holds a resource for; read_reply CLEANUP once the READ is answered.
 */
class SoftResponderStatesTest {
    private static final List<String> CHECKS = List.of("GET_REQ", "CHK_PSN", "CHK_OP_SEQ", "CHK_OP_VALID",
            "CHK_RESOURCE", "CHK_LENGTH", "CHK_RKEY");

    private LossyPair pair;
    private final RecordingTrace trace = new RecordingTrace();

    @BeforeEach
    void setUp() {
        pair = new LossyPair(LossyPair.Config.of(QpType.RC), 1, FaultInjectingLink.Faults.NONE);
        ((SoftQp) pair.b.qp).trace = trace;
    }

    @AfterEach
    void tearDown() {
        pair.close();
    }

    private static List<String> checksThen(String... rest) {
        List<String> l = new ArrayList<>(CHECKS);
        l.addAll(List.of(rest));
        return l;
    }

    private WorkCompletion sendCompletion() {
        return pair.collect(new org.rdma4j.verbs.CompletionQueue[] {pair.a.scq}, new int[] {1}, 10_000).get(0).get(0);
    }

    private void post(SendWorkRequest w) {
        assertTrue(pair.a.qp.postSend(w), () -> "postSend: " + w.postError());
    }

    private SendWorkRequest wr(WrOpcode op, int len) {
        return new SendWorkRequest(1).wrId(1).opcode(op).sendFlags(SendFlags.SIGNALED)
                .singleSge(pair.a.addr(0), len, pair.a.mr.lkey());
    }

    @Test
    void inOrderSend() {
        RecvWorkRequest r = new RecvWorkRequest(1).wrId(7).singleSge(pair.b.addr(0), 4096, pair.b.mr.lkey());
        assertTrue(pair.b.qp.postRecv(r), () -> "postRecv: " + r.postError());
        post(wr(WrOpcode.SEND, 100));
        assertEquals(WcStatus.SUCCESS, sendCompletion().status());
        assertEquals(checksThen("EXECUTE", "COMPLETE", "ACKNOWLEDGE", "CLEANUP", "DONE"), trace.take("resp"));
    }

    @Test
    void writeWithABadRkeyIsAnRkeyViolation() {
        post(wr(WrOpcode.RDMA_WRITE, 100).remoteAddr(pair.b.addr(0)).rkey(pair.b.mr.rkey() ^ 0x100));
        assertEquals(WcStatus.REM_ACCESS_ERR, sendCompletion().status());
        assertEquals(checksThen("ERR_RKEY_VIOLATION", "COMPLETE", "ACKNOWLEDGE", "CLEANUP", "DONE", "ERROR"),
                trace.take("resp"));
    }

    @Test
    void sendWithoutAReceiveIsRnr() {
        post(wr(WrOpcode.SEND, 100));
        // the RNR NAK came back at once; the requester waits for its RNR timer, which this clock never runs
        assertEquals(List.of("GET_REQ", "CHK_PSN", "CHK_OP_SEQ", "CHK_OP_VALID", "CHK_RESOURCE", "ERR_RNR", "CLEANUP",
                "DONE"), trace.take("resp"));
    }

    @Test
    void udSendGoesFromChkPsnToChkResource() {
        pair.close();
        pair = new LossyPair(LossyPair.Config.of(QpType.UD), 1, FaultInjectingLink.Faults.NONE);
        ((SoftQp) pair.b.qp).trace = trace;
        RecvWorkRequest r = new RecvWorkRequest(1).wrId(7).singleSge(pair.b.addr(0), 4096, pair.b.mr.lkey());
        assertTrue(pair.b.qp.postRecv(r), () -> "postRecv: " + r.postError());
        post(wr(WrOpcode.SEND, 100).ah(pair.a.ahToPeer).remoteQpn(pair.b.qp.qpNum()).remoteQkey(LossyPair.QKEY));
        assertEquals(WcStatus.SUCCESS, pair.collect(new org.rdma4j.verbs.CompletionQueue[] {pair.b.rcq}, new int[] {1},
                10_000).get(0).get(0).status());
        // rdma4j's departure (Responder.checkPsn): UD skips CHK_OP_SEQ, CHK_OP_VALID, CHK_LENGTH and CHK_RKEY, which
        // rxe passes through; do_complete goes to CLEANUP for UD, as rxe
        assertEquals(List.of("GET_REQ", "CHK_PSN", "CHK_RESOURCE", "EXECUTE", "COMPLETE", "CLEANUP", "DONE"),
                trace.take("resp"));
    }

    @Test
    void duplicateReadIsReplayed() {
        boolean[] dropped = {false};
        pair.link.dropIf(p -> {
            if (!dropped[0] && p.opcode == (Opcodes.RC | Opcodes.READ_RESPONSE_ONLY)) {
                dropped[0] = true; // the READ's only response, once: the requester times out and asks again
                return true;
            }
            return false;
        });
        post(wr(WrOpcode.RDMA_READ, 100).remoteAddr(pair.b.addr(0)).rkey(pair.b.mr.rkey()));
        assertEquals(WcStatus.SUCCESS, sendCompletion().status());
        assertTrue(dropped[0], "the response was dropped");
        List<String> want = checksThen("EXECUTE", "READ_REPLY", "CLEANUP", "DONE");
        want.addAll(List.of("GET_REQ", "CHK_PSN", "DUPLICATE_REQUEST", "READ_REPLY", "CLEANUP", "DONE"));
        assertEquals(want, trace.take("resp"));
    }
}
