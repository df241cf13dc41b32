// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.rdma4j.common.ManualClock;

/**
 * Retransmit and RNR timers of the fabric's RC QPs. QPs with an armed timer are watched; deadlines
 * are plain fields on the QP, so arming and disarming on the data path costs a field write. With a
 * {@link ManualClock} due timers run inside {@code advance}; otherwise a daemon agent thread checks
 * them about every millisecond while any QP is watched and parks otherwise.
 */
final class TimerService {
    private static final long MAX_PARK_NS = TimeUnit.MILLISECONDS.toNanos(100);

    private final SoftFabric fabric;
    private final Set<SoftQp> watched = new LinkedHashSet<>(); // engine lock
    private final boolean manual;
    private volatile Thread agent;
    private volatile long plannedWakeNs;
    private volatile boolean running = true;
    private final ManualClock.Listener listener = this::onManualAdvance;

    TimerService(SoftFabric fabric) {
        this.fabric = fabric;
        this.manual = fabric.clock instanceof ManualClock;
        if (fabric.clock instanceof ManualClock mc) {
            mc.addListener(listener);
        }
    }

    /** Engine lock held. */
    void watch(SoftQp qp) {
        if (!qp.watched) {
            qp.watched = true;
            watched.add(qp);
        }
        if (!manual) {
            Thread a = agent;
            if (a == null) {
                startAgent();
            } else if (qp.nextDeadline() - plannedWakeNs < 0) {
                LockSupport.unpark(a);
            }
        }
    }

    /** Engine lock held. */
    void unwatch(SoftQp qp) {
        if (qp.watched) {
            qp.watched = false;
            watched.remove(qp);
        }
    }

    private synchronized void startAgent() {
        if (agent != null || !running) {
            return;
        }
        Thread t = Thread.ofPlatform().daemon().name("rdma4j-soft-timer").unstarted(this::agentLoop);
        agent = t;
        t.start();
    }

    private void onManualAdvance(long nowNs) {
        fabric.lockEngine();
        try {
            runDue(nowNs);
        } finally {
            fabric.unlockEngine();
        }
    }

    private void agentLoop() {
        while (running) {
            long now = System.nanoTime();
            try {
                long next;
                fabric.lockEngine();
                try {
                    now = fabric.clock.nanoTime();
                    next = runDue(now);
                    plannedWakeNs = next == Long.MAX_VALUE ? now + MAX_PARK_NS : Math.min(next, now + MAX_PARK_NS);
                } finally {
                    fabric.unlockEngine();
                }
            } catch (Throwable t) {
                // outside any QP's timers (those are caught in runDue): the clock, the burst's flush
                EngineErrors.agentFailed(null, fabric, "the rdma4j-soft-timer agent", t);
                plannedWakeNs = now + AFTER_FAILURE_NS;
            }
            long wait = plannedWakeNs - now;
            if (wait > 0) {
                LockSupport.parkNanos(this, wait);
            }
        }
    }

    /** How long the agent waits after a failure outside any QP's timers before it tries again. */
    private static final long AFTER_FAILURE_NS = TimeUnit.MILLISECONDS.toNanos(1);

    /** Runs due timers; returns the earliest deadline still armed. Engine lock held. */
    private long runDue(long nowNs) {
        long next = Long.MAX_VALUE;
        if (watched.isEmpty()) {
            return next;
        }
        for (SoftQp qp : new ArrayList<>(watched)) {
            try {
                qp.onTimers(nowNs);
            } catch (Throwable t) {
                EngineErrors.qpWorkFailed(qp, "timers", t); // the QP to ERR: its timers are disarmed
            }
            if (!qp.hasArmedTimer()) {
                unwatch(qp);
            } else if (qp.nextDeadline() - next < 0) {
                next = qp.nextDeadline();
            }
        }
        return next;
    }

    void close() {
        running = false;
        Thread a = agent;
        if (a != null) {
            LockSupport.unpark(a);
        }
        if (fabric.clock instanceof ManualClock mc) {
            mc.removeListener(listener);
        }
    }
}
