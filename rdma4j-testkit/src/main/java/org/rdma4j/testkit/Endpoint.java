// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit;

import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.SharedReceiveQueue;

/**
 * One side of a player pair (rdma-core tests' {@code BaseResources}): a QP with its PD, CQs and the
 * optional SRQ and completion channels, all owned by the test's tracker.
 *
 * @param ctx         the context it lives in
 * @param pd          the QP's PD
 * @param sendCq      send CQ
 * @param recvCq      receive CQ
 * @param sendChannel the send CQ's channel, or null
 * @param recvChannel the receive CQ's channel, or null
 * @param srq         the SRQ, or null
 * @param qp          the queue pair
 * @param config      the parameters it was built with
 */
public record Endpoint(Context ctx, ProtectionDomain pd, CompletionQueue sendCq, CompletionQueue recvCq,
                       CompletionChannel sendChannel, CompletionChannel recvChannel, SharedReceiveQueue srq,
                       QueuePair qp, QpConfig config) {
    /** {@return the GID (port 1, index 0) peers address this endpoint with} */
    public Gid gid() {
        return ctx.queryGid(1, 0);
    }

    /** {@return the QP number} */
    public int qpNum() {
        return qp.qpNum();
    }
}
