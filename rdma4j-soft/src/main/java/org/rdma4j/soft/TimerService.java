// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.concurrent.TimeUnit;

import org.rdma4j.common.ManualClock;
import org.rdma4j.common.agent.Agent;
import org.rdma4j.common.agent.AgentRunner;
import org.rdma4j.common.agent.IdleStrategies;

/**
 * Retransmit and RNR timers of the fabric's RC QPs (docs/engine.md, "Agents"). A QP that arms a timer is
 * watched: it pushes itself, once, onto a lock-free stack this service takes from; deadlines are fields of
 * the QP, so arming and disarming on the data path costs a field write. A due QP is marked and scheduled on
 * its executor ({@link QpExecutor#schedule}): its own duty cycle runs the timer, on whichever thread owns it.
 *
 * <p>On the system clock the work is the {@code rdma4j-soft-engine} agent (an {@link AgentRunner}: a failure
 * is reported by {@link EngineErrors} and the agent carries on), started on the first watch; it parks until
 * the next deadline (idle strategy {@code -Drdma4j.soft.engineIdle}, default {@value #IDLE}) and is woken
 * when a QP arms an earlier one. With a {@link ManualClock} there is no thread: due timers run inside
 * {@code advance}, on the advancing thread, which takes each due QP's executor so that the timer has run
 * when {@code advance} returns. Thread-safe.
 */
