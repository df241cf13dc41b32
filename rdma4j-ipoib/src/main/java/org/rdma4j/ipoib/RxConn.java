// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.cm.CmId;

/**
 * A connection a neighbour opened to us (Linux {@code struct ipoib_cm_rx}): its CM ID and RC QP, which takes
 * buffers from the SRQ.
 *
 * @param peerGid   the neighbour's GID
 * @param peerUdQpn its UD QPN, from the REQ's private data
 * @param id        the CM ID the request made, which owns the QP
 * @param qp        our RC QP, at RTS since the REP
 */
record RxConn(Gid peerGid, int peerUdQpn, CmId id, QueuePair qp) {
}
