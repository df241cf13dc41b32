// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

/**
 * Delivery of a packet to a {@link SoftQp} (docs/engine.md, "Packets between QPs"): processed at once on the
 * delivering thread when the QP's executor is free, kept for the rest of an in-process sender's burst, left
 * in the inbox for a poller of the QP's CQs, or queued behind the owner. Run by the delivering thread (a
 * sender's owner, a link's receive thread, the timer service's), which may own another QP's executor: it
 * takes this QP's only if it is free, and never waits for it.
 */
final class QpDelivery {
    private QpDelivery() {
    }

    /**
     * A packet for the QP from a link (the dispatcher checked its transport and addresses): processed now on
     * this thread if the executor is free and nothing waits before it, else copied into the inbox for the
     * owner (the payload's pieces, or its bytes when they do not outlive the call: {@link Packet#payloadStable}).
     * Never waits, so a thread that owns another QP's executor may deliver.
     *
     * @param qp the QP
     * @param p the packet, valid during the call
     */
    static void deliver(SoftQp qp, Packet p) {
        QpExecutor ex = qp.exec;
        if (p.sender != null && !ex.heldByCurrentThread() && handToPoller(qp, p)) {
            return;
        }
        if (ex.heldByCurrentThread()) {
            if (qp.own.heldForSender) {
                // kept for the burst of the QP that is sending (below): its next packet goes in directly
                qp.own.heldForSender = false;
                try {
                    if (!qp.inbox.isEmpty()) {
                        OwnerWork.drainInbox(qp);
                    }
                    if (!qp.inbox.isEmpty() || waits(qp, p)) {
                        handOff(qp, p); // behind a READ reply still being sent, or what waits for it
                        ex.markPending();
                    } else {
                        OwnerWork.process(qp, p);
                    }
                } finally {
                    qp.own.heldForSender = true;
                }
                return;
            }
            // this thread is inside this QP's work further up its stack: never re-enter it
            handOff(qp, p);
            ex.markPending();
            return;
        }
        if (ex.tryAcquire()) {
            boolean keep = false;
            try {
                if (!qp.inbox.isEmpty()) {
                    OwnerWork.drainInbox(qp); // what arrived first is processed first
                }
                if (!qp.inbox.isEmpty() || waits(qp, p)) {
                    handOff(qp, p); // behind a READ reply still being sent, or what waits for it
                    ex.markPending();
                    return;
                }
                OwnerWork.process(qp, p);
                SoftQp s = p.sender;
                // keep the executor for the rest of the sender's burst (its next packets, the coalesced ACK at
                // its end): one lock operation per burst instead of per packet. The sender lets go of it at its
                // own end of burst (releaseKeptPeer), before it lets go of its own executor.
                if (s != null && s.own.keptPeer == null && s != qp && s.exec.heldByCurrentThread()) {
                    s.own.keptPeer = qp;
                    qp.own.heldForSender = true;
                    keep = true;
                }
            } finally {
                if (!keep) {
                    ex.release();
                }
            }
            return;
        }
        handOff(qp, p);
        ex.schedule();
    }

    /**
     * Whether a packet must wait in the inbox: a request while the responder still has a READ's responses to
     * send (rxe get_req: RESPST_READ_REPLY comes before the next request). Owner only.
     *
     * @param qp the QP
     * @param p the packet
     * @return whether it waits
     */
    static boolean waits(SoftQp qp, Packet p) {
        return p.is(Opcodes.M_REQ) && qp.responder.resources.replying() && !qp.responder.resources.foldsIntoReply(p);
    }

    /**
     * Receiver-driven delivery (docs/engine.md): when a thread polls one of this QP's CQs, a packet from an
     * in-process sender is left in the inbox for that poller, which runs this QP on its own thread, so each
     * thread touches its own side's cache lines; the engine agent runs it if the poller stops first.
     *
     * @return whether the packet was handed over
     */
    private static boolean handToPoller(SoftQp qp, Packet p) {
        if (qp.fabric.timers.manual()) {
            // The fallback for a poller that stops before it takes the packet (an RDMA WRITE makes no completion,
            // so an application may well stop polling) is the timer service's check, which on a manual clock runs
            // only when the clock is advanced: a test that expects no timer would wait forever for a WRITE left in
            // the inbox (SoftConcurrencyTest: 1199 of 1200 send completions). On a manual clock the sender runs it.
            return false;
        }
        SoftCq cq = p.is(Opcodes.M_REQ) ? qp.recvCq : qp.sendCq;
        SoftCq other = cq == qp.recvCq ? qp.sendCq : qp.recvCq;
        SoftCq active = cq.pollerActive(0) ? cq : other != cq && other.pollerActive(0) ? other : null;
        if (active == null) {
            return false;
        }
        boolean ok;
        try {
            ok = qp.inbox.offer(p);
        } catch (IllegalStateException | IndexOutOfBoundsException e) {
            qp.device.count(SoftCounter.DROP_HANDOFF_FULL);
            return true;
        }
        if (!ok) {
            return false; // full: the sender runs it (or queues it behind the owner) below
        }
        if (qp.exec.isHeld()) {
            // an owner runs it before it lets go. Only then: the pending flag is a volatile store, whose fence
            // would wait here for the slot's lines to reach this core, and the poller finds the packet by
            // itself (its empty poll looks at the inbox; the timer service's check covers a poller that stops)
            qp.exec.markPending();
        }
        if (!active.handedOver(qp)) {
            qp.exec.schedule(); // the ready list is full: run it now
            return true;
        }
        qp.fabric.timers.handedOver(qp);
        return true;
    }

    private static void handOff(SoftQp qp, Packet p) {
        boolean ok;
        try {
            ok = qp.inbox.offer(p);
        } catch (IllegalStateException | IndexOutOfBoundsException e) {
            qp.device.count(SoftCounter.DROP_HANDOFF_FULL); // the sender's memory went away: lost, as on a wire
            return;
        }
        if (!ok) {
            qp.device.count(SoftCounter.DROP_HANDOFF_FULL); // RC retransmits; UC/UD lose it, as a full queue would
        }
    }
}
