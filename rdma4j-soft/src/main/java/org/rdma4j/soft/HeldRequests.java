// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.common.Psn;
import org.rdma4j.verbs.QpState;

/**
 * The RC responder's requests that arrived ahead of ePSN, held until the gap before them fills, and the NAK
 * threshold that decides when that gap is NAKed (docs/roce.md, "Loss recovery"): an rdma4j extension of rxe's
 * RESPST_ERR_PSN_OUT_OF_SEQ, which NAKs the first request of a gap and drops every one. The {@link Responder}
 * enters {@link RespState#ERR_PSN_OUT_OF_SEQ} for each request ahead of ePSN and calls {@link #outOfSequence};
 * the request that fills a gap ({@link #inSequence}) and then the held ones after it run through the responder's
 * states in turn ({@link #filled}), each entering at {@link RespState#GET_REQ} as rxe's next packet would. Called
 * by the QP's owner only.
 */
final class HeldRequests {
    private final Responder resp;
    private final SoftQp qp;
    /**
     * How many PSNs past ePSN out-of-sequence requests are held for (a power of two): more than a whole
     * requester window (rxe's 128 PSNs) ahead, so nothing a conforming requester sends is beyond it.
     */
    static final int HOLD = Math.min(256, Bytes.ceilPow2(SoftQp.MAX_UNACKED_PSNS + 1));
    /** Out-of-sequence requests held until the gap before them fills, by PSN modulo HOLD; allocated on first use. */
    private Packet[] held;
    private int heldCount;
    /** A gap is filling: the request at ePSN and the held ones after it execute, and one ACK answers them. */
    boolean draining;
    /** The PSN of the previous request that arrived out of sequence. */
    private int lastOutOfSeq;
    /**
     * Since the last NAK, a request arrived out of sequence at or below the one before it: the requester
     * went back (a resend), and the next AckReq request of it gets the NAK again, once.
     */
    private boolean rewindSeen;
    /**
     * Whether requests past a gap are held ({@link #outOfSequence}); false answers as rxe does, for
     * comparisons ({@code -Drdma4j.soft.holdOutOfSequence=false}) and for tests of a requester facing rxe.
     */
    static final boolean HOLD_DEFAULT = !"false".equals(System.getProperty("rdma4j.soft.holdOutOfSequence"));
    boolean holdsOutOfSequence = HOLD_DEFAULT;
    /** Requests that arrived past the gap before its NAK was sent (after a drain: since the last NAK). */
    private int gapArrivals;
    /**
     * How many requests past a gap make the responder NAK it at first (one that asks for an ACK does at once);
     * {@link #nakThreshold} grows from here with the reordering the path shows.
     */
    static final int NAK_THRESHOLD = 3;
    /**
     * The most {@link #nakThreshold} grows to: a requester asks for an ACK at least every 32 packets (ours;
     * rxe every 64), and such a request past a gap is NAKed at once, so a larger one would change nothing.
     */
    static final int NAK_THRESHOLD_MAX = 32;
    /**
     * Requests past a gap that make the responder NAK it: {@link #NAK_THRESHOLD}, raised by each NAK that
     * turned out spurious to one more than the requests that had arrived past its gap when it filled (a path
     * that reorders, like tc-netem's {@code delay D reorder P}, overtakes more than three).
     */
    int nakThreshold = NAK_THRESHOLD;
    /** Out-of-sequence arrivals, a running count: tells which held requests arrived after the last gap NAK. */
    private int oosArrivals;
    /** {@link #oosArrivals} when the last gap NAK was sent. */
    private int nakAtArrival;
    /** Per slot of {@link #held}: {@link #oosArrivals} when that request arrived. */
    private int[] heldAt;
    /** Out-of-sequence arrivals past the current gap since it opened: how far it was overtaken when it fills. */
    private int gapPast;
    /** PSN of the last gap NAK, while {@link #nakedState} is not NONE. */
    private int nakedPsn;
    /** The requests that had overtaken the last NAKed gap when it filled. */
    private int nakedPast;
    /** What became of the last NAKed gap: NAKED (open), FILLED (then a second copy shows the NAK was spurious). */
    private int nakedState;
    private static final int NAKED_NONE = 0;
    private static final int NAKED_OPEN = 1;
    private static final int NAKED_FILLED = 2;
    /** The PSN the drain's ACK names ({@link ResponderAcks#ackRequested} while {@link #draining}), or -1. */
    int drainAckPsn;
    /** ePSN when the gap began to fill. */
    private int fillFrom;
    /** rxe resp.sent_psn_nak: the gap at ePSN was NAKed. */
    private boolean sentPsnNak;

    HeldRequests(Responder resp, SoftQp qp) {
        this.resp = resp;
        this.qp = qp;
    }

