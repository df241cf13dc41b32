// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common.agent;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * Runs an {@link Agent} on a thread of its own (after Agrona's {@code AgentRunner}): duty cycles until
 * {@link #close}, the {@link IdleStrategy} between cycles that did nothing, and every {@link Throwable} a
 * cycle throws handed to the {@link ErrorHandler} and counted, so no exception ends the thread. The thread
 * is a daemon named {@code rdma4j-<role>}.
 *
 * <p>Thread-safe: {@link #wake} and {@link #close} may be called from any thread.
 */
public final class AgentRunner implements AutoCloseable {
    /** How long {@link #close} waits for the agent's thread to finish its cycle. */
    private static final long CLOSE_WAIT_MS = 5_000;

    private final Agent agent;
    private final IdleStrategy idle;
    private final ErrorHandler errorHandler;
    private final AtomicLong errors = new AtomicLong();
    private final Thread thread;
    private volatile boolean running = true;
    private volatile boolean started;

    /**
     * Creates the runner; {@link #start} starts its thread.
     *
     * @param agent        the agent
     * @param idle         what the thread does between cycles that did nothing (one instance per runner)
     * @param errorHandler receives what a cycle threw
     */
    public AgentRunner(Agent agent, IdleStrategy idle, ErrorHandler errorHandler) {
        this.agent = agent;
        this.idle = idle;
        this.errorHandler = errorHandler;
        this.thread = Thread.ofPlatform().daemon().name("rdma4j-" + agent.roleName()).unstarted(this::run);
    }

    /**
     * Creates a runner and starts it.
     *
     * @param agent        the agent
     * @param idle         its idle strategy
     * @param errorHandler receives what a cycle threw
     * @return the running runner
     */
    public static AgentRunner start(Agent agent, IdleStrategy idle, ErrorHandler errorHandler) {
        return new AgentRunner(agent, idle, errorHandler).start();
    }

    /**
     * Starts the thread (once; later calls do nothing).
     *
     * @return this
     */
    public synchronized AgentRunner start() {
        if (!started && running) {
            started = true;
            thread.start();
        }
        return this;
    }

    private void run() {
        try {
            agent.onStart();
        } catch (Throwable t) {
            handle(t);
        }
        final Agent a = agent;
        final IdleStrategy strategy = idle;
        while (running) {
            int work;
            try {
                work = a.doWork();
            } catch (Throwable t) {
                handle(t);
                work = 0; // idle after a failure: a cycle that fails at once must not spin the core
            }
            if (work > 0) {
                strategy.reset();
            } else if (running) {
                long budget = a.idleBudgetNs();
                if (budget > 0) {
                    strategy.idleAtMost(budget);
                }
            }
        }
        try {
            a.onClose();
        } catch (Throwable t) {
            handle(t);
        }
    }

    private void handle(Throwable t) {
        errors.incrementAndGet();
        try {
            errorHandler.onError(agent, t);
        } catch (Throwable ignored) {
            // an error handler must not throw; if it does, the count above is what remains of the error
        }
    }

    /**
     * Ends a park of the agent's thread early: called by whoever gave the agent work (or moved its next
     * deadline earlier). Cheap when the thread is not parked.
     */
    public void wake() {
        if (idle.parks()) {
            LockSupport.unpark(thread);
        }
    }

    /**
     * Returns the agent.
     *
     * @return the agent
     */
    public Agent agent() {
        return agent;
    }

    /**
     * Returns the agent's thread.
     *
     * @return the agent's thread
     */
    public Thread thread() {
        return thread;
    }

    /**
     * Returns the errors the agent's cycles threw so far.
     *
     * @return the errors the agent's cycles threw so far
     */
    public long errors() {
        return errors.get();
    }

    /**
     * Returns whether the runner has not been closed.
     *
     * @return whether the runner has not been closed
     */
    public boolean isRunning() {
        return running;
    }

    /**
     * Stops the loop after the current cycle and waits (a bounded time) for the thread to end. From the
     * agent's own thread it only asks the loop to stop.
     */
    @Override
    public void close() {
        running = false;
        LockSupport.unpark(thread);
        if (!started || Thread.currentThread() == thread) {
            return;
        }
        try {
            thread.join(CLOSE_WAIT_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public String toString() {
        return "AgentRunner{" + agent.roleName() + ", idle=" + idle.alias() + ", errors=" + errors() + '}';
    }
}
