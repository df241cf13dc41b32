// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.QueuePair;

/**
 * A connection a neighbour opened to us (Linux {@code struct ipoib_cm_rx}): its RC QP takes buffers from the SRQ.
 *
 * @param peerGid   the neighbour's GID
 * @param peerUdQpn its UD QPN (from the REQ's private data, checked against the datagram's source QP)
 * @param remoteId  its communication ID
 * @param localId   ours
 * @param psn       our starting PSN
 * @param remoteQpn its RC QPN
 * @param qp        our RC QP, at RTS since the REP
 * @param ah        the address handle our REP went out with
 */
record RxConn(Gid peerGid, int peerUdQpn, int remoteId, int localId, int psn, int remoteQpn, QueuePair qp,
              AddressHandle ah) {
}