    /**
     * An RC request ahead of the expected PSN (ePSN). rxe check_psn (class B, IBA 9.7.5.1.2): NAK the
     * first one of a gap with ePSN (resp.sent_psn_nak, cleared when ePSN arrives; counted
     * out_of_seq_request) and drop it and every later one. We differ in two ways (docs/roce.md, "Loss
     * recovery"): a later out-of-sequence request of a resend that asks for an acknowledgement (AckReq)
     * gets the same NAK again, since if the resend lost its first packet too nothing else would tell the
     * requester before its retransmit timer (rxe's completer ignores the repeat: same PSN, a retry under
     * way); and the request is held, not dropped, so that when the gap fills it executes in order without
     * being sent again ({@link #drainHeld}).
     */
    void outOfSequence(Packet p) {
        if (!holdsOutOfSequence) {
            // rxe check_psn exactly: NAK the first one of a gap, drop it and all that follow.
            if (!sentPsnNak) {
                sentPsnNak = true;
                qp.count(SoftCounter.OUT_OF_SEQ_REQUEST);
                resp.acks.sendAck(Aeth.NAK_PSN_SEQ_ERROR, resp.psn);
            }
            qp.count(SoftCounter.DROP_OUT_OF_SEQ);
            return;
        }
        oosArrivals++;
        gapPast++;
        hold(p);
        if (!sentPsnNak) {
            // The NAK waits until nakThreshold requests have arrived past the gap, or one that asks for an
            // answer: a request that is only late (reordered) then usually fills the gap first, and nothing
            // is sent again (TCP's duplicate-ACK threshold, RFC 5681, for the same reason; and, as Linux TCP
            // raises its reordering metric on a D-SACK, the threshold grows with each NAK that proves
            // spurious: spuriousNak). rxe NAKs the first one.
            lastOutOfSeq = p.psn;
            if (++gapArrivals < nakThreshold && !p.ackReq) {
                return;
            }
            gapNak();
            return;
        }
        // Repeated only for a packet of a resend, and once for each: the packets the requester sent before
        // it heard the first NAK come in rising order and say nothing new; a PSN at or below the previous
        // one shows the requester went back, and a resend's packet that asks for an ACK while ePSN is still
        // missing means the resend lost its first packet too. The requester counts every repeat as a retry
        // without progress (Completer.sequenceNak), so a resend whose later AckReq packets each drew one
        // would use up retry_cnt in one go: seen between two processes at 5 % loss, where a resend that
        // went on past its budget drew a repeat for every AckReq of the pass and failed RETRY_EXC_ERR.
        if (Psn.compare(p.psn, lastOutOfSeq) <= 0) {
            rewindSeen = true;
        }
        lastOutOfSeq = p.psn;
        if (p.ackReq && rewindSeen) {
            rewindSeen = false;
            qp.count(SoftCounter.SEQ_NAK_REPEATS);
            resp.acks.sendAck(Aeth.NAK_PSN_SEQ_ERROR, resp.psn);
        }
    }

    /** NAKs the gap at ePSN (resp.sent_psn_nak in rxe), and remembers it to learn whether it was spurious. */
    private void gapNak() {
        sentPsnNak = true;
        rewindSeen = false; // lastOutOfSeq stays: a resend from the gap comes in below it
        nakAtArrival = oosArrivals;
        nakedPsn = resp.psn;
        nakedState = NAKED_OPEN;
        qp.count(SoftCounter.OUT_OF_SEQ_REQUEST);
        resp.acks.sendAck(Aeth.NAK_PSN_SEQ_ERROR, resp.psn);
    }

    /**
     * The request a gap NAK named arrived (filling the gap), and now again: the requester's resend, so the
     * first copy was only late, overtaken by {@link #nakedPast} requests. From now on a gap is NAKed after one
     * more than that (at most {@link #NAK_THRESHOLD_MAX}): the reordering this path does costs no resend. A
     * loss then costs a few more arrivals before its NAK, and none at all where a request asks for an ACK.
     */
    private void spuriousNak() {
        nakedState = NAKED_NONE;
        qp.count(SoftCounter.SPURIOUS_SEQ_NAKS);
        nakThreshold = Math.clamp(nakedPast + 1L, nakThreshold, NAK_THRESHOLD_MAX);
    }

    /** Keeps a copy of an out-of-sequence request within {@link #HOLD} PSNs of ePSN, else drops it. */
    private void hold(Packet p) {
        int d = Psn.compare(p.psn, resp.psn);
        if (d >= HOLD) {
            qp.count(SoftCounter.DROP_OUT_OF_SEQ);
            return;
        }
        if (held == null) {
            held = new Packet[HOLD];
            heldAt = new int[HOLD];
        }
        int slot = p.psn & (HOLD - 1);
        Packet h = held[slot];
        if (h != null && h.psn == p.psn) {
            qp.count(SoftCounter.DROP_OUT_OF_SEQ); // held already (a duplicate or a resend)
            return;
        }
        Packet c;
        try {
            c = p.deepCopy();
        } catch (IllegalStateException | IndexOutOfBoundsException e) {
            qp.count(SoftCounter.DROP_OUT_OF_SEQ); // the sender's memory went away (in process)
            return;
        }
        if (h == null) {
            heldCount++;
        }
        held[slot] = c; // a stale one (behind ePSN by now) is replaced
        heldAt[slot] = oosArrivals;
        qp.count(SoftCounter.HELD_OUT_OF_SEQ);
    }

