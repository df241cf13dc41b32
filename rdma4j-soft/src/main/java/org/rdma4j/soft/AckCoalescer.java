// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

/**
 * A responder's one pending plain ACK (docs/engine.md, "One ACK coalescer"): the newest PSN that asked for an
 * acknowledgement (AckReq) and the MSN at that point, and when it must leave. IBA 9.7.5.1.1 lets a responder
 * coalesce: an ACK acknowledges every request up to its PSN, so one ACK answers a burst. It always leaves
 * before any other response of the QP (responses go in the order they were made) and before the QP changes
 * (modify, destroy). Owned by the QP's executor.
 */
final class AckCoalescer {
    /** When a requested ACK leaves. */
    enum Timing {
        /** When the owner's burst on the QP ends (one hand-off drain, one receive batch, one delivery). */
        END_OF_BURST,
        /**
         * At the receiving thread's next verbs call: a thread busy-polling a RoCE device received the request,
         * and a system call between the message and its completion would sit on its critical path. The
         * engine's agents send it if the thread goes quiet (about 1 ms).
         */
        NEXT_VERBS_CALL
    }

    private boolean pending;
    private int psn;
    private int msn;
    private Timing timing = Timing.END_OF_BURST;

    /**
     * An AckReq packet was executed.
     *
     * @param ackPsn its PSN
     * @param ackMsn the MSN after it
     * @param t      when the ACK may leave; a later request may only make it leave earlier
     * @return whether the ACK was not pending before (a NEXT_VERBS_CALL one must then be listed)
     */
    boolean request(int ackPsn, int ackMsn, Timing t) {
        boolean first = !pending;
        psn = ackPsn;
        msn = ackMsn;
        timing = first || t == Timing.END_OF_BURST ? t : timing;
        pending = true;
        return first;
    }

    /** @return whether an ACK waits */
    boolean pending() {
        return pending;
    }

    /** @return whether the pending ACK waits for the end of the burst (rather than a later verbs call) */
    boolean dueAtEndOfBurst() {
        return pending && timing == Timing.END_OF_BURST;
    }

    /** @return the PSN the pending ACK carries */
    int psn() {
        return psn;
    }

    /** @return the MSN the pending ACK carries */
    int msn() {
        return msn;
    }

    /** The ACK was sent, or the QP reset. */
    void clear() {
        pending = false;
        timing = Timing.END_OF_BURST;
    }
}
