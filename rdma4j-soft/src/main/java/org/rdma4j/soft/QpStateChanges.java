// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.AsyncEventType;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.WcOpcode;
import org.rdma4j.verbs.WcStatus;

/**
 * The state changes of a {@link SoftQp} that its roles and modify make: RESET, the move to ERR with its flushes,
 * the completion of a send WQE, SQ_DRAINED. Owner only: every method runs on the thread that owns the QP's
 * executor (a role's protocol work, or a verbs call holding it).
 */
final class QpStateChanges {
    private QpStateChanges() {
    }

    /**
     * Back to RESET (ibv_modify_qp to RESET): the queues emptied, the roles and timers as new.
     *
     * @param qp the QP
     */
    static void reset(SoftQp qp) {
        qp.state = QpState.RESET;
        qp.sq.reset();
        qp.retransDeadline = 0;
        qp.rnrDeadline = 0; // the timer service forgets a QP with no deadline
        qp.paceDeadline = 0;
        qp.probeDeadline = 0;
        qp.pacer.reset();
        if (qp.rq != null) {
            qp.rq.reset();
        }
        qp.requester.reset();
        qp.completer.reset();
        qp.responder.reset();
        qp.qkey = 0;
        qp.accessFlags = 0;
    }

    /**
     * Moves to ERR: every outstanding send and receive completes with WR_FLUSH_ERR (rxe_qp_error and
     * the flush in rxe_requester / rxe_receiver). With an SRQ, the shared queue is left alone and
     * QP_LAST_WQE_REACHED is raised instead (rxe flush_recv_queue).
     *
     * @param qp the QP
     */
    static void moveToError(SoftQp qp) {
        boolean was = qp.state == QpState.ERR;
        if (!was && !qp.modifyingToError) {
            SoftEvents.qpState(qp, qp.state, QpState.ERR, "error");
        }
        qp.state = QpState.ERR;
        qp.retransDeadline = 0;
        qp.rnrDeadline = 0;
        qp.paceDeadline = 0;
        qp.probeDeadline = 0;
        qp.responder.held.drop();
        flushSendQueue(qp);
        if (qp.srq != null) {
            if (!was) {
                qp.pd.ctx.raise(new AsyncEvent(AsyncEventType.QP_LAST_WQE_REACHED, qp, null, null, 0));
            }
        } else {
            flushRecvQueue(qp);
        }
    }

    /**
     * Completes every outstanding send with WR_FLUSH_ERR.
     *
     * @param qp the QP
     */
    static void flushSendQueue(SoftQp qp) {
        SendQueue q = qp.sq;
        while (!q.isEmpty()) {
            int w = q.compSlot();
            if (q.tookCredit(w)) {
                q.setTookCredit(w, false);
                qp.requester.rdAtomicAvail++;
            }
            q.setState(w, SendQueue.DONE);
            q.advanceComp();
            qp.sendCq.post(q.wrId(w), WcStatus.WR_FLUSH_ERR, q.opcode(w).wcOpcode(), 0, 0, qp.qpn, 0, 0, false);
        }
        q.reqToHead();
    }

    /**
     * Completes every posted receive with WR_FLUSH_ERR.
     *
     * @param qp the QP
     */
    static void flushRecvQueue(SoftQp qp) {
        qp.responder.dropCurrentWqe();
        while (!qp.rq.isEmpty()) {
            int s = qp.rq.headSlot();
            long id = qp.rq.wrId[s];
            qp.rq.advance();
            qp.recvCq.post(id, WcStatus.WR_FLUSH_ERR, WcOpcode.RECV, 0, 0, qp.qpn, 0, 0, false);
        }
    }

    /**
     * Completes a send WQE, the oldest outstanding one (slot {@code w}); a CQE is generated if it failed or is
     * signaled.
     *
     * @param qp the QP
     * @param w the slot
     * @param status the completion's status
     */
    static void completeSend(SoftQp qp, int w, WcStatus status) {
        SendQueue q = qp.sq;
        q.setState(w, SendQueue.DONE);
        if (q.tookCredit(w)) {
            q.setTookCredit(w, false);
            qp.requester.rdAtomicAvail++;
        }
        q.advanceComp();
        if (status != WcStatus.SUCCESS || q.signaled(w)) {
            // rxe make_send_cqe: byte_len is the WQE's length, for an atomic too (16 for a 16-byte SGE:
            // seen in the VM)
            int byteLen = (int) q.length(w);
            // A full send CQ loses the completion and raises CQ_ERR; the QP carries on (rxe's completer
            // ignores rxe_cq_post's -EBUSY).
            qp.sendCq.post(q.wrId(w), status, q.opcode(w).wcOpcode(), byteLen, 0, qp.qpn, 0, 0, false);
        }
    }

    /**
     * A receive completion was lost to a full CQ: the QP goes to ERR (rxe do_complete ->
     * RESPST_ERR_CQ_OVERFLOW -> RESPST_ERROR, class G) and the request is not acknowledged. The user
     * learns of it from the CQ_ERR event {@link SoftCq#post} raised, one per lost completion (the flushed
     * receives that do not fit either raise theirs); rxe raises no QP event, and neither do we (seen in the
     * VM: interop/rxe-probes, case cqovf).
     *
     * @param qp the QP
     */
    static void overflowed(SoftQp qp) {
        if (qp.state != QpState.ERR) {
            moveToError(qp);
        }
    }

    /**
     * Raises SQ_DRAINED if the QP is in SQD with nothing outstanding and the event was asked for.
     *
     * @param qp the QP
     */
    static void maybeSqDrained(SoftQp qp) {
        if (qp.state == QpState.SQD && qp.sq.isEmpty() && qp.enSqdAsyncNotify) {
            qp.enSqdAsyncNotify = false;
            qp.pd.ctx.raise(new AsyncEvent(AsyncEventType.SQ_DRAINED, qp, null, null, 0));
        }
    }
}
