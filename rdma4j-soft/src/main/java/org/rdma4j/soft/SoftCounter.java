// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

/** Device counters, named after rxe's hw counters (rxe_hw_counters.c) plus the drops we count. */
public enum SoftCounter {
    /** Packets transmitted. */
    SENT_PKTS,
    /** Packets received. */
    RCVD_PKTS,
    /** Duplicate requests seen by a responder. */
    DUPLICATE_REQUEST,
    /**
     * Gaps in the PSN sequence a responder saw: requests with a PSN ahead of the expected one that it
     * answered with a sequence NAK, once per gap (rxe counts out_of_seq_request the same way).
     */
    OUT_OF_SEQ_REQUEST,
    /**
     * Sequence NAKs a responder sent again, for an out-of-sequence request that asked for an
     * acknowledgement while the gap was still open (rxe sends none; docs/roce.md, "Loss recovery").
     */
    SEQ_NAK_REPEATS,
    /**
     * Sequence NAKs a responder found spurious: the request it NAKed arrived after all, and then again (the
     * requester's resend). Each raises the responder's NAK threshold to the reordering it saw (docs/roce.md,
     * "Loss recovery").
     */
    SPURIOUS_SEQ_NAKS,
    /**
     * Out-of-sequence requests a responder held until the gap before them filled, executed then in
     * order (rxe drops them; docs/roce.md, "Loss recovery").
     */
    HELD_OUT_OF_SEQ,
    /** Out-of-sequence requests a responder dropped: already held, or too far ahead. */
    DROP_OUT_OF_SEQ,
    /** RNR NAKs received. */
    RCV_RNR_ERR,
    /** RNR NAKs sent. */
    SND_RNR,
    /** PSN sequence-error NAKs received. */
    RCV_SEQ_ERR,
    /** Retry sequences started by the completer (rxe completer_retry_err): the next two added up. */
    COMPLETER_RETRY_ERR,
    /** Retry sequences the retransmit timer started. */
    RETRY_TIMEOUTS,
    /** Retry sequences a sequence NAK, or a response that implies a lost one, started at once. */
    RETRY_NAKS,
    /** WQEs completed with RETRY_EXC_ERR. */
    RETRY_EXCEEDED_ERR,
    /** WQEs completed with RNR_RETRY_EXC_ERR. */
    RNR_RETRY_EXCEEDED_ERR,
    /** Packets dropped: no QP with that number. */
    DROP_NO_QP,
    /** Packets dropped: QP state or type does not accept it. */
    DROP_BAD_STATE,
    /** UD packets dropped for a Q_Key mismatch (IBA C10-15, rxe check_keys). */
    DROP_QKEY_VIOLATION,
    /** UC/UD messages dropped for lack of a receive WQE or by a class D/E error. */
    DROP_MESSAGE,
    /** Packets dropped: no device with the destination GID, or port down. */
    DROP_NO_ROUTE,
    /**
     * Multicast packets dropped: no QP of this device is attached to the group, or the packet has no
     * multicast destination GID (rxe_rcv_mcast_pkt "mcast group not registered", hdr_check).
     */
    DROP_NO_MCAST_GROUP,
    /**
     * Packets discarded for a bad ICRC (rxe_icrc_check). In-process packets carry no ICRC: there it
     * counts the corruption the fault-injecting link injects.
     */
    ICRC_ERROR,
    /** Packets to a connected QP from an address other than its peer's (rxe check_addr). */
    DROP_BAD_ADDRESS,
    /** Malformed or unexpected packets dropped. */
    DROP_MALFORMED,
    /** Completions lost to a full CQ. */
    CQ_OVERFLOW,
    /** RoCE datagrams the socket refused to send (the packet is lost; RC retransmits it). */
    ROCE_TX_ERRORS,
    /** RoCE receive errors: socket errors, or a packet the engine could not process. */
    ROCE_RX_ERRORS,
    /** UDP GSO sends: one system call that left as several RoCE packets (docs/roce-udp.md). */
    ROCE_GSO_SENDS,
    /** UDP GSO sends the kernel refused (EINVAL/EIO); the socket then sends one datagram per packet. */
    ROCE_GSO_REFUSED,
    /** Receives that held several datagrams coalesced by UDP GRO. */
    ROCE_GRO_RECEIVES,
    /**
     * Exceptions and errors thrown by the engine's own work and caught per unit of work (a packet, a QP's
     * timers, a post): each is logged and moves the QP concerned to ERR ({@code EngineErrors}).
     */
    ENGINE_ERRORS,
    /**
     * Packets lost because the receiving QP's hand-off ring was full (its owner was busy and more than the
     * ring's 512 packets waited) or its sender's memory could not be read to keep it: a full queue on a wire.
     */
    DROP_HANDOFF_FULL,
    /** Failures of a background agent's duty cycle outside any QP's work (the agent carries on). */
    AGENT_ERRORS,
    /**
     * Bursts a QP ended at the pacing bound (64 packets, rxe's RXE_INFLIGHT_SKBS_PER_QP_HIGH) with more of the
     * operation to send, resumed in a later duty cycle (docs/engine.md, "Pacing").
     */
    PACED_BURSTS,
    /** Re-reads of READ responses already sent that widened the QP's gap between bursts (docs/engine.md, "Pacing"). */
    PACE_SLOWDOWNS,
    /**
     * Paused READ replies resumed before their gap ran out: a re-read of responses not sent yet (the requester's
     * timer ran out while the reply waited for its gap), which also halved the gap, or half the inbox filled with
     * requests waiting behind the reply (docs/engine.md, "Pacing").
     */
    PACE_SPEEDUPS,
    /**
     * RoCE sends the kernel refused for want of buffer space (ENOBUFS, or EAGAIN from a full send buffer),
     * kept and sent again after a back-off; a refusal that outlasts the back-off loses the packets ({@link
     * #ROCE_TX_ERRORS}).
     */
    ROCE_TX_REFUSED,
    /**
     * Loss probes (docs/roce.md, "Loss recovery"): against a responder that drops what follows a gap, a silence of
     * two round trips with packets outstanding sent the packet at comp.psn again, asking for an ACK; not retries.
     */
    LOSS_PROBES,
    /**
     * Sequence NAKs that arrived within a round trip of a go-back-N against a responder that drops what follows a
     * gap: about packets sent before it, which it sends again anyway, so they started no resend.
     */
    SEQ_NAKS_COVERED,
    /**
     * Sequence NAKs at the PSN the current resend started at (the repeat for a resend that lost its first packet)
     * that arrived within a round trip of that resend's start, any responder: not an answer to the resend's own
     * packets (a duplicated NAK, or one the responder sent for an earlier copy), so they started no resend and
     * counted no retry (docs/roce.md, "Loss recovery").
     */
    SEQ_NAKS_EARLY;

