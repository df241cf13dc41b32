// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/**
 * An asynchronous event (ibv_async_event): the type and the element it concerns.
 *
 * @param type    what happened
 * @param qp      the QP concerned, or null
 * @param cq      the CQ concerned, or null
 * @param srq     the SRQ concerned, or null
 * @param portNum the port concerned, or 0
 */
public record AsyncEvent(AsyncEventType type, QueuePair qp, CompletionQueue cq, SharedReceiveQueue srq, int portNum) {
    @Override
    public String toString() {
        String what = qp != null ? "qp 0x" + Integer.toHexString(qp.qpNum())
                : cq != null ? "cq" : srq != null ? "srq" : "port " + portNum;
        return "async_event{" + type + ", " + what + '}';
    }
}
