// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.common.Psn;

/**
 * What an RC requester keeps about the path once its {@link Completer} has seen that the responder drops every
 * request that follows a gap (kernel rxe, rxe_resp.c check_psn): a round-trip estimate, a window that bounds
 * the packets in flight, and the loss probe (docs/roce.md, "Loss recovery", "Against a responder that drops").
 * Against such a responder every packet sent past a loss until the resend arrives is thrown away, and a lost
 * NAK or a resend that lost its first packet draws no answer at all, so that only the retransmit timer
 * recovers: the window bounds what a loss throws away, the probe replaces most timer expiries by a round trip.
 * Owner only (the QP's executor); used by the completer and the requester only while the peer is known to drop,
 * except the round-trip estimate and the time the last resend began, which a wire keeps for every peer: a repeated
 * NAK within a round trip of a resend's start is no answer to it ({@link #beforeRewind}).
 */
final class LossWindow {
    /**
     * The smallest window, in packets ({@code -Drdma4j.soft.minLossWindow=N}): enough for the unimpaired path of
     * the interop rows (about 10 packets in flight against the TCG guest's rxe) with room to spare.
     */
    static final int MIN_WINDOW = Math.clamp(Integer.getInteger("rdma4j.soft.minLossWindow", 16), 2,
            SoftQp.MAX_UNACKED_PSNS);
    /** Probes sent without an answer before the requester leaves the rest to the retransmit timer. */
    static final int MAX_PROBES = 3;
    /** The shortest probe timeout: a probe is one packet, but a responder's answer takes its scheduling delay too. */
    static final long MIN_PTO_NS = 200_000;

    /** Packets the requester may have in flight past comp.psn (at most {@link SoftQp#MAX_UNACKED_PSNS}). */
    int window = SoftQp.MAX_UNACKED_PSNS;
    /** Below this the window grows by what each ACK acknowledges, above it by one packet per window. */
    private int threshold = SoftQp.MAX_UNACKED_PSNS;
    private int grown;
    /** The last comp.psn seen: what an ACK acknowledged is the distance from here. */
    private int ackedTo;
    private boolean ackedKnown;

    /** Smoothed round trip (RFC 6298's SRTT) and the latest sample, ns; 0 before the first. */
    long srttNs;
    long latestRttNs;
    /** The PSN whose ACK gives the next sample, while {@link #sampling}. */
    private int samplePsn;
    private long sampleSentNs;
    private boolean sampling;
    /** The sample in progress ends with any response ({@link #ackReqSent(int, long, boolean)}). */
    private boolean sampleAnyResponse;

    /** When the last go-back-N of a retry episode began: a NAK within a round trip of it is about earlier packets. */
    long rewoundAtNs;
    private boolean rewound;

    /** When a response last arrived, or a packet left into an empty pipe: silence is measured from here. */
    long lastActivityNs;
    /** The requester was put back at comp.psn to send that one packet, asking for an ACK, and waits for its answer. */
    boolean probing;
    /** Probes since the last response. */
    int probesUnanswered;

    void reset() {
        window = SoftQp.MAX_UNACKED_PSNS;
        threshold = SoftQp.MAX_UNACKED_PSNS;
        grown = 0;
        ackedKnown = false;
        srttNs = 0;
        latestRttNs = 0;
        sampling = false;
        rewound = false;
        probing = false;
        probesUnanswered = 0;
    }

    /** {@return how many packets may go before one asks for an ACK: half the window, so that ACKs keep it open} */
    int ackSpacing() {
        return Math.max(1, window / 2);
    }

    /** {@return whether the requester may send the packet with PSN {@code psn} with comp.psn at {@code compPsn}} */
    boolean allows(int psn, int compPsn) {
        if (probing) {
            return Psn.compare(psn, compPsn) <= 0;
        }
        return Psn.compare(psn, Psn.add(compPsn, window)) < 0;
    }

    /**
     * {@return whether this packet, which asks for an ACK, should time a round trip} None may be timed already,
     * and its answer must be an ACK (not a READ's or atomic's response). It may be a resend: under 5 % loss
     * Karn's rule (time only packets sent once) leaves hardly any to time, and a go-back-N ends the sample in
     * progress ({@link #rewound}), so the time runs from this packet's last sending and an ACK that answers an
     * earlier copy can only make the estimate shorter: a probe too early (one packet), never one too late.
     */
    boolean wantsSample(Packet p) {
        return !sampling && !p.is(Opcodes.M_READ) && !p.is(Opcodes.M_ATOMIC);
    }

    /** The packet {@code psn}, asking for an ACK, left now: its ACK gives the next round-trip sample. */
    void ackReqSent(int psn, long nowNs) {
        ackReqSent(psn, nowNs, false);
    }

    /**
     * The packet {@code psn} left now: its ACK gives the next round-trip sample, or with {@code anyResponse} the
     * next response of any kind. That is for the first sample only, timed on a packet that went into an empty
     * pipe, new: every response after it answers it or a later packet, so it comes a round trip later at the
     * earliest, even a NAK for that very packet (lost, as the first loss of a connection can be).
     */
    void ackReqSent(int psn, long nowNs, boolean anyResponse) {
        sampling = true;
        samplePsn = psn;
        sampleSentNs = nowNs;
        sampleAnyResponse = anyResponse;
    }

