// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

/**
 * When a {@link SoftQp}'s coalesced ACKs leave (AckCoalescer): at the end of the owner's burst, at the end of a
 * thread's RoCE {@link Burst}, or at the thread's next verbs call. {@link #flushAckAtEndOfBurst} is owner only;
 * the others run on a thread that owns no executor ({@link #flushBurstAck}, {@link #flushDeferredAck} take
 * the QP's).
 */
final class AckFlush {
    private AckFlush() {
    }

    /**
     * The END_OF_BURST ACK: sent now, or listed on this thread's RoCE burst to leave at its end. Owner only.
     *
     * @param qp the QP
     */
    static void flushAckAtEndOfBurst(SoftQp qp) {
        try {
            if (!qp.responder.acks.ackDueAtEndOfBurst()) {
                return;
            }
            if (qp.device.onWire() && !qp.own.burstAckListed) {
                Burst b = Burst.current();
                if (b.active()) {
                    qp.own.burstAckListed = true;
                    b.ackAtEnd(qp);
                    return;
                }
            }
            if (!qp.own.burstAckListed) {
                qp.responder.acks.flushAck();
            }
        } catch (Throwable t) {
            EngineErrors.qpWorkFailed(qp, "ACK", t);
        }
    }

    /**
     * The thread's burst ended: its END_OF_BURST ACK leaves. The caller owns no executor.
     *
     * @param qp the QP
     */
    static void flushBurstAck(SoftQp qp) {
        qp.exec.acquire();
        try {
            qp.own.burstAckListed = false;
            if (qp.responder.acks.ackDueAtEndOfBurst()) {
                qp.responder.acks.flushAck();
            }
        } catch (Throwable t) {
            EngineErrors.qpWorkFailed(qp, "ACK", t);
        } finally {
            qp.exec.release();
        }
    }

    /**
     * Sends the responder's deferred (NEXT_VERBS_CALL) ACK; the caller owns no executor.
     *
     * @param qp the QP
     */
    static void flushDeferredAck(SoftQp qp) {
        qp.ackListed = false;
        qp.exec.acquire();
        try {
            qp.responder.acks.flushAck();
        } catch (Throwable t) {
            EngineErrors.qpWorkFailed(qp, "deferred ACK", t);
        } finally {
            qp.exec.release();
        }
    }

    /**
     * The ACKs deferred to this thread's next verbs call (AckCoalescer NEXT_VERBS_CALL) leave now, in the
     * same burst as the packets the call made: an answer leaves before the ACKs it follows. The caller owns
     * no executor.
     *
     * @param qp the QP the call was on
     */
    static void afterVerbsCall(SoftQp qp) {
        if (qp.fabric.acksPending()) {
            qp.fabric.flushAcks();
        }
    }
}
