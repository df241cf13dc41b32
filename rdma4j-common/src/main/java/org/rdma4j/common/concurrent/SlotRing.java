// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common.concurrent;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A bounded ring of fixed-size slots in a caller's {@code long[]}, each slot carrying its own sequence
 * number in its first word (Dmitry Vyukov's bounded queue, as JCTools' and Agrona's array queues do it with
 * indexes): a slot is free for the producer claiming position {@code p} when its sequence is {@code p},
 * published when it is {@code p + 1}, and free again when the consumer sets it to {@code p + capacity}. A
 * consumer therefore reads one cache line per entry, the slot itself, and never a line only the producer
 * writes; producers read the consumer's index only when the ring looks full.
 *
 * <p>The caller stores the entry's data in words {@code base + 1 .. base + stride - 1} of the slot
 * ({@link #base}) between {@link #claim} and {@link #publish} (producer), and reads them between
 * {@link #poll} and {@link #release} (consumer), with plain accesses: publish is a release store of the
 * sequence and poll an acquire load, so the data is visible to the consumer. An entry may also point at
 * data elsewhere (parallel arrays indexed by {@link #index}).
 *
 * <p>Concurrency is chosen at creation: {@link #spsc}, {@link #mpsc} (producers claim with a CAS) or
 * {@link #mpmc} (consumers too). In the single-producer and single-consumer modes the caller guarantees the
 * exclusion (one thread, or a lock that orders the calls).
 */
public final class SlotRing {
    private static final VarHandle LONGS = MethodHandles.arrayElementVarHandle(long[].class);
    // producer and consumer indexes on cache lines of their own (JCTools pads with fields; an array keeps
    // the layout explicit)
    private static final int TAIL = 8;
    private static final int HEAD_CACHE = 16;
    private static final int HEAD = 24;

    private final long[] slots;
    private final int stride;
    private final int capacity;
    private final int mask;
    private final boolean multiProducer;
    private final boolean multiConsumer;
    private final long[] index = new long[40];
    /**
     * Set in the producer index by {@link #close}: claims fail from then on, and the positions claimed before it
     * are final (a growable queue moves its producers to a larger ring this way, as JCTools' linked array queues
     * do with their jump marker).
     */
    private static final long CLOSED = 1L << 62;
    /** What {@link #claim} returns once the ring is {@link #close closed}. */
    public static final long CLOSED_RING = -2;

    private SlotRing(long[] slots, int stride, boolean multiProducer, boolean multiConsumer) {
        if (stride < 1 || slots.length % stride != 0) {
            throw new IllegalArgumentException("stride=" + stride + ", slots.length=" + slots.length
                    + " (expected stride >= 1 dividing the length)");
        }
        int n = slots.length / stride;
        if (n < 2 || Integer.bitCount(n) != 1) {
            // With one slot, the sequence of a published entry (p + 1) is the one that frees the slot for the
            // next position (p + 1): a producer could claim and overwrite an entry a consumer is still reading.
            throw new IllegalArgumentException("capacity " + n + " (slots.length / stride) must be a power of two,"
                    + " at least 2");
        }
        this.slots = slots;
        this.stride = stride;
        this.capacity = n;
        this.mask = n - 1;
        this.multiProducer = multiProducer;
        this.multiConsumer = multiConsumer;
        for (int i = 0; i < n; i++) {
            slots[i * stride] = i;
        }
        VarHandle.releaseFence();
    }

    /**
     * A ring for one producer and one consumer.
     *
     * @param slots  storage: capacity x stride words, capacity a power of two, at least 2
     * @param stride words per slot, the sequence word included (8 = one cache line)
     * @return a ring for one producer and one consumer
     */
    public static SlotRing spsc(long[] slots, int stride) {
        return new SlotRing(slots, stride, false, false);
    }

    /**
     * A ring for many producers and one consumer.
     *
     * @param slots  storage: capacity x stride words, capacity a power of two, at least 2
     * @param stride words per slot, the sequence word included
     * @return a ring for many producers and one consumer
     */
    public static SlotRing mpsc(long[] slots, int stride) {
        return new SlotRing(slots, stride, true, false);
    }

    /**
     * A ring for many producers and many consumers.
     *
     * @param slots  storage: capacity x stride words, capacity a power of two, at least 2
     * @param stride words per slot, the sequence word included
     * @return a ring for many producers and many consumers
     */
    public static SlotRing mpmc(long[] slots, int stride) {
        return new SlotRing(slots, stride, true, true);
    }

    /**
     * Returns the number of slots.
     *
     * @return the number of slots
     */
    public int capacity() {
        return capacity;
    }

    /**
     * Returns the storage this ring sequences.
     *
     * @return the storage this ring sequences
     */
    public long[] slots() {
        return slots;
    }

    /**
     * The slot index of a sequence.
     *
     * @param seq a sequence from {@link #claim} or {@link #poll}
     * @return the slot's index, 0 .. capacity - 1
     */
    public int index(long seq) {
        return (int) seq & mask;
    }

    /**
     * The word offset of a slot in the storage.
     *
     * @param seq a sequence from {@link #claim} or {@link #poll}
     * @return the word offset of the slot's sequence word; its data words follow it
     */
    public int base(long seq) {
        return ((int) seq & mask) * stride;
    }

    /**
     * Claims the next slot for writing (producer).
     *
     * @return its sequence, -1 when the ring is full, or {@link #CLOSED_RING} once it is {@link #close closed}
     */
    public long claim() {
        return claim(capacity);
    }

    /**
     * Claims the next slot for writing unless {@code limit} entries are already in the ring (a queue whose
     * logical capacity is below the ring's, such as a CQ of 5 entries in a ring of 8).
     *
     * @param limit at most {@link #capacity}
     * @return its sequence, -1 when the ring holds {@code limit} entries (or is full), or {@link #CLOSED_RING}
     *         once it is {@link #close closed}
     */
    public long claim(int limit) {
        final long[] s = slots;
        for (;;) {
            long pos = (long) LONGS.getOpaque(index, TAIL);
            if ((pos & CLOSED) != 0) {
                return CLOSED_RING;
            }
            // lpHeadCache: a stale (smaller) value only makes us re-read the consumer's index
            long headCache = (long) LONGS.getOpaque(index, HEAD_CACHE);
            if (pos - headCache >= limit) {
                long head = (long) LONGS.getAcquire(index, HEAD);
                LONGS.setOpaque(index, HEAD_CACHE, head);
                if (pos - head >= limit) {
                    return -1;
                }
            }
            int b = ((int) pos & mask) * stride;
            long seq = (long) LONGS.getAcquire(s, b);
            if (seq == pos) {
                if (!multiProducer) {
                    LONGS.setOpaque(index, TAIL, pos + 1);
                    return pos;
                }
                if (LONGS.compareAndSet(index, TAIL, pos, pos + 1)) {
                    return pos;
                }
            } else if (seq - pos < 0) {
                return -1; // the consumer has not released this slot yet: full
            }
            // else another producer claimed pos: retry with the new tail
        }
    }

    /**
     * Ends claiming (a ring of many producers): claims fail with {@link #CLOSED_RING} from now on, and a claim
     * racing with the close either took its slot before it or fails. What was claimed stays to be published and
     * consumed; {@link #producerPosition} is then final. Idempotent.
     *
     * @return the final producer position
     * @throws IllegalStateException for a ring of one producer (its claim is not a CAS a close could order)
     */
    public long close() {
        if (!multiProducer) {
            throw new IllegalStateException("only a ring of many producers can be closed");
        }
        for (;;) {
            long pos = (long) LONGS.getVolatile(index, TAIL);
            if ((pos & CLOSED) != 0 || LONGS.compareAndSet(index, TAIL, pos, pos | CLOSED)) {
                return pos & ~CLOSED;
            }
        }
    }

    /**
     * Returns whether {@link #close} was called.
     *
     * @return whether {@link #close} was called
     */
    public boolean isClosed() {
        return ((long) LONGS.getAcquire(index, TAIL) & CLOSED) != 0;
    }

    /**
     * Makes a claimed slot's data visible to the consumer (a release store of its sequence).
     *
     * @param seq from {@link #claim}
     */
    public void publish(long seq) {
        LONGS.setRelease(slots, ((int) seq & mask) * stride, seq + 1);
    }

    /**
     * Takes the oldest published slot for reading (consumer).
     *
     * @return its sequence, or -1 when none is published
     */
    public long poll() {
        final long[] s = slots;
        for (;;) {
            long pos = (long) LONGS.getOpaque(index, HEAD);
            long seq = (long) LONGS.getAcquire(s, ((int) pos & mask) * stride);
            long d = seq - (pos + 1);
            if (d == 0) {
                if (!multiConsumer) {
                    LONGS.setRelease(index, HEAD, pos + 1);
                    return pos;
                }
                if (LONGS.compareAndSet(index, HEAD, pos, pos + 1)) {
                    return pos;
                }
            } else if (d < 0) {
                return -1; // not published yet: empty
            }
            // else another consumer took pos: retry
        }
    }

    /**
     * Returns a slot taken by {@link #poll} to the producers (a release store of its sequence): the caller
     * must have finished reading it.
     *
     * @param seq from {@link #poll}
     */
    public void release(long seq) {
        LONGS.setRelease(slots, ((int) seq & mask) * stride, seq + capacity);
    }

    /**
     * Returns whether no published entry is waiting (a hint when others are producing).
     *
     * @return whether no published entry is waiting (a hint when others are producing)
     */
    public boolean isEmpty() {
        long pos = (long) LONGS.getOpaque(index, HEAD);
        return (long) LONGS.getAcquire(slots, ((int) pos & mask) * stride) != pos + 1;
    }

    /**
     * Returns entries claimed and not yet taken (a hint when others are producing or consuming).
     *
     * @return entries claimed and not yet taken (a hint when others are producing or consuming)
     */
    public int size() {
        long head = (long) LONGS.getAcquire(index, HEAD);
        long tail = (long) LONGS.getAcquire(index, TAIL) & ~CLOSED;
        return (int) Math.max(0, Math.min(capacity, tail - head));
    }

    /**
     * Returns the producer position: sequences claimed so far.
     *
     * @return the producer position: sequences claimed so far
     */
    public long producerPosition() {
        return (long) LONGS.getAcquire(index, TAIL) & ~CLOSED;
    }

    /**
     * Returns the consumer position: sequences taken so far.
     *
     * @return the consumer position: sequences taken so far
     */
    public long consumerPosition() {
        return (long) LONGS.getAcquire(index, HEAD);
    }

    @Override
    public String toString() {
        return "SlotRing{" + (multiProducer ? "mp" : "sp") + (multiConsumer ? "mc" : "sc") + ", capacity=" + capacity
                + ", size=" + size() + '}';
    }
}