    /**
     * The request with ePSN arrived and executed: the held requests that now follow in sequence execute
     * in turn. If some are still held beyond a new gap, that gap is NAKed at once (its packet was lost
     * or is late), as a first out-of-sequence arrival would be.
     */
    private void drainHeld() {
        // One ACK for the whole drain if any of its requests asked for one, and for the newest request
        // executed (IBA 9.7.5.1.1: an ACK covers every PSN up to its own): the requester learns at once how
        // far it may skip ahead.
        draining = true;
        try {
            drainInOrder();
        } finally {
            draining = false;
        }
        if (qp.state == QpState.ERR) {
            drop();
            return;
        }
        int since = 0;
        for (int i = 0; i < HOLD && heldCount > 0; i++) {
            Packet h = held[i];
            if (h == null) {
                continue;
            }
            if (Psn.compare(h.psn, resp.psn) <= 0) {
                held[i] = null; // behind ePSN: stale
                heldCount--;
                continue;
            }
            if (heldAt[i] - nakAtArrival > 0) {
                since++;
            }
        }
        // What is still held arrived past the new gap, if there is one; only what arrived since the last NAK
        // counts toward its NAK. Requests that overtook the old gap and were counted for its NAK (a reordering
        // path: tc-netem's reorder sends one in twenty at once, ahead of a whole delay of traffic) say nothing
        // about the new one, which is usually the very next to arrive: counted again, every request of the
        // rest of the message drew a NAK of its own, each a resend of what was on its way.
        gapArrivals = since;
        gapPast = heldCount;
        if (heldCount > 0 && !sentPsnNak && since >= nakThreshold) {
            // Enough requests arrived beyond a new gap: its NAK alone answers (it acknowledges every PSN before
            // it, as the drain's ACK would), so the requester resends from the gap instead of going on from an
            // ACK and hearing of the gap only after. (Fewer: the next request usually fills it; if it was lost,
            // the requests that follow draw its NAK, or the first of them that asks for an ACK.)
            gapNak();
        } else if (drainAckPsn >= 0) {
            // the newest SEND/WRITE drained, never a READ or atomic: see Responder.ackPsn
            resp.acks.ackRequested(Psn.add(resp.ackPsn, -1));
        }
    }

    private void drainInOrder() {
        while (heldCount > 0 && qp.state != QpState.ERR) {
            int slot = resp.psn & (HOLD - 1);
            Packet h = held[slot];
            if (h == null || h.psn != resp.psn) {
                break;
            }
            held[slot] = null;
            heldCount--;
            int before = resp.psn;
            resp.run(h, true);
            if (resp.psn == before) {
                break; // not executed (an RNR NAK, an error): the requester sends it again
            }
        }
    }

    /** Forgets every held request (reset, error, a new ePSN). */
    void drop() {
        if (held != null && heldCount > 0) {
            java.util.Arrays.fill(held, null);
        }
        heldCount = 0;
    }

    void reset() {
        drop();
        sentPsnNak = false;
        gapArrivals = 0;
        gapPast = 0;
        nakThreshold = NAK_THRESHOLD;
        nakedState = NAKED_NONE;
    }

    /**
     * An RC request with ePSN passed check_psn (rxe clears resp.sent_psn_nak here). If requests are held behind
     * it, the gap fills: {@link #draining} until {@link #filled}, so that one ACK answers them all.
     */
    void inSequence(Packet p) {
        if (nakedState != NAKED_NONE) {
            if (nakedState == NAKED_OPEN && p.psn == nakedPsn) {
                nakedState = NAKED_FILLED;
                nakedPast = gapPast;
            } else if (nakedState == NAKED_FILLED && Psn.compare(p.psn, nakedPsn) > 2 * SoftQp.MAX_UNACKED_PSNS) {
                // A resend from the NAKed PSN would have come by now: the requester's window kept it within
                // one window of it. What arrives from here on says nothing about that NAK.
                nakedState = NAKED_NONE;
            }
        }
        sentPsnNak = false;
        gapArrivals = 0;
        gapPast = 0;
        if (heldCount != 0) {
            draining = true;
            drainAckPsn = -1;
            fillFrom = resp.psn;
        }
    }

    /** An RC request behind ePSN: a second copy of the request a gap NAK named shows that NAK was spurious. */
    void duplicate(Packet p) {
        if (nakedState == NAKED_FILLED && p.psn == nakedPsn) {
            spuriousNak();
        }
    }

    /**
     * The request that filled a gap ran through the responder's states (with {@link #draining} set since
     * {@link #inSequence}): if it executed, the held requests that follow it execute in turn ({@link #drainHeld});
     * if not (an RNR NAK, an error), the ACK it asked for leaves now.
     */
    void filled() {
        draining = false;
        if (resp.psn != fillFrom) {
            drainHeld();
        } else if (drainAckPsn >= 0) {
            resp.acks.ackRequested(drainAckPsn);
        }
    }
}
