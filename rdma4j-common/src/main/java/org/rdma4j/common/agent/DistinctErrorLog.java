// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common.agent;

import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * An {@link ErrorHandler} that counts every error and logs each distinct one (same type, message and
 * throwing frame) once with its stack, then only every 1,000th repetition, so a bug hit on every packet
 * cannot flood the log (after Aeron's {@code DistinctErrorLog}). Keeps the first {@value #MAX_DISTINCT}
 * distinct errors for inspection. Thread-safe.
 */
public final class DistinctErrorLog implements ErrorHandler {
    /** Distinct errors kept. */
    public static final int MAX_DISTINCT = 64;
    private static final long REPEAT_LOG_EVERY = 1_000;

    /** A distinct error and how often it happened. */
    public static final class Entry {
        private final String key;
        private final Throwable first;
        private final String role;
        private final AtomicLong count = new AtomicLong();

        Entry(String key, Throwable first, String role) {
            this.key = key;
            this.first = first;
            this.role = role;
        }

        /**
         * Returns the first occurrence.
         *
         * @return the first occurrence
         */
        public Throwable first() {
            return first;
        }

        /**
         * Returns the role of the agent it happened in.
         *
         * @return the role of the agent it happened in
         */
        public String role() {
            return role;
        }

        /**
         * Returns how often it happened.
         *
         * @return how often it happened
         */
        public long count() {
            return count.get();
        }

        @Override
        public String toString() {
            return role + ": " + first + " x" + count();
        }
    }

    private final System.Logger log;
    private final AtomicLong total = new AtomicLong();
    private final List<Entry> entries = new ArrayList<>();

    /**
     * A log that writes to a System.Logger.
     *
     * @param log where the errors go
     */
    public DistinctErrorLog(System.Logger log) {
        this.log = log;
    }

    @Override
    public void onError(Agent agent, Throwable error) {
        total.incrementAndGet();
        String role = agent == null ? "?" : agent.roleName();
        StackTraceElement[] st = error.getStackTrace();
        String key = role + '|' + error.getClass().getName() + '|' + error.getMessage() + '|'
                + (st.length > 0 ? st[0] : "");
        Entry e;
        boolean first = false;
        synchronized (entries) {
            e = find(key);
            if (e == null && entries.size() < MAX_DISTINCT) {
                e = new Entry(key, error, role);
                entries.add(e);
                first = true;
            }
        }
        long n = e == null ? 0 : e.count.incrementAndGet();
        try {
            if (first) {
                log.log(Level.ERROR, "agent " + role + " failed a duty cycle and carries on", error);
            } else if (n % REPEAT_LOG_EVERY == 0 || e == null && total.get() % REPEAT_LOG_EVERY == 1) {
                log.log(Level.ERROR, "agent " + role + ": " + error + " (" + (e == null ? total.get() + " errors" : n
                        + " times") + ")");
            }
        } catch (RuntimeException ignored) {
            // a logger that fails must not take the agent with it; the count above still records the error
        }
    }

    private Entry find(String key) {
        for (Entry e : entries) {
            if (e.key.equals(key)) {
                return e;
            }
        }
        return null;
    }

    /**
     * Returns every error handled, distinct or not.
     *
     * @return every error handled, distinct or not
     */
    public long total() {
        return total.get();
    }

    /**
     * Returns the distinct errors seen so far, oldest first.
     *
     * @return the distinct errors seen so far, oldest first
     */
    public List<Entry> entries() {
        synchronized (entries) {
            return List.copyOf(entries);
        }
    }

    @Override
    public String toString() {
        return "DistinctErrorLog{total=" + total() + ", " + Arrays.toString(entries().toArray()) + '}';
    }
}
