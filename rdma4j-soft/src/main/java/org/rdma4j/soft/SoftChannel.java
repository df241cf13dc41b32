// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;

/**
 * A completion channel: a queue of CQ events. A thread waiting in {@link #getCqEvent} is woken with an
 * error when the channel is closed, or when the last CQ on it is closed (no event can come any more).
 * Thread-safe.
 */
final class SoftChannel extends SoftResource implements CompletionChannel {
    final SoftContext ctx;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    private final ArrayDeque<SoftCq> events = new ArrayDeque<>(); // lock
    /** Bumped when the last CQ on the channel closes: waiters from before see it and give up (lock). */
    private int lastCqClosed;

    SoftChannel(SoftContext ctx) {
        this.ctx = ctx;
    }

    @Override
    String describe() {
        return "completion channel";
    }

    void push(SoftCq cq) {
        lock.lock();
        try {
            events.add(cq);
            changed.signal();
        } finally {
            lock.unlock();
        }
    }

    /**
     * A CQ of this channel was closed: its pending events go (ibv_destroy_cq drops them too), and if it was
     * the last CQ, waiting threads are woken with an error, since nothing can raise an event any more.
     */
    void cqClosed(SoftCq cq) {
        lock.lock();
        try {
            events.removeIf(e -> e == cq);
            if (users.decrementAndGet() == 0) {
                lastCqClosed++;
                changed.signalAll();
            }
        } finally {
            lock.unlock();
        }
    }

    @Override
    public CompletionQueue getCqEvent(Duration timeout) {
        checkNotClosed();
        if (!timeout.isZero()) {
            // before the channel lock: this takes the engine lock, under which completions are pushed here
            ctx.device.waiterBlocking();
        }
        lock.lock();
        try {
            int generation = lastCqClosed;
            long nanos = timeout.toNanos();
            while (events.isEmpty()) {
                if (closed) {
                    throw new VerbsException(Errno.EINVAL, "the completion channel was closed while this thread"
                            + " waited in getCqEvent");
                }
                if (generation != lastCqClosed) {
                    throw new VerbsException(Errno.EINVAL, "the last CQ of this completion channel was closed while"
                            + " this thread waited in getCqEvent: no event can come");
                }
                if (nanos <= 0) {
                    return null;
                }
                nanos = changed.awaitNanos(nanos);
            }
            SoftCq cq = events.poll();
            cq.unackedEvents.incrementAndGet();
            return cq;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        checkIdle("ibv_destroy_comp_channel");
        lock.lock();
        try {
            closed = true;
            changed.signalAll();
        } finally {
            lock.unlock();
        }
        ctx.children.remove(this);
    }
}
