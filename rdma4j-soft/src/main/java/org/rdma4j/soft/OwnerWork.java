// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.verbs.QpState;

/**
 * The protocol work a {@link SoftQp}'s owner runs (docs/engine.md): one packet through the responder or the
 * completer, the inbox's drain, the duty cycle and the end of a burst, the two halves of the QP's
 * {@link QpExecutor.Work}. Owner only: every method runs on the thread that owns the QP's executor.
 */
final class OwnerWork {
    private OwnerWork() {
    }

    /**
     * Runs one packet through the responder or the completer. Owner only.
     *
     * @param qp the QP
     * @param p the packet
     */
    static void process(SoftQp qp, Packet p) {
        qp.count(SoftCounter.RCVD_PKTS);
        if (p.payloadLen < 0) {
            qp.count(SoftCounter.DROP_MALFORMED); // a slot whose payload could not be copied
            return;
        }
        try {
            if (p.is(Opcodes.M_REQ)) {
                qp.responder.onRequest(p);
            } else {
                qp.completer.onResponse(p);
            }
        } catch (Throwable t) {
            EngineErrors.receiveFailed(qp.device, qp, p, t);
        }
    }

    /**
     * Processes what the inbox holds (at most one ring's worth). Owner only.
     *
     * @param qp the QP
     */
    static void drainInbox(SoftQp qp) {
        if (qp.own.draining) {
            return; // called from the processing of a packet of this drain (a response runs the requester)
        }
        qp.own.draining = true;
        try {
            int n = 0;
            long seq;
            Packet next;
            while (n < SoftQp.INBOX_SLOTS && (next = qp.inbox.peek()) != null && !QpDelivery.waits(qp, next)
                    && (seq = qp.inbox.poll()) >= 0) {
                try {
                    process(qp, qp.inbox.packet(seq));
                } finally {
                    qp.inbox.done(seq);
                }
                n++;
            }
            if (n == SoftQp.INBOX_SLOTS && !qp.inbox.isEmpty()) {
                qp.exec.markPending(); // the rest in the next cycle, after the others' work
            }
        } finally {
            qp.own.draining = false;
        }
    }

    /**
     * The duty cycle (QpExecutor.Work): a READ reply's next burst, inbox, due timers, requester. Owner only.
     *
     * @param qp the QP
     */
    static void dutyCycle(SoftQp qp) {
        if (qp.paceDeadline != 0 && qp.responder.resources.replying() && qp.inbox.size() >= SoftQp.INBOX_SLOTS / 2) {
            // Half the inbox waits behind the paused reply: the peer's requester has been resending what we
            // hold (its timer ran out), and once the inbox is full even the re-read that would move the reply
            // is dropped, as are the responses to our own requester that queue behind the waiting requests.
            // The reply goes on now: the gap protects the path from a burst, not at the price of a livelock
            // (SoftLossyRcPropertiesTest.seedsThatOnceFailed, -Pslow seeds -1 and -2; docs/engine.md "Pacing").
            qp.paceDeadline = 0;
            qp.count(SoftCounter.PACE_SPEEDUPS);
        }
        if (qp.paceDeadline == 0 && qp.responder.resources.replying()) {
            try {
                qp.responder.resources.continueReply(); // rxe READ_REPLY: before the requests that wait behind it
            } catch (Throwable t) {
                EngineErrors.qpWorkFailed(qp, "READ reply", t);
            }
        }
        if (!qp.inbox.isEmpty()) {
            drainInbox(qp);
        }
        if (qp.timerDue) {
            qp.timerDue = false;
            try {
                QpTimers.onTimers(qp, qp.fabric.clock.nanoTime());
            } catch (Throwable t) {
                EngineErrors.qpWorkFailed(qp, "timers", t);
            }
        }
        if (qp.sq.hasWork() && (qp.state == QpState.RTS || qp.state == QpState.SQD || qp.state == QpState.ERR)) {
            try {
                qp.requester.run();
            } catch (Throwable t) {
                EngineErrors.qpWorkFailed(qp, "post", t);
            }
        }
    }

    /**
     * The end of the owner's burst on this QP (QpExecutor.Work): the ACK coalescer's END_OF_BURST. In process
     * the ACK leaves now; on a RoCE device inside a thread's {@link Burst} (a receive batch, a post list) it
     * leaves when that burst ends, so the batch's requests share one ACK and the batch's system call. Owner only.
     *
     * @param qp the QP
     */
    static void endOfBurst(SoftQp qp) {
        try {
            AckFlush.flushAckAtEndOfBurst(qp);
        } finally {
            // last: a packet sent above may have kept a peer; letting go of it cannot keep another (the peer's
            // packets to this QP go to its inbox, this QP being owned here), so none outlives this burst
            try {
                releaseKeptPeer(qp);
            } catch (Throwable t) {
                EngineErrors.qpWorkFailed(qp, "peer release", t);
            }
        }
    }

    /** Lets go of the peer executor kept for this QP's burst (owner only). */
    private static void releaseKeptPeer(SoftQp qp) {
        SoftQp b = qp.own.keptPeer;
        if (b != null) {
            qp.own.keptPeer = null;
            b.own.heldForSender = false;
            b.exec.release(); // runs what waited for it, and its end of burst (the ACK)
        }
    }

    /** Cache-line padding before {@link OwnerState}'s fields (superclass fields are laid out first). */
    @SuppressWarnings("unused")
    abstract static class OwnerStatePad {
        long p0, p1, p2, p3, p4, p5, p6, p7;
    }

    /**
     * The owner's per-packet bookkeeping, in an object of its own: every sender reads this QP's fields (its
     * executor, inbox, CQs, addresses) on each delivery, and a field the owner writes per packet on one of
     * those cache lines would move the line between the two cores every time (false sharing). Owner only.
     */
    abstract static class OwnerStateFields extends OwnerStatePad {
        /** The executor is owned on behalf of a sender's burst (see {@link QpDelivery#deliver}). */
        boolean heldForSender;
        /** The peer whose executor this QP's owner keeps for the rest of its burst, or null. */
        SoftQp keptPeer;
        /** Whether {@link OwnerWork#drainInbox} is running. */
        boolean draining;
        /** Whether this QP's END_OF_BURST ACK is listed on a thread's burst (owner, or that burst's thread). */
        boolean burstAckListed;
    }

    /** Padding after the fields, so the next object allocated does not share their line. */
    @SuppressWarnings("unused")
    static final class OwnerState extends OwnerStateFields {
        long q0, q1, q2, q3, q4, q5, q6, q7;
    }
}
