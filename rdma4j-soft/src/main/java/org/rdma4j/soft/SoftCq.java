// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.util.concurrent.atomic.AtomicInteger;

import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.AsyncEventType;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcOpcode;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;

/**
 * A completion queue: a ring of preallocated completions. Producers (the engine) and consumers
 * (pollers) each take their own short lock; an empty poll takes none. Thread-safe.
 */
final class SoftCq extends SoftResource implements CompletionQueue {
    private static final int ARM_NONE = 0;
    private static final int ARM_ANY = 1;
    private static final int ARM_SOLICITED = 2;

    final SoftContext ctx;
    private final SoftChannel channel;
    private final Object producerLock = new Object();
    private final Object consumerLock = new Object();
    private WorkCompletion[] ring; // power-of-two length, at least capacity
    private volatile int capacity;
    private final PaddedIndexes idx = new PaddedIndexes(); // producer = next to fill, consumer = next to poll
    private volatile int armed;
    final AtomicInteger unackedEvents = new AtomicInteger();

    SoftCq(SoftContext ctx, int cqe, SoftChannel channel) {
        this.ctx = ctx;
        this.channel = channel;
        this.ring = newRing(cqe);
        this.capacity = cqe;
    }

    private static WorkCompletion[] newRing(int cqe) {
        int n = Bytes.ceilPow2(cqe);
        WorkCompletion[] r = new WorkCompletion[n];
        for (int i = 0; i < n; i++) {
            r[i] = new WorkCompletion();
        }
        return r;
    }

    @Override
    String describe() {
        return "CQ(" + capacity + ")";
    }

    @Override
    public int capacity() {
        return capacity;
    }

    @Override
    public CompletionChannel channel() {
        return channel;
    }

    /**
     * Adds a completion. On a full queue the completion is lost and CQ_ERR is raised (rxe_cq_post
     * returns -EBUSY and reports IB_EVENT_CQ_ERR).
     *
     * @return false on overflow
     */
    boolean post(long wrId, WcStatus status, WcOpcode opcode, int byteLen, int imm, int qpNum, int srcQp,
                 int wcFlags, boolean solicited) {
        synchronized (producerLock) {
            long t = idx.producer();
            WorkCompletion[] r = ring;
            if (t - idx.consumer() >= capacity) {
                ctx.device.count(SoftCounter.CQ_OVERFLOW);
                ctx.raise(new AsyncEvent(AsyncEventType.CQ_ERR, null, this, null, 0));
                return false;
            }
            r[(int) t & (r.length - 1)].set(wrId, status, opcode, 0, byteLen, imm, qpNum, srcQp, wcFlags, 0);
            idx.producer(t + 1);
        }
        int a = armed;
        if (a != ARM_NONE && channel != null
                && (a == ARM_ANY || solicited || status != WcStatus.SUCCESS)) {
            synchronized (producerLock) {
                if (armed == ARM_NONE) {
                    return true;
                }
                armed = ARM_NONE;
            }
            channel.push(this);
        }
        return true;
    }

    /**
     * A closed CQ refuses polls, as it refuses {@link #reqNotify}: verbs would touch a destroyed CQ (use
     * after free in ibv_poll_cq), and an empty answer would hide the mistake.
     */
    private void checkPollable() {
        if (closed) {
            throw new VerbsException(Errno.EINVAL, describe() + " is closed: it cannot be polled (closing a CQ"
                    + " drops the completions still in it; poll them before closing)");
        }
    }

    @Override
    public int poll(WorkCompletion[] wcs, int max) {
        checkPollable();
        if (idx.producer() == idx.consumer() && (!ctx.device.pollIdle() || idx.producer() == idx.consumer())) {
            return 0;
        }
        synchronized (consumerLock) {
            long h = idx.consumer();
            long t = idx.producer();
            WorkCompletion[] r = ring;
            int n = (int) Math.min(Math.min(t - h, max), wcs.length);
            for (int i = 0; i < n; i++) {
                wcs[i].copyFrom(r[(int) (h + i) & (r.length - 1)]);
            }
            idx.consumer(h + n);
            return n;
        }
    }

    @Override
    public boolean poll(WorkCompletion wc) {
        checkPollable();
        if (idx.producer() == idx.consumer() && (!ctx.device.pollIdle() || idx.producer() == idx.consumer())) {
            return false;
        }
        synchronized (consumerLock) {
            long h = idx.consumer();
            if (idx.producer() == h) {
                return false;
            }
            WorkCompletion[] r = ring;
            wc.copyFrom(r[(int) h & (r.length - 1)]);
            idx.consumer(h + 1);
            return true;
        }
    }

    /** {@return the number of completions queued} */
    int count() {
        return (int) (idx.producer() - idx.consumer());
    }

    @Override
    public void reqNotify(boolean solicitedOnly) {
        checkNotClosed();
        if (channel == null) {
            throw new VerbsException(Errno.EINVAL, "CQ has no completion channel");
        }
        synchronized (producerLock) {
            armed = solicitedOnly ? ARM_SOLICITED : ARM_ANY;
        }
    }

    @Override
    public void ackEvents(int count) {
        unackedEvents.addAndGet(-count);
    }

    @Override
    public void resize(int cqe) {
        checkNotClosed();
        if (cqe < 1 || cqe > SoftDevice.MAX_CQE) {
            throw new VerbsException(Errno.EINVAL, "cqe=" + cqe + " (expected 1.." + SoftDevice.MAX_CQE + ")");
        }
        synchronized (consumerLock) {
            synchronized (producerLock) {
                long h = idx.consumer();
                long t = idx.producer();
                if (t - h > cqe) {
                    throw new VerbsException(Errno.EINVAL, "cqe=" + cqe + " is smaller than the " + (t - h)
                            + " completions queued");
                }
                WorkCompletion[] old = ring;
                WorkCompletion[] r = newRing(cqe);
                for (long i = h; i < t; i++) {
                    r[(int) (i - h)].copyFrom(old[(int) i & (old.length - 1)]);
                }
                ring = r;
                capacity = cqe;
                idx.consumer(0);
                idx.producer(t - h);
            }
        }
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        checkIdle("ibv_destroy_cq");
        closed = true;
        if (channel != null) {
            channel.cqClosed(this);
        }
        ctx.children.remove(this);
    }
}
