// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common.concurrent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

class SlotRingTest {
    private static final long DEADLINE_NS = 60_000_000_000L;

    private static SlotRing ring(String mode, int capacity, int stride) {
        long[] s = new long[capacity * stride];
        return switch (mode) {
            case "spsc" -> SlotRing.spsc(s, stride);
            case "mpsc" -> SlotRing.mpsc(s, stride);
            default -> SlotRing.mpmc(s, stride);
        };
    }

    @ParameterizedTest
    @ValueSource(strings = {"spsc", "mpsc", "mpmc"})
    void shouldKeepFifoOrderAcrossManyWrapsAndReportFullAndEmpty(String mode) {
        SlotRing r = ring(mode, 4, 3);
        long[] s = r.slots();
        assertTrue(r.isEmpty());
        assertEquals(-1, r.poll());
        long next = 0;
        long expect = 0;
        for (int round = 0; round < 100; round++) {
            int n = 1 + round % 4;
            for (int i = 0; i < n; i++) {
                long q = r.claim();
                assertTrue(q >= 0, "claim in round " + round);
                s[r.base(q) + 1] = next;
                s[r.base(q) + 2] = ~next;
                r.publish(q);
                next++;
            }
            if (n == 4) {
                assertEquals(-1, r.claim(), "a full ring refuses a claim");
            }
            assertEquals(n, r.size());
            for (int i = 0; i < n; i++) {
                long q = r.poll();
                assertTrue(q >= 0);
                assertEquals(expect, s[r.base(q) + 1]);
                assertEquals(~expect, s[r.base(q) + 2]);
                r.release(q);
                expect++;
            }
            assertEquals(-1, r.poll());
            assertTrue(r.isEmpty());
        }
    }

    @Test
    void shouldRefuseAClaimAtTheLogicalLimitBelowTheCapacity() {
        SlotRing r = ring("mpmc", 8, 1);
        for (int i = 0; i < 5; i++) {
            long q = r.claim(5);
            assertTrue(q >= 0);
            r.publish(q);
        }
        assertEquals(-1, r.claim(5));
        r.release(r.poll());
        assertTrue(r.claim(5) >= 0, "one entry taken: one more fits");
    }

    @Test
    void shouldNotReuseASlotTakenButNotYetReleased() {
        SlotRing r = ring("spsc", 2, 1);
        r.publish(r.claim());
        r.publish(r.claim());
        long taken = r.poll();
        assertEquals(-1, r.claim(), "the slot is still being read");
        r.release(taken);
        assertTrue(r.claim() >= 0);
    }

    @Test
    void shouldRefuseClaimsOnceClosedAndKeepWhatWasClaimed() {
        SlotRing r = SlotRing.mpsc(new long[4], 1);
        long a = r.claim();
        r.publish(a);
        long b = r.claim(); // claimed before the close, published after it
        assertEquals(2, r.close(), "the final producer position");
        assertTrue(r.isClosed());
        assertEquals(SlotRing.CLOSED_RING, r.claim(), "no claim after the close");
        assertEquals(2, r.close(), "idempotent");
        assertEquals(2, r.producerPosition());
        assertEquals(2, r.size());
        r.publish(b);
        assertEquals(a, r.poll());
        r.release(a);
        assertEquals(b, r.poll());
        r.release(b);
        assertEquals(-1, r.poll());
        assertEquals(r.producerPosition(), r.consumerPosition());
        assertThrows(IllegalStateException.class, () -> SlotRing.spsc(new long[4], 1).close());
    }

    @Test
    void shouldRejectBadGeometry() {
        assertThrows(IllegalArgumentException.class, () -> SlotRing.spsc(new long[6], 2));
        assertThrows(IllegalArgumentException.class, () -> SlotRing.spsc(new long[8], 3));
        assertThrows(IllegalArgumentException.class, () -> SlotRing.spsc(new long[0], 1));
        // one slot: a published entry's sequence would free it for the next claim (InboxTest's producers saw it)
        assertThrows(IllegalArgumentException.class, () -> SlotRing.mpmc(new long[4], 4));
    }

    /**
     * Producers each publish an increasing count (with a checksum word); consumers see every entry once,
     * each producer's entries in order when there is one consumer, and every word of an entry written.
     */
    @ParameterizedTest
    @ValueSource(strings = {"spsc", "mpsc", "mpmc"})
    void shouldDeliverEveryEntryOnceUnderConcurrency(String mode) throws Exception {
        int producers = mode.equals("spsc") ? 1 : 3;
        int consumers = mode.equals("mpmc") ? 2 : 1;
        int perProducer = 200_000;
        SlotRing r = ring(mode, 64, 4);
        long[] s = r.slots();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        long deadline = System.nanoTime() + DEADLINE_NS;
        List<Thread> threads = new ArrayList<>();
        long[][] seen = new long[consumers][producers];
        long[][] lastSeen = new long[consumers][producers];
        for (int c = 0; c < consumers; c++) {
            for (int p = 0; p < producers; p++) {
                lastSeen[c][p] = -1;
            }
        }
        for (int p = 0; p < producers; p++) {
            final int id = p;
            threads.add(Thread.ofPlatform().start(() -> {
                for (long i = 0; i < perProducer && failure.get() == null; ) {
                    long q = r.claim();
                    if (q < 0) {
                        if (System.nanoTime() - deadline > 0) {
                            failure.compareAndSet(null, new AssertionError("producer " + id + " stuck at " + i));
                            return;
                        }
                        Thread.yield();
                        continue;
                    }
                    int b = r.base(q);
                    s[b + 1] = id;
                    s[b + 2] = i;
                    s[b + 3] = id * 31L + i * 7;
                    r.publish(q);
                    i++;
                }
            }));
        }
        long total = (long) producers * perProducer;
        java.util.concurrent.atomic.AtomicLong consumed = new java.util.concurrent.atomic.AtomicLong();
        for (int c = 0; c < consumers; c++) {
            final int id = c;
            threads.add(Thread.ofPlatform().start(() -> {
                while (consumed.get() < total && failure.get() == null) {
                    long q = r.poll();
                    if (q < 0) {
                        if (System.nanoTime() - deadline > 0) {
                            failure.compareAndSet(null, new AssertionError("consumer " + id + " stuck"));
                            return;
                        }
                        Thread.yield();
                        continue;
                    }
                    int b = r.base(q);
                    int p = (int) s[b + 1];
                    long i = s[b + 2];
                    long check = s[b + 3];
                    r.release(q);
                    if (check != p * 31L + i * 7) {
                        failure.compareAndSet(null, new AssertionError("torn entry " + p + "/" + i + "/" + check));
                    }
                    if (i <= lastSeen[id][p]) {
                        failure.compareAndSet(null, new AssertionError("producer " + p + " out of order: " + i
                                + " after " + lastSeen[id][p]));
                    }
                    lastSeen[id][p] = i;
                    seen[id][p]++;
                    consumed.incrementAndGet();
                }
            }));
        }
        for (Thread t : threads) {
            t.join(DEADLINE_NS / 1_000_000 + 5_000);
            if (t.isAlive()) {
                fail("thread did not finish: " + t);
            }
        }
        if (failure.get() != null) {
            throw new AssertionError(failure.get());
        }
        for (int p = 0; p < producers; p++) {
            long n = 0;
            for (int c = 0; c < consumers; c++) {
                n += seen[c][p];
            }
            assertEquals(perProducer, n, "entries of producer " + p);
        }
        assertTrue(r.isEmpty());
    }
}