    /** {@return whether the counter counts dropped packets (each count is a JFR event and a log line)} */
    public boolean isDrop() {
        return DROP[ordinal()];
    }

    /** Every DROP_* counter, and the ICRC errors (a dropped packet too), by ordinal. */
    private static final boolean[] DROP = new boolean[values().length];

    static {
        for (SoftCounter c : values()) {
            DROP[c.ordinal()] = c.name().startsWith("DROP_") || c == ICRC_ERROR;
        }
    }

    /**
     * {@return whether such a drop points at a broken or hostile peer rather than at normal operation, so
     *     it is worth a (rate-limited) warning}
     */
    public boolean suspicious() {
        return switch (this) {
            case ICRC_ERROR, DROP_MALFORMED, DROP_BAD_ADDRESS, DROP_QKEY_VIOLATION -> true;
            default -> false;
        };
    }

    /**
     * {@return the name {@code Context.queryPortCounters} gives it: rxe's hw counter name where rxe counts the
     * same thing (rxe_hw_counters.c), else the lower-case constant name}
     *
     */
    public String rxeName() {
        return switch (this) {
            case RCV_RNR_ERR -> "rcvd_rnr_err";
            case SND_RNR -> "send_rnr_err";
            case RCV_SEQ_ERR -> "rcvd_seq_err";
            case RNR_RETRY_EXCEEDED_ERR -> "retry_rnr_exceeded_err";
            default -> name().toLowerCase(java.util.Locale.ROOT);
        };
    }
}
