// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import java.util.PriorityQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

import org.rdma4j.common.ManualClock;
import org.rdma4j.common.NanoClock;

/**
 * The CM's timers (MAD retransmissions, TIMEWAIT, address and route timeouts) on an injectable clock.
 * Every task runs with the CM's lock held. With a {@link ManualClock} due tasks run inside
 * {@link ManualClock#advance}; otherwise a daemon agent ({@code rdma4j-cm-timer}) sleeps until the earliest
 * deadline. Tasks of one deadline run in the order they were scheduled.
 */
final class CmTimers implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger("org.rdma4j.cm");
    private static final long MAX_PARK_NS = TimeUnit.MILLISECONDS.toNanos(200);

    /** A scheduled task; {@link #cancel()} makes it a no-op. */
    static final class Timer implements Comparable<Timer> {
        final long deadline;
        final long seq;
        final Runnable task;
        boolean cancelled;

        Timer(long deadline, long seq, Runnable task) {
            this.deadline = deadline;
            this.seq = seq;
            this.task = task;
        }

        /** Cancels the task (CM lock held). Idempotent. */
        void cancel() {
            cancelled = true;
        }

        @Override
        public int compareTo(Timer o) {
            int c = Long.compare(deadline, o.deadline);
            return c != 0 ? c : Long.compare(seq, o.seq);
        }
    }

    private final NanoClock clock;
    private final ReentrantLock lock;
    private final PriorityQueue<Timer> queue = new PriorityQueue<>();
    private final ManualClock.Listener listener = this::runDueLocked;
    private long seq;
    private volatile boolean running = true;
    private volatile Thread agent;
    private volatile long plannedWake = Long.MAX_VALUE;

    CmTimers(NanoClock clock, ReentrantLock lock) {
        this.clock = clock;
        this.lock = lock;
        if (clock instanceof ManualClock mc) {
            mc.addListener(listener);
        }
    }

    long now() {
        return clock.nanoTime();
    }

    /**
     * Schedules a task (CM lock held).
     *
     * @param delayNs from now
     * @param task    runs with the CM lock held
     * @return the timer, for cancelling
     */
    Timer schedule(long delayNs, Runnable task) {
        Timer t = new Timer(clock.nanoTime() + Math.max(0, delayNs), seq++, task);
        queue.add(t);
        if (!(clock instanceof ManualClock)) {
            Thread a = agent;
            if (a == null) {
                startAgent();
            } else if (t.deadline - plannedWake < 0) {
                LockSupport.unpark(a);
            }
        }
        return t;
    }

    /** {@return how many timers are armed (cancelled ones may still be counted until they come due)} */
    int pending() {
        return queue.size();
    }

    private synchronized void startAgent() {
        if (agent != null || !running) {
            return;
        }
        Thread t = Thread.ofPlatform().daemon().name("rdma4j-cm-timer").unstarted(this::agentLoop);
        agent = t;
        t.start();
    }

    private void agentLoop() {
        while (running) {
            long wait;
            lock.lock();
            try {
                long now = clock.nanoTime();
                long next = runDue(now);
                long wake = next == Long.MAX_VALUE ? now + MAX_PARK_NS : Math.min(next, now + MAX_PARK_NS);
                plannedWake = wake;
                wait = wake - now;
            } catch (RuntimeException | Error e) {
                LOG.log(System.Logger.Level.ERROR, "CM timer task failed; the timer agent goes on", e);
                wait = 1_000_000;
            } finally {
                lock.unlock();
            }
            if (wait > 0) {
                LockSupport.parkNanos(this, wait);
            }
        }
    }

    private void runDueLocked(long nowNs) {
        lock.lock();
        try {
            runDue(nowNs);
        } finally {
            lock.unlock();
        }
    }

    /** Runs due tasks; returns the next deadline. CM lock held. */
    private long runDue(long nowNs) {
        while (true) {
            Timer t = queue.peek();
            if (t == null) {
                return Long.MAX_VALUE;
            }
            if (t.cancelled) {
                queue.poll();
                continue;
            }
            if (t.deadline - nowNs > 0) {
                return t.deadline;
            }
            queue.poll();
            t.cancelled = true;
            try {
                t.task.run();
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.ERROR, "CM timer task failed", e);
            }
        }
    }

    @Override
    public void close() {
        running = false;
        if (clock instanceof ManualClock mc) {
            mc.removeListener(listener);
        }
        Thread a = agent;
        if (a != null) {
            LockSupport.unpark(a);
        }
    }
}
