// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import java.util.Locale;

/**
 * What the user-space CM counts: MADs sent and received, every MAD dropped by the reason it was dropped
 * (nothing is dropped uncounted), and the IB CM's duplicates and stale-connection handling, in the
 * spirit of Linux's {@code cm_rx_duplicates}/{@code cm_tx_retries} sysfs counters.
 */
public enum CmCounter {
    /** MADs posted on QP1, retransmissions included. */
    MADS_SENT,
    /** MADs received on QP1 (before validation). */
    MADS_RECEIVED,
    /** Identical retransmissions of a REQ, REP, DREQ or SIDR_REQ (same bytes, same TID). */
    MAD_RETRANSMISSIONS,
    /** Sends that ran out of retries (the CM reports the error: UNREACHABLE, DISCONNECTED -110). */
    MAD_TIMEOUTS,
    /** A send that could not be posted (QP1 gone, queue full): the MAD layer counts it and retries no more. */
    MAD_SEND_ERRORS,

    /** Dropped: the receive completed with an error status (QP1 being destroyed). */
    DROP_RECV_ERROR,
    /** Dropped: fewer than 256 bytes of MAD (plus the 40-byte GRH area) arrived. */
    DROP_TRUNCATED,
    /** Dropped: BaseVersion is not 1 ({@code validate_mad}). */
    DROP_BAD_BASE_VERSION,
    /** Dropped: no agent for the class and class version ({@code find_mad_agent}: e.g. a CM MAD of version 1). */
    DROP_NO_AGENT,
    /** Dropped: a method the class's agent did not register (CM takes only Send, {@code validate_mad}). */
    DROP_BAD_METHOD,
    /** Dropped: a response whose TID matches no outstanding request. */
    DROP_UNMATCHED_RESPONSE,
    /** Dropped: no GRH area could be parsed (neither an IPv6 header nor rxe's IPv4 layout). */
    DROP_BAD_GRH,

    /** CM: an attribute the CM does not handle (LAP, APR: not on RoCE, or unknown IDs). */
    CM_DROP_UNKNOWN_ATTRIBUTE,
    /** CM: a message for no local communication (unknown or mismatched comm IDs). */
    CM_DROP_UNMATCHED,
    /** CM: a message the ID's state does not take (e.g. a REP to an ID not waiting for one). */
    CM_DROP_BAD_STATE,
    /** CM: a DREQ whose RemoteQPN is not the connection's QP ({@code cm_dreq_handler} ignores it). */
    CM_DROP_DREQ_QPN_MISMATCH,
    /** CM: a field out of range (transport type, MTU, ...): rejected or dropped. */
    CM_DROP_MALFORMED,
    /** CM: a duplicate REQ (answered with MRA or REJ 10, or ignored). */
    CM_DUPLICATE_REQ,
    /** CM: a duplicate REP (answered with RTU or MRA). */
    CM_DUPLICATE_REP,
    /** CM: a duplicate or late RTU. */
    CM_DUPLICATE_RTU,
    /** CM: a duplicate DREQ (answered with DREP in TIMEWAIT, ignored in DREQ_RCVD). */
    CM_DUPLICATE_DREQ,
    /** CM: a duplicate MRA. */
    CM_DUPLICATE_MRA,
    /** CM: a duplicate SIDR_REQ. */
    CM_DUPLICATE_SIDR_REQ,
    /** CM: a REQ or REP from a CA GUID and QPN that still has a connection: REJ 10 and a DREQ on the old one. */
    CM_STALE_CONNECTIONS,
    /** CM: REJs sent. */
    CM_REJECTS_SENT,
    /** CM: connection requests left unanswered because the listener's backlog was full. */
    CM_BACKLOG_DROPS;

    /** {@return the name in lower case, as counters are printed ({@code mads_sent})} */
    public String counterName() {
        return name().toLowerCase(Locale.ROOT);
    }
}
