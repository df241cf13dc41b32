// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common;

import java.lang.System.Logger;
import java.lang.System.Logger.Level;
import java.util.function.Supplier;

/**
 * A {@link System.Logger} that lets at most a burst of messages through per interval and counts the rest,
 * as Linux's {@code pr_warn_ratelimited} does (10 messages per 5 seconds by default): for warnings that a
 * packet can trigger, so that a flood of bad packets cannot flood the log. The first message after a
 * suppressed stretch says how many were suppressed. Thread-safe.
 */
public final class RateLimitedLogger {
    private final Logger logger;
    private final int burst;
    private final long intervalNs;
    private long windowStartNs;
    private int inWindow;
    private long suppressed;
    private boolean started;

    /**
     * Creates a rate-limited view of a logger, 10 messages per 5 seconds.
     *
     * @param logger where messages go
     */
    public RateLimitedLogger(Logger logger) {
        this(logger, 10, 5_000_000_000L);
    }

    /**
     * Creates a rate-limited view of a logger.
     *
     * @param logger     where messages go
     * @param burst      messages let through per interval, at least 1
     * @param intervalNs the interval in nanoseconds
     */
    public RateLimitedLogger(Logger logger, int burst, long intervalNs) {
        if (burst < 1 || intervalNs <= 0) {
            throw new IllegalArgumentException("burst " + burst + ", interval " + intervalNs + " ns");
        }
        this.logger = logger;
        this.burst = burst;
        this.intervalNs = intervalNs;
    }

    /**
     * Logs a message unless the burst of this interval is used up; builds it only when it is logged.
     *
     * @param level   the level
     * @param message builds the message
     * @return whether the message was logged
     */
    public boolean log(Level level, Supplier<String> message) {
        if (!logger.isLoggable(level)) {
            return false;
        }
        long dropped;
        synchronized (this) {
            long now = System.nanoTime();
            if (!started || now - windowStartNs >= intervalNs) {
                started = true;
                windowStartNs = now;
                inWindow = 0;
            }
            if (inWindow >= burst) {
                suppressed++;
                return false;
            }
            inWindow++;
            dropped = suppressed;
            suppressed = 0;
        }
        String m = message.get();
        logger.log(level, dropped == 0 ? m : m + " (" + dropped + " similar messages suppressed)");
        return true;
    }

    /** {@return the messages suppressed since the last one logged} */
    public synchronized long suppressed() {
        return suppressed;
    }
}
