// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.cm.CmId;

/**
 * A connection we opened to a neighbour (Linux {@code struct ipoib_cm_tx}): a CM ID and its RC QP, which receives
 * from the SRQ as Linux's tx QPs do; only unicast IPv4 goes on it. Interface lock for every field.
 */
final class TxConn {
    enum State {
        /** The CM is resolving and connecting; packets to the neighbour still go as datagrams (or wait, when too big). */
        CONNECTING,
        /** ESTABLISHED: the REP came, our QP is at RTS and the CM sent the RTU. */
        CONNECTED,
        /** No CM ID: torn down after an error, refused, or unanswered; retried at {@link #deadlineNs}. */
        FAILED
    }

    final int ip;
    final HardwareAddress peer;
    /** Changes with every QP, so completions of a torn-down QP are told from the new one's. */
    int serial;
    /** The CM ID, which owns the QP; null when FAILED. */
    CmId id;
    /** The RC QP, once ROUTE_RESOLVED made it. */
    QueuePair qp;
    State state = State.FAILED;
    /** CONNECTING: when to give up; FAILED: when to try again. */
    long deadlineNs;
    /** The largest IPoIB message (header included) the peer receives on it. */
    int remoteMtu;
    /** FAILED for long (no answer, refused): big packets get ICMP "fragmentation needed"; else they wait. */
    boolean fallback;

    TxConn(int ip, HardwareAddress peer) {
        this.ip = ip;
        this.peer = peer;
    }
}
