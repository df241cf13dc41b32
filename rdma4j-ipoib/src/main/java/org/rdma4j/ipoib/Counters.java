// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.util.Locale;
import java.util.concurrent.atomic.AtomicLongArray;

/** An interface's {@link IpoibCounter}s: any thread counts, any thread reads. */
final class Counters {
    private final AtomicLongArray values = new AtomicLongArray(IpoibCounter.values().length);

    void count(IpoibCounter c) {
        values.incrementAndGet(c.ordinal());
    }

    void add(IpoibCounter c, long v) {
        values.addAndGet(c.ordinal(), v);
    }

    long get(IpoibCounter c) {
        return values.get(c.ordinal());
    }

    /** {@return every counter, one "name value" per line, in declaration order} */
    String text() {
        StringBuilder sb = new StringBuilder();
        for (IpoibCounter c : IpoibCounter.values()) {
            sb.append(c.name().toLowerCase(Locale.ROOT)).append(' ').append(get(c)).append('\n');
        }
        return sb.toString();
    }
}
