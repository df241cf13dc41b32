// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common.concurrent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

class ArrayQueueTest {
    @Test
    void shouldRoundTheCapacityUpAndRefuseWhenFull() {
        ArrayQueue<String> q = ArrayQueue.mpsc(3);
        assertEquals(4, q.capacity());
        for (int i = 0; i < 4; i++) {
            assertTrue(q.offer("e" + i));
        }
        assertFalse(q.offer("x"));
        assertEquals("e0", q.poll());
        assertTrue(q.offer("e4"));
        List<String> out = new ArrayList<>();
        assertEquals(4, q.drain(out::add, 10));
        assertEquals(List.of("e1", "e2", "e3", "e4"), out);
        assertNull(q.poll());
        assertTrue(q.isEmpty());
    }

    @Test
    void shouldRejectNullsAndBadCapacities() {
        ArrayQueue<String> q = ArrayQueue.spsc(1);
        assertThrows(NullPointerException.class, () -> q.offer(null));
        assertTrue(q.offer("a"));
        assertTrue(q.offer("b"), "a capacity of 1 is rounded up to a ring's two slots");
        assertFalse(q.offer("c"));
        assertThrows(IllegalArgumentException.class, () -> ArrayQueue.mpmc(0));
    }

    @Test
    void shouldDeliverEveryElementOnceFromManyProducers() throws Exception {
        ArrayQueue<Long> q = ArrayQueue.mpsc(16);
        int producers = 3;
        int each = 50_000;
        long deadline = System.nanoTime() + 60_000_000_000L;
        List<Thread> ts = new ArrayList<>();
        for (int p = 0; p < producers; p++) {
            final long base = (long) p << 32;
            ts.add(Thread.ofPlatform().start(() -> {
                for (int i = 0; i < each && System.nanoTime() - deadline < 0; ) {
                    if (q.offer(base | i)) {
                        i++;
                    } else {
                        Thread.yield();
                    }
                }
            }));
        }
        long[] next = new long[producers];
        long got = 0;
        while (got < (long) producers * each && System.nanoTime() - deadline < 0) {
            Long v = q.poll();
            if (v == null) {
                Thread.yield();
                continue;
            }
            int p = (int) (v >>> 32);
            assertEquals(next[p], v & 0xFFFF_FFFFL, "order of producer " + p);
            next[p]++;
            got++;
        }
        for (Thread t : ts) {
            t.join(10_000);
        }
        assertEquals((long) producers * each, got);
    }
}
