// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.PrintStream;

/** A progress line on stderr for long runs on a terminal, rewritten in place about once a second. */
final class PerftestProgress {
private final PrintStream err;
private final long size;
private final long total;
private final boolean duration;
private final long durationNs;
private final long start = System.nanoTime();
private long next = start + 1_000_000_000L;
private boolean shown;

private PerftestProgress(PrintStream err, long size, long total, boolean duration, long durationNs) {
    this.err = err;
    this.size = size;
    this.total = total;
    this.duration = duration;
    this.durationNs = durationNs;
}

static PerftestProgress maybe(PerftestOptions o, PrintStream err, long size, long total, boolean duration) {
    boolean terminal = System.console() != null && System.console().isTerminal();
    boolean want = o.progress || (terminal && !o.noProgress);
    boolean long_ = duration || total >= 200_000;
    return want && long_ ? new PerftestProgress(err, size, total, duration, o.duration * 1_000_000_000L) : null;
}

/**
 * @param now  the time
 * @param done iterations done, or ns elapsed in duration mode
 */
void update(long now, long done) {
    if (now < next) {
        return;
    }
    next = now + 1_000_000_000L;
    double el = (now - start) / 1e9;
    String line = duration
            ? String.format(" %d B: %.0f of %d s", size, done / 1e9, durationNs / 1_000_000_000L)
            : String.format(" %d B: %d of %d iterations (%.0f%%), %.1f s", size, done, total,
                    100.0 * done / Math.max(total, 1), el);
    err.print("\r" + line + "   ");
    err.flush();
    shown = true;
}

void clear() {
    if (shown) {
        err.print("\r" + " ".repeat(70) + "\r");
        err.flush();
    }
}
}