    /** A response arrived, before the peer is known to drop: it may end a round-trip sample. */
    void sample(int ackedBefore, long nowNs) {
        if (sampling && (sampleAnyResponse || Psn.compare(ackedBefore, samplePsn) > 0)) {
            sampling = false;
            long rtt = Math.max(1, nowNs - sampleSentNs);
            latestRttNs = rtt;
            srttNs = srttNs == 0 ? rtt : (7 * srttNs + rtt) / 8;
        }
    }

    /** {@return whether a round trip is being timed} */
    boolean sampling() {
        return sampling;
    }

    /** A response arrived that acknowledges everything before {@code ackedBefore} (comp.psn after it). */
    void response(int ackedBefore, long nowNs) {
        lastActivityNs = nowNs;
        probesUnanswered = 0;
        probing = false;
        sample(ackedBefore, nowNs);
        if (!ackedKnown) {
            ackedKnown = true;
            ackedTo = ackedBefore;
            return;
        }
        int n = Psn.compare(ackedBefore, ackedTo);
        if (n <= 0) {
            return;
        }
        ackedTo = ackedBefore;
        // Reno's growth (RFC 5681): by what is acknowledged below the threshold, by one packet per window above it
        if (window < threshold) {
            window = Math.min(threshold, window + n);
            return;
        }
        grown += n;
        while (grown >= window && window < SoftQp.MAX_UNACKED_PSNS) {
            grown -= window;
            window++;
        }
    }

    /**
     * A retry episode starts (a sequence NAK or the retransmit timer) with {@code inFlight} packets sent past
     * comp.psn: the window halves (to its least after a timeout, which then grows back to half), the round trip
     * in progress is no longer timed (Karn: its ACK may answer the resend).
     */
    void retry(boolean timeout, int inFlight, long nowNs) {
        int half = Math.max(MIN_WINDOW, Math.min(window, Math.max(inFlight, 0)) / 2);
        threshold = half;
        window = timeout ? MIN_WINDOW : half;
        grown = 0;
        resendStarted(nowNs);
        probing = false;
    }

    /**
     * A retry episode's go-back-N begins now, whatever the responder: the round trip in progress is no longer
     * timed (Karn: its ACK may answer the resend), and {@link #beforeRewind} measures from here.
     */
    void resendStarted(long nowNs) {
        rewound();
        rewound = true;
        rewoundAtNs = nowNs;
    }

    /**
     * {@return whether a sequence NAK arriving now left the responder before the last go-back-N reached it} Within
     *     a round trip of the rewind no answer to the resend can have come back (responses come in the order the
     *     responder produced them, and it sees the resend after what was sent before it). Against a responder that
     *     drops, such a NAK is about packets that go-back-N sends again anyway; against any responder, a NAK at the
     *     resend's own start that comes this early is not the answer to a resend that lost its first packet. The
     *     shorter of the smoothed and the latest round trip: a NAK is ignored too rarely rather than too long (a
     *     genuine repeat ignored waits for the retransmit timer; and a cold path's first sample, hundreds of ms
     *     between two processes at load 14, leaves srtt high for the rest of a run).
     */
    boolean beforeRewind(long nowNs) {
        long rtt = latestRttNs == 0 ? srttNs : Math.min(srttNs, latestRttNs);
        // A round trip of 1 ns (samples are at least that) is a path with no delay, the manual clock's link without
        // a latency: there any answer may come in the same instant as the resend began, and none is early.
        return rewound && rtt > 1 && nowNs - rewoundAtNs < rtt;
    }


    /**
     * The requester went back (go-back-N, a probe, a skip ahead): the packet being timed may go again, and an answer
     * to the copy would make the round trip look shorter. Not a first sample that any response ends: every response
     * still comes a round trip after that packet at the earliest (seen between two processes: the retransmit timer
     * fired before the first response on a cold path, and with the sample dropped the next repeated NAKs found no
     * estimate at all).
     */
    void rewound() {
        if (!sampleAnyResponse) {
            sampling = false;
        }
    }

    /**
     * {@return the probe timeout: twice the round trip, doubled for each probe not answered, at most half the
     *     retransmit timeout (a probe later than that would change nothing); 0 before a sample or without a timer}
     *
     * @param timeout the QP's local ACK timeout exponent
     */
    long pto(int timeout) {
        long rto = Aeth.retransmitTimeoutNs(timeout);
        if (srttNs == 0 || rto <= 0) {
            return 0;
        }
        long base = Math.max(MIN_PTO_NS, 2 * Math.max(srttNs, latestRttNs));
        return Math.min(rto / 2, base << Math.min(probesUnanswered, 4));
    }

    @Override
    public String toString() {
        return "window " + window + " (threshold " + threshold + "), srtt " + srttNs / 1000 + " us, latest "
                + latestRttNs / 1000 + " us" + (probing ? ", probing" : "");
    }
}
