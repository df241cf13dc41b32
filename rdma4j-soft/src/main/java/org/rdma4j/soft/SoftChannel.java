// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

import org.rdma4j.common.agent.IdleStrategies;
import org.rdma4j.common.agent.IdleStrategy;

import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;

/**
 * A completion channel: a queue of CQ events. A thread waiting in {@link #getCqEvent} idles with the channel's
 * idle strategy ({@code -Drdma4j.soft.channelIdle}, default {@value #IDLE}; see {@code IdleStrategies}): it spins
 * and yields first, receiving on its own thread if the device is a RoCE one (as a CQ poller does), then parks;
 * {@link #push} unparks it at once, so no fixed hand-off interval stands between a completion and its waiter
 * (docs/engine.md, "Completion channels"). Before it parks, the device's receive agents stop deferring to it. A
 * waiter is woken with an error when the channel is closed, or when the last CQ on it is closed (no event can come
 * any more). Thread-safe.
 */
final class SoftChannel extends SoftResource implements CompletionChannel {
    /** The waiters' idle strategy unless {@code rdma4j.soft.channelIdle} names another. */
    static final String IDLE = "backoff:200:20:50us:1ms";
    private static final String IDLE_SPEC = System.getProperty("rdma4j.soft.channelIdle", IDLE);

    final SoftContext ctx;
    private final ReentrantLock lock = new ReentrantLock();
    private final ArrayDeque<SoftCq> events = new ArrayDeque<>(); // lock
    /** Events queued (a hint read without the lock). */
    private volatile int queued;
    /** Threads in getCqEvent, woken by every push (copied on change, under lock). */
    private volatile Thread[] waiters = new Thread[0];
    /** Bumped when the last CQ on the channel closes: waiters from before see it and give up (lock). */
    private volatile int lastCqClosed;
    /** Each waiting thread's idle strategy; its parks first hand the device's receiving to the agents. */
    private final ThreadLocal<Waiter> waiter = ThreadLocal.withInitial(Waiter::new);

    /** One thread's idle state on this channel. */
    private final class Waiter {
        boolean handedOver;
        final IdleStrategy idle = IdleStrategies.parse(IDLE_SPEC, ns -> {
            if (!handedOver) {
                handedOver = true;
                ctx.device.waiterBlocking(); // this thread receives no more: the agents take over now
            }
            LockSupport.parkNanos(SoftChannel.this, ns);
        });
    }

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
            queued = events.size();
        } finally {
            lock.unlock();
        }
        wakeWaiters();
    }

    private void wakeWaiters() {
        Thread[] w = waiters;
        for (int i = 0; i < w.length; i++) {
            LockSupport.unpark(w[i]);
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
            queued = events.size();
            if (users.decrementAndGet() == 0) {
                lastCqClosed++;
            }
        } finally {
            lock.unlock();
        }
        wakeWaiters();
    }

    private SoftCq take() {
        if (queued == 0) {
            return null;
        }
        lock.lock();
        try {
            SoftCq cq = events.poll();
            queued = events.size();
            if (cq != null) {
                cq.unackedEvents.incrementAndGet();
            }
            return cq;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public CompletionQueue getCqEvent(Duration timeout) {
        checkNotClosed();
        SoftCq cq = take();
        if (cq != null || timeout.isZero()) {
            return cq;
        }
        int generation = lastCqClosed;
        long nanos = timeout.toNanos();
        long deadline = System.nanoTime() + nanos;
        Thread self = Thread.currentThread();
        addWaiter(self);
        Waiter w = waiter.get();
        w.handedOver = false;
        w.idle.reset();
        boolean roce = ctx.device.roceLink() != null;
        // This thread polls no CQ while it waits: senders must run their packets' QPs themselves (so that the
        // completion that raises the event is made at all), not leave them to it. Those they left before they saw
        // it go are run in the loop below (in process the engine agent's check would take them only after ~1 ms:
        // the event-driven round trip cost 2 ms, docs/benchmarks.md).
        Burst polls = Burst.current();
        polls.stopPolling();
        try {
            for (;;) {
                if (closed) {
                    throw new VerbsException(Errno.EINVAL, "the completion channel was closed while this thread"
                            + " waited in getCqEvent");
                }
                if (generation != lastCqClosed) {
                    throw new VerbsException(Errno.EINVAL, "the last CQ of this completion channel was closed while"
                            + " this thread waited in getCqEvent: no event can come");
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return null;
                }
                if (roce && !w.handedOver) {
                    // the completion may be in the socket: receive it on this thread while it spins. Not once it
                    // has handed receiving to the agents (its first park): a poll would make it the device's poller
                    // again, and the receive agent would then park for the poller window instead of waiting in
                    // poll(2), leaving the next datagram to a thread asleep for up to a millisecond (cm's trace of
                    // the CM agent: in 158 of 220 event-driven round trips the sleeping waiter took both datagrams
                    // on its park wake-ups, one way p50 68-92 us)
                    ctx.device.pollIdle();
                }
                polls.runHandedOver();
                cq = take();
                if (cq != null) {
                    return cq;
                }
                if (self.isInterrupted()) {
                    return null;
                }
                w.idle.idleAtMost(left);
                cq = take();
                if (cq != null) {
                    return cq;
                }
            }
        } finally {
            polls.forgetPolled();
            removeWaiter(self);
            if (roce && !w.handedOver) {
                ctx.device.waiterBlocking(); // the thread leaves the receive path: the agents take over
            }
        }
    }

    private void addWaiter(Thread t) {
        lock.lock();
        try {
            Thread[] w = waiters;
            Thread[] n = java.util.Arrays.copyOf(w, w.length + 1);
            n[w.length] = t;
            waiters = n;
        } finally {
            lock.unlock();
        }
    }

    private void removeWaiter(Thread t) {
        lock.lock();
        try {
            Thread[] w = waiters;
            for (int i = 0; i < w.length; i++) {
                if (w[i] == t) {
                    Thread[] n = new Thread[w.length - 1];
                    System.arraycopy(w, 0, n, 0, i);
                    System.arraycopy(w, i + 1, n, i, w.length - i - 1);
                    waiters = n;
                    return;
                }
            }
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
        closed = true;
        wakeWaiters();
        ctx.children.remove(this);
    }
}
