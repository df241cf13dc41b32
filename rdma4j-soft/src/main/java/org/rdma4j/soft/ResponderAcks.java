// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

/**
 * What the {@link Responder} sends that is not READ data: ACKs, NAKs and atomic ACKs (rxe send_ack,
 * send_atomic_ack), with the QP's one ACK coalescer for the plain ACKs requests ask for ({@link #ackRequested})
 * and the one packet they are built in. Called by the QP's owner only.
 */
final class ResponderAcks {
    private static final int UNLIMITED = Aeth.ACK_UNLIMITED;

    private final Responder resp;
    private final SoftQp qp;
    private final Packet out = new Packet();
    /** The plain ACK not yet transmitted ({@link #ackRequested}): the QP's one ACK coalescer. */
    private final AckCoalescer coalescer = new AckCoalescer();

    ResponderAcks(Responder resp, SoftQp qp) {
        this.resp = resp;
        this.qp = qp;
    }

    /** Forgets the pending ACK (reset). */
    void clear() {
        coalescer.clear();
    }

    /**
     * Answers an AckReq with a plain ACK, now or deferred. A deferred ACK is held only while the packet was
     * received by a busy-polling application thread (RoCE links): sending it there would put a system call
     * between the arrival of a message and its completion reaching that thread. It is sent at the thread's
     * next verbs call, by the receive agent within a bounded time, or before any other response of this QP,
     * and a later AckReq replaces it, so one ACK covers both (IBA 9.7.5.1.1 lets a responder coalesce
     * acknowledgements: an ACK acknowledges every PSN up to its own).
     */
    void ackRequested(int ackedPsn) {
        if (resp.held.draining) {
            resp.held.drainAckPsn = ackedPsn; // answered once the drain is over
            return;
        }
        if (!qp.device.onWire()) {
            // In process the ACK leaves at once, as rxe sends each: it reaches the requester (through its inbox
            // when this thread runs it) before that sends its next packet, so a resend stops where the responder
            // holds the rest (docs/roce.md, "Loss recovery") and the requester's view of the responder is the
            // same whichever thread runs which side. It costs no system call here.
            coalescer.request(ackedPsn, resp.msn, AckCoalescer.Timing.END_OF_BURST);
            flushAck();
            return;
        }
        // On a wire the requests one burst of the owner executes (one RoCE receive batch, one inbox drain) get
        // one ACK, for the newest that asked, sent when the burst ends (endOfBurst) or before any other response
        // of this QP: each ACK costs a packet and a system call on both sides, and a stream of small messages
        // asks for one per message. rxe acknowledges each, which is also valid. A busy-polling thread that
        // received on a RoCE device defers it to its next verbs call instead.
        AckCoalescer.Timing t = qp.device.onWire() && Burst.current().deferAcks
                ? AckCoalescer.Timing.NEXT_VERBS_CALL : AckCoalescer.Timing.END_OF_BURST;
        coalescer.request(ackedPsn, resp.msn, t);
        if (t == AckCoalescer.Timing.NEXT_VERBS_CALL && !qp.ackListed) {
            qp.ackListed = true;
            qp.fabric.ackDeferred(qp);
        }
    }

    /** @return whether the coalesced ACK waits for the end of the owner's burst (not for a verbs call) */
    boolean ackDueAtEndOfBurst() {
        return coalescer.dueAtEndOfBurst();
    }

    /** Sends the pending ACK, if any. */
    void flushAck() {
        if (!coalescer.pending()) {
            return;
        }
        int ackPsnNow = coalescer.psn();
        int ackMsn = coalescer.msn();
        coalescer.clear();
        Packet o = response(Opcodes.ACKNOWLEDGE, ackPsnNow);
        o.msn = ackMsn;
        o.syndrome = UNLIMITED;
        qp.transmit(o);
    }

    Packet response(int op, int respPsn) {
        // responses leave in the order they were made: a deferred ACK first
        flushAck();
        Packet o = out.clearPayload();
        o.opcode = Opcodes.RC | op;
        o.setRoute(qp.peer, qp.sgid != null ? qp.sgid : qp.device.gid(0), qp.dgid);
        o.destQpn = qp.destQpn;
        o.srcQpn = qp.qpn;
        o.psn = respPsn;
        o.msn = resp.msn;
        o.ackReq = false;
        o.solicited = false;
        o.hopLimit = qp.av.hopLimit();
        o.payloadStable = true; // a READ response's bytes are the responder's MR, which outlives the packet
        return o;
    }

    void sendAck(int syn, int ackedPsn) {
        Packet o = response(Opcodes.ACKNOWLEDGE, ackedPsn);
        o.syndrome = syn;
        qp.transmit(o);
    }

    void sendAtomicAck(long orig, int ackedPsn) {
        Packet o = response(Opcodes.ATOMIC_ACKNOWLEDGE, ackedPsn);
        o.syndrome = UNLIMITED;
        o.origValue = orig;
        qp.transmit(o);
    }
}
