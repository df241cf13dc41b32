// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Ctrl-C for long-running tools. A tool polls {@link #stopped()} in its loops and registers what it
 * blocks on (a listening socket) so that {@link #stop()} can unblock it; the tool then prints what
 * it measured and cleans up. The launcher's JVM turns SIGINT into {@link #stop()} through a shutdown
 * hook ({@link #installShutdownHook()}), which waits for running tools to finish their report before
 * the JVM exits; every tool of the launcher brackets its run with {@link #enter()} and {@link #exit()},
 * so the hook has nothing to wait for once the command has returned. Thread-safe.
 */
public final class StopSignal {
    /** The process-wide signal the launcher connects to SIGINT. */
    public static final StopSignal PROCESS = new StopSignal();
    /**
     * How long the shutdown hook waits for running tools to print and clean up
     * ({@code -Drdma4j.tools.stopWaitMs}, default 5000). It waits only while a tool runs: a command
     * that has returned exits at once.
     */
    static final long HOOK_WAIT_NS = TimeUnit.MILLISECONDS.toNanos(Long.getLong("rdma4j.tools.stopWaitMs", 5_000));

    private volatile boolean stopped;
    private final List<AutoCloseable> blockers = new CopyOnWriteArrayList<>();
    private final AtomicInteger running = new AtomicInteger();
    private final Object idle = new Object();

    /** A signal that only {@link #stop()} raises (tests use their own). */
    public StopSignal() {
    }

    /** {@return whether a stop was requested} */
    public boolean stopped() {
        return stopped;
    }

    /** Requests a stop: sets the flag and closes whatever was registered as blocking. */
    public void stop() {
        stopped = true;
        for (AutoCloseable c : blockers) {
            try {
                c.close();
            } catch (Exception e) {
                // Closing only unblocks the waiting thread, which reports the stop itself.
            }
        }
    }

    /**
     * Registers something a thread blocks on; {@link #stop()} closes it. Closes it at once if a stop
     * was already requested.
     *
     * @param c e.g. a ServerSocket in accept()
     */
    void register(AutoCloseable c) {
        blockers.add(c);
        if (stopped) {
            stop();
        }
    }

    /** @param c no longer blocking */
    void unregister(AutoCloseable c) {
        blockers.remove(c);
    }

    /** Marks a tool as running until {@link #exit()}: the shutdown hook waits for it. */
    void enter() {
        running.incrementAndGet();
    }

    /** The tool has printed its report and cleaned up. */
    void exit() {
        if (running.decrementAndGet() <= 0) {
            synchronized (idle) {
                idle.notifyAll();
            }
        }
    }

    /**
     * Waits until no tool is running, at most {@code nanos}.
     *
     * @param nanos the bound
     * @return whether all finished
     */
    boolean awaitIdle(long nanos) {
        long deadline = System.nanoTime() + nanos;
        synchronized (idle) {
            while (running.get() > 0) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(idle, left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return false;
                }
            }
        }
        return true;
    }

    /**
     * Connects SIGINT/SIGTERM (the JVM's shutdown) to {@link #PROCESS}: a running tool stops, prints
     * what it measured and releases its resources before the JVM exits.
     */
    static void installShutdownHook() {
        Runtime.getRuntime().addShutdownHook(new Thread(PROCESS::onShutdown, "rdma4j-stop"));
    }

    /**
     * The shutdown hook's work: when a tool is running (SIGINT, SIGTERM), stop it and wait for its report;
     * otherwise (the command returned and called System.exit) nothing.
     *
     * @return whether it waited
     */
    boolean onShutdown() {
        if (running.get() <= 0) {
            return false;
        }
        stop();
        awaitIdle(HOOK_WAIT_NS);
        return true;
    }
}
