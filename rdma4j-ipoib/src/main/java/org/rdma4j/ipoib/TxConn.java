// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.QueuePair;

/**
 * A connection we opened to a neighbour (Linux {@code struct ipoib_cm_tx}): one RC QP, receiving from the SRQ as
 * Linux's tx QPs do; only unicast IPv4 goes on it. Interface lock for every field.
 */
final class TxConn {
    enum State {
        /** The REQ is out; packets to the neighbour still go as datagrams (or wait, when too big). */
        CONNECTING,
        /** The REP came and our QP is at RTS. */
        CONNECTED,
        /** No QP: torn down after an error, refused, or unanswered; retried at {@link #deadlineNs}. */
        FAILED
    }

    final int ip;
    final HardwareAddress peer;
    /** Changes with every QP, so completions of a torn-down QP are told from the new one's. */
    int serial;
    AddressHandle ah;
    QueuePair qp;
    int localId;
    int psn;
    State state = State.FAILED;
    /** REQs sent for the current QP. */
    int tries;
    /** When to resend the REQ (CONNECTING) or to try again (FAILED). */
    long deadlineNs;
    /** The largest IPoIB message (header included) the peer receives on it. */
    int remoteMtu;
    int remoteQpn;
    int remoteId;
    /** FAILED for long (no answer, refused): big packets get ICMP "fragmentation needed"; else they wait. */
    boolean fallback;

    TxConn(int ip, HardwareAddress peer) {
        this.ip = ip;
        this.peer = peer;
    }
}
