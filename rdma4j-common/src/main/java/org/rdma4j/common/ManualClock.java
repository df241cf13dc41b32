// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common;

import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A clock that moves only when {@link #advance} is called. Listeners (device timer services) run
 * synchronously inside {@code advance}, so a test that advances past a deadline observes the timer's
 * effect as soon as {@code advance} returns. Thread-safe.
 */
public final class ManualClock implements NanoClock {
    /** Something to run whenever time moves. */
    @FunctionalInterface
    public interface Listener {
        /**
         * Called after the clock moved, on the thread that moved it.
         *
         * @param nowNs the new time
         */
        void onTimeAdvanced(long nowNs);
    }

    private volatile long now;
    private final CopyOnWriteArrayList<Listener> listeners = new CopyOnWriteArrayList<>();

    /** Starts at an arbitrary non-zero time. */
    public ManualClock() {
        this(1_000_000_000L);
    }

    /**
     * Creates a clock that stands at {@code startNs} until advanced.
     *
     * @param startNs initial time
     */
    public ManualClock(long startNs) {
        this.now = startNs;
    }

    @Override
    public long nanoTime() {
        return now;
    }

    @Override
    public boolean isManual() {
        return true;
    }

    /**
     * Moves time forward and runs the listeners.
     *
     * @param deltaNs nanoseconds, at least 0
     */
    public void advance(long deltaNs) {
        if (deltaNs < 0) {
            throw new IllegalArgumentException("deltaNs=" + deltaNs + " (expected >= 0)");
        }
        long t;
        synchronized (this) {
            now += deltaNs;
            t = now;
        }
        for (Listener l : listeners) {
            l.onTimeAdvanced(t);
        }
    }

    /**
     * Adds a listener.
     *
     * @param l called on every advance
     */
    public void addListener(Listener l) {
        listeners.add(l);
    }

    /**
     * Removes a listener.
     *
     * @param l a listener added before
     */
    public void removeListener(Listener l) {
        listeners.remove(l);
    }
}