final class TimerService implements Agent {
    /** The agent's idle strategy unless {@code rdma4j.soft.engineIdle} names another. */
    static final String IDLE = "park:100ms:100ms";
    private static final long MAX_IDLE_NS = TimeUnit.MILLISECONDS.toNanos(100);
    private static final VarHandle PUSHED;
    private static final VarHandle WATCHED;
    private static final VarHandle HANDED;
    private static final VarHandle HANDED_WATCHED;
    /** How often handed-over packets a poller has not taken are looked at (docs/engine.md, "Active poller"). */
    static final long HANDED_CHECK_NS = TimeUnit.MILLISECONDS.toNanos(1);

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            PUSHED = l.findVarHandle(TimerService.class, "pushed", SoftQp.class);
            MethodHandles.Lookup q = MethodHandles.privateLookupIn(SoftQp.class, l);
            WATCHED = q.findVarHandle(SoftQp.class, "watched", boolean.class);
            HANDED = l.findVarHandle(TimerService.class, "handedPushed", SoftQp.class);
            HANDED_WATCHED = q.findVarHandle(SoftQp.class, "handedWatched", boolean.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final SoftFabric fabric;
    private final boolean manual;
    /** QPs that started to be watched, newest first, linked through {@link SoftQp#timerNext}. */
    @SuppressWarnings("unused") // through PUSHED
    private volatile SoftQp pushed;
    /** The watched QPs: confined to the agent's thread, or to the advancing thread (under this monitor). */
    private final ArrayList<SoftQp> watched = new ArrayList<>();
    /** QPs whose packets were left to a poller, newest first, linked through {@link SoftQp#handedNext}. */
    @SuppressWarnings("unused") // through HANDED
    private volatile SoftQp handedPushed;
    /** QPs with packets left to pollers: confined as {@link #watched}. */
    private final ArrayList<SoftQp> handed = new ArrayList<>();
    private long nextHandedCheckNs;
    private volatile AgentRunner runner;
    private volatile long plannedWakeNs = Long.MAX_VALUE;
    private volatile boolean running = true;
    private final ManualClock.Listener listener = this::onManualAdvance;

    TimerService(SoftFabric fabric) {
        this.fabric = fabric;
        this.manual = fabric.clock instanceof ManualClock;
        if (fabric.clock instanceof ManualClock mc) {
            mc.addListener(listener);
        }
    }

    /**
     * A QP armed a timer (its deadline field is set): watch it. Called by the QP's owner.
     *
     * @param qp the QP
     */
    void watch(SoftQp qp) {
        if (!qp.watched && WATCHED.compareAndSet(qp, false, true)) {
            SoftQp head;
            do {
                head = (SoftQp) PUSHED.getVolatile(this);
                qp.timerNext = head;
            } while (!PUSHED.compareAndSet(this, head, qp));
        }
        if (!manual) {
            AgentRunner r = runner;
            if (r == null) {
                startAgent();
            } else if (QpTimers.nextDeadline(qp) - plannedWakeNs < 0) {
                r.wake();
            }
        }
    }

    /**
     * {@return whether the fabric runs on a manual clock} Its timers then move only when a test advances the
     * clock, so nothing may wait for them that does not wait for time: see {@link SoftQp}'s hand-over to pollers.
     */
    boolean manual() {
        return manual;
    }

    /**
     * A sender left packets in {@code qp}'s inbox for a poller of its CQs: should that poller stop before it
     * takes them, this service runs the QP within about {@link #HANDED_CHECK_NS} (an agent cycle, or the next
     * advance of a manual clock). Called by the sender (any thread).
     *
     * @param qp the QP
     */
    void handedOver(SoftQp qp) {
        if (qp.handedWatched || !HANDED_WATCHED.compareAndSet(qp, false, true)) {
            return;
        }
        qp.handedSeen = -1;
        SoftQp head;
        do {
            head = (SoftQp) HANDED.getVolatile(this);
            qp.handedNext = head;
        } while (!HANDED.compareAndSet(this, head, qp));
        if (!manual) {
            AgentRunner r = runner;
            if (r == null) {
                startAgent();
            } else if (plannedWakeNs - (fabric.clock.nanoTime() + HANDED_CHECK_NS) > 0) {
                r.wake(); // it sleeps past the next check: make it plan again
            }
        }
    }

    /**
     * Runs the handed-over QPs whose inbox a poller has not touched since the last check (all of them when
     * {@code all}), and forgets those with an empty inbox.
     *
     * @return how many were run
     */
    private int checkHanded(boolean all) {
        SoftQp q = (SoftQp) HANDED.getAndSet(this, null);
        while (q != null) {
            SoftQp n = q.handedNext;
            q.handedNext = null;
            handed.add(q);
            q = n;
        }
        int ran = 0;
        for (int i = 0; i < handed.size(); ) {
            SoftQp qp = handed.get(i);
            if (qp.closed || qp.inbox.isEmpty()) {
                // Dekker with handedOver(): the sender claims an inbox slot (a CAS) then reads the flag, this
                // clears the flag then, behind a fence, reads how many slots were claimed, so a packet left
                // meanwhile is seen by one side or the other. Not the published slots: the sender's publish is a
                // release store, which its later read of the flag may overtake, and both sides then missed
                // (SoftHandedCheckRaceTest); a claimed slot not yet published is looked at again next check
                qp.handedWatched = false;
                VarHandle.fullFence();
                if (!qp.closed && qp.inbox.claimedAny() && HANDED_WATCHED.compareAndSet(qp, false, true)) {
                    i++;
                    continue;
                }
                handed.set(i, handed.get(handed.size() - 1));
                handed.remove(handed.size() - 1);
                continue;
            }
            long seen = qp.inbox.consumed();
            if (all || seen == qp.handedSeen) {
                ran++;
                qp.exec.schedule(); // nobody took them for a whole check: run the QP here (or by its owner)
            }
            qp.handedSeen = seen;
            i++;
        }
        return ran;
    }

    private synchronized void startAgent() {
        if (runner != null || !running) {
            return;
        }
        runner = AgentRunner.start(this, IdleStrategies.fromProperty("rdma4j.soft.engineIdle", IDLE),
                (agent, t) -> EngineErrors.agentFailed(null, fabric, "the " + agent.roleName() + " agent", t));
    }

    @Override
    public String roleName() {
        return "soft-engine";
    }

    /**
     * How often the agent publishes the devices' counters to their {@code CounterFile}s (real time): a QP
     * counts into its own array, so the files other processes read lag by up to this much.
     */
    static final long PUBLISH_NS = TimeUnit.MILLISECONDS.toNanos(100);
    private long nextPublishNs;

    /**
     * A QP was created on a fabric with the system clock: the agent runs (if it does not yet), so that the
     * counters other processes read move with the traffic. A manual clock's fabric publishes nothing.
     */
    void publishing() {
        if (!manual && runner == null) {
            startAgent();
        }
    }

    @Override
    public int doWork() {
        long real = System.nanoTime();
        if (real - nextPublishNs >= 0) {
            nextPublishNs = real + PUBLISH_NS;
            fabric.publishCounters();
        }
        long now = fabric.clock.nanoTime();
        int work = scan(now, false);
        if (now - nextHandedCheckNs >= 0 || handedPushed != null && handed.isEmpty()) {
            work += checkHanded(false);
            nextHandedCheckNs = now + HANDED_CHECK_NS;
        }
        if (!handed.isEmpty() && nextHandedCheckNs - plannedWakeNs < 0) {
            plannedWakeNs = nextHandedCheckNs;
        }
        return work;
    }

    @Override
    public long idleBudgetNs() {
        long wake = plannedWakeNs;
        if (wake == Long.MAX_VALUE) {
            return MAX_IDLE_NS;
        }
        return Math.max(1, Math.min(MAX_IDLE_NS, wake - fabric.clock.nanoTime()));
    }

    /**
     * Takes the newly watched QPs, marks and schedules (agent) or runs (manual clock) the due ones, forgets
     * those with no timer armed, and plans the next wake-up.
     *
     * @return how many QPs were due
     */
    private int scan(long now, boolean runHere) {
        SoftQp q = (SoftQp) PUSHED.getAndSet(this, null);
        while (q != null) {
            SoftQp n = q.timerNext;
            q.timerNext = null;
            watched.add(q);
            q = n;
        }
        int due = 0;
        long next = Long.MAX_VALUE;
        for (int i = 0; i < watched.size(); ) {
            SoftQp qp = watched.get(i);
            long d = QpTimers.nextDeadline(qp);
            if (qp.closed || d == Long.MAX_VALUE) {
                // Dekker with watch(): the QP stores its deadline then reads watched, this clears watched then
                // reads the deadline, so a timer armed meanwhile is seen by one side or the other
                qp.watched = false;
                if (!qp.closed && QpTimers.nextDeadline(qp) != Long.MAX_VALUE && WATCHED.compareAndSet(qp, false, true)) {
                    i++;
                    continue;
                }
                watched.set(i, watched.get(watched.size() - 1));
                watched.remove(watched.size() - 1);
                continue;
            }
            if (now - d >= 0) {
                if (runHere) {
                    due++;
                    QpTimers.runTimersNow(qp, now);
                } else if (!qp.timerDue) {
                    // marked once; the QP's owner runs the timer and re-arms (watch() wakes this agent if the new
                    // deadline is earlier than its plan), so a due QP is not counted as work again meanwhile
                    due++;
                    qp.timerDue = true;
                    qp.exec.schedule();
                }
            } else if (d - next < 0) {
                next = d;
            }
            i++;
        }
        plannedWakeNs = next;
        return due;
    }

    private void onManualAdvance(long nowNs) {
        synchronized (watched) {
            // due timers run here, each QP's under its executor, before advance returns; a timer that re-arms
            // for a time already past runs again in this advance only if the next advance asks
            scan(nowNs, true);
            // and whatever senders left to pollers that have not taken it
            checkHanded(true);
        }
    }

    void close() {
        running = false;
        AgentRunner r;
        synchronized (this) {
            r = runner;
        }
        if (r != null) {
            r.close();
        }
        if (fabric.clock instanceof ManualClock mc) {
            mc.removeListener(listener);
        }
    }
}
