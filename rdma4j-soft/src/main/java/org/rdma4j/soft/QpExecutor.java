// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.locks.LockSupport;

/**
 * The serialisation of one queue pair's protocol work (docs/engine.md, "Who runs a QP"): the requester,
 * responder, completer, send queue and timers of the QP are touched only by the thread that owns its
 * executor. A non-reentrant lock with a <em>pending</em> flag:
 * <ul>
 * <li>{@link #schedule} makes work that another thread published (a packet in the QP's {@link Inbox}, a
 * timer marked due) run: on the calling thread if the executor is free, else by the owner before it lets go;</li>
 * <li>{@link #release} runs the QP's duty cycle while work is pending, then lets go, and takes the executor
 * again if work was scheduled meanwhile, so none is left behind;</li>
 * <li>{@link #acquire} waits, and is for threads that own no executor (verbs calls, the RoCE receive path, a
 * test's clock); a thread that owns one only ever {@link #tryAcquire}s another, so no two QPs can deadlock.</li>
 * </ul>
 * Thread-safe.
 */
final class QpExecutor {
    private static final VarHandle OWNER;
    private static final VarHandle PENDING;
    /** How many times a waiting {@link #acquire} retries before it starts to park. */
    private static final int SPINS = 2_000;
    private static final long MAX_PARK_NS = 50_000;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            OWNER = l.findVarHandle(QpExecutor.class, "owner", Thread.class);
            PENDING = l.findVarHandle(QpExecutor.class, "pending", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** What the owner runs: the duty cycle while work is pending, the end of its burst before it lets go. */
    interface Work {
        /** Runs the QP's pending work (inbox, due timers, requester); called by the owner. */
        void dutyCycle();

        /**
         * Ends the owner's burst of work on the QP (the ACK coalescer's END_OF_BURST); called by the owner
         * before every release. May make more work pending (an ACK to this same QP), which runs before the
         * release.
         */
        void endOfBurst();
    }

    private final Work work;
    @SuppressWarnings("unused") // through OWNER
    private volatile Thread owner;
    @SuppressWarnings("unused") // through PENDING
    private volatile int pending;

    QpExecutor(Work work) {
        this.work = work;
    }

    /** @return whether the calling thread owns the executor */
    boolean heldByCurrentThread() {
        return (Thread) OWNER.getAcquire(this) == Thread.currentThread();
    }

    /** @return whether some thread owns it (a hint) */
    boolean isHeld() {
        return (Thread) OWNER.getAcquire(this) != null;
    }

    /**
     * Takes the executor if nobody owns it.
     *
     * @return whether the calling thread owns it now (false if another thread does, or this one already does)
     */
    boolean tryAcquire() {
        // a volatile read (free on x86): ordered after a scheduler's volatile store of PENDING (see release)
        return (Thread) OWNER.getVolatile(this) == null && OWNER.compareAndSet(this, null, Thread.currentThread());
    }

    /**
     * Takes the executor, waiting for its owner to let go: spinning first (an owner holds it for a burst of
     * protocol work, well under a microsecond per packet), then parking for growing intervals. Only for a
     * thread that owns no executor.
     */
    void acquire() {
        if (tryAcquire()) {
            return;
        }
        if (heldByCurrentThread()) {
            throw new IllegalStateException("QP executor re-entered by its owner " + Thread.currentThread());
        }
        long park = 1_000;
        long since = 0;
        boolean reported = false;
        for (int i = 0; ; i++) {
            if (tryAcquire()) {
                return;
            }
            if (i < SPINS) {
                continue;
            }
            if (i < SPINS + 100) {
                Thread.yield();
                continue;
            }
            LockSupport.parkNanos(this, park);
            park = Math.min(park << 1, MAX_PARK_NS);
            if (!reported) {
                long now = System.nanoTime();
                if (since == 0) {
                    since = now;
                } else if (now - since > STUCK_NS) {
                    reported = true;
                    reportStuck();
                }
            }
        }
    }

    /** A wait this long for an executor is a bug (a burst never ends): it is reported once per wait. */
    private static final long STUCK_NS = 10_000_000_000L;

    private void reportStuck() {
        Thread o = (Thread) OWNER.getOpaque(this);
        IllegalStateException where = new IllegalStateException("owner " + (o == null ? "none" : o.getName() + " ("
                + o.getState() + ")") + " has held it for over " + STUCK_NS / 1_000_000_000 + " s");
        if (o != null) {
            where.setStackTrace(o.getStackTrace());
        }
        System.getLogger("org.rdma4j.soft").log(System.Logger.Level.ERROR, "waiting for " + work
                + "'s executor; the owner's stack follows", where);
    }

    /**
     * Runs the duty cycle while work is pending, then lets go; takes the executor again (and runs again) if
     * work was scheduled while it was letting go. The owner's only way to let go.
     */
    void release() {
        try {
            releaseLoop();
        } catch (Throwable t) {
            // the duty cycle catches the failures of its units of work (EngineErrors); whatever escapes must not
            // leave the QP owned by nobody's thread for ever, nor a peer it kept for its burst
            try {
                work.endOfBurst();
            } catch (Throwable again) {
                t.addSuppressed(again);
            }
            OWNER.setVolatile(this, null);
            throw t;
        }
    }

    private void releaseLoop() {
        for (;;) {
            // clear with an atomic exchange: it reads the newest store of any scheduler, so the work that
            // scheduler published is visible to the cycle (a plain clear could overwrite a newer store unseen)
            while ((int) PENDING.getVolatile(this) != 0) {
                PENDING.getAndSet(this, 0);
                work.dutyCycle();
            }
            work.endOfBurst();
            if ((int) PENDING.getVolatile(this) != 0) {
                continue;
            }
            // Dekker with schedule(): it stores PENDING then reads OWNER, this stores OWNER then reads PENDING,
            // all volatile, so at least one of the two sees the other's store: a scheduler that found the
            // executor owned left PENDING set for this read, and the work it published is run here
            OWNER.setVolatile(this, null);
            if ((int) PENDING.getVolatile(this) == 0 || !tryAcquire()) {
                return;
            }
        }
    }

    /**
     * Work for the QP was published (a packet in its inbox, a timer marked due): runs it on this thread if
     * the executor is free, else leaves it to the owner (possibly this thread, further up its stack).
     */
    void schedule() {
        PENDING.setVolatile(this, 1);
        if (tryAcquire()) {
            release();
        }
    }

    /**
     * Runs the duty cycle once on this thread if nobody owns the executor, then lets go as {@link #release}
     * does (running it again while work is pending): for a thread that found work for the QP itself (a poller
     * that saw packets in the QP's inbox). Unlike {@link #schedule} it stores no pending flag first, which
     * would cost a second atomic instruction per hand-off.
     *
     * @return whether this thread ran it (false: another thread owns it, and runs the work before it lets go)
     */
    boolean tryRun() {
        if (!tryAcquire()) {
            return false;
        }
        try {
            work.dutyCycle();
        } finally {
            release();
        }
        return true;
    }

    /** Marks work pending without trying to run it: for the owner, whose release runs it. */
    void markPending() {
        PENDING.setVolatile(this, 1);
    }

    @Override
    public String toString() {
        Thread o = (Thread) OWNER.getOpaque(this);
        return "QpExecutor{owner=" + (o == null ? "none" : o.getName()) + ", pending=" + PENDING.getOpaque(this) + '}';
    }
}
