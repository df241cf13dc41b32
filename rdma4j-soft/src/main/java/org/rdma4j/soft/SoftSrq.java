// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.AsyncEventType;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SharedReceiveQueue;
import org.rdma4j.verbs.VerbsException;

/** A shared receive queue with the one-shot limit event. Thread-safe. */
final class SoftSrq extends SoftResource implements SharedReceiveQueue {
    final SoftPd pd;
    final RecvQueue rq;
    private volatile int limit;

    SoftSrq(SoftPd pd, int maxWr, int maxSge) {
        this.pd = pd;
        this.rq = new RecvQueue(maxWr, maxSge);
    }

    @Override
    String describe() {
        return "SRQ(" + rq.capacity + ")";
    }

    @Override
    public ProtectionDomain pd() {
        return pd;
    }

    @Override
    public int maxWr() {
        return rq.capacity;
    }

    @Override
    public int maxSge() {
        return rq.maxSge;
    }

    @Override
    public int limit() {
        return limit;
    }

    @Override
    public void armLimit(int limit) {
        checkNotClosed();
        if (limit < 0 || limit > rq.capacity) {
            throw new VerbsException(Errno.EINVAL, "srq_limit=" + limit + " (expected 0.." + rq.capacity + ")");
        }
        this.limit = limit;
    }

    /**
     * Called after the engine consumed a WQE: fires SRQ_LIMIT_REACHED once when the count drops below
     * the armed limit, then disarms (rxe get_srq_wqe; ibv_modify_srq.3).
     */
    void afterConsume() {
        int l = limit;
        if (l > 0 && rq.count() < l) {
            limit = 0;
            pd.ctx.raise(new AsyncEvent(AsyncEventType.SRQ_LIMIT_REACHED, null, null, this, 0));
        }
    }

    @Override
    public boolean postRecv(RecvWorkRequest wr) {
        if (closed) {
            wr.postError(Errno.EINVAL, describe() + " is closed");
            return false;
        }
        return rq.post(wr, this);
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        checkIdle("ibv_destroy_srq");
        closed = true;
        pd.children.remove(this);
    }
}
