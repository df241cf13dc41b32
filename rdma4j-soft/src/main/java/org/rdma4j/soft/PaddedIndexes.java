// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A producer index and a consumer index on separate cache lines, so a poller spinning on one does
 * not steal the line the other side writes. Release stores publish, acquire loads observe.
 */
final class PaddedIndexes {
    private static final VarHandle LONGS = MethodHandles.arrayElementVarHandle(long[].class);
    private static final int PRODUCER = 8;
    private static final int CONSUMER = 24;

    private final long[] slots = new long[32];

    long producer() {
        return (long) LONGS.getAcquire(slots, PRODUCER);
    }

    void producer(long v) {
        LONGS.setRelease(slots, PRODUCER, v);
    }

    long consumer() {
        return (long) LONGS.getAcquire(slots, CONSUMER);
    }

    void consumer(long v) {
        LONGS.setRelease(slots, CONSUMER, v);
    }
}
