// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common.concurrent;

import java.util.function.Consumer;

/**
 * A bounded FIFO of references over a {@link SlotRing} (one sequence word per slot, the references in a
 * parallel array): {@link #offer} never blocks and returns false when full, {@link #poll} returns null when
 * empty, nothing is allocated per element. The producer and consumer counts are chosen at creation
 * ({@link #spsc}, {@link #mpsc}, {@link #mpmc}), as the ring's are.
 *
 * @param <E> element type
 */
public final class ArrayQueue<E> {
    private final SlotRing ring;
    private final Object[] elements;

    private ArrayQueue(int capacity, char mode) {
        if (capacity < 1 || capacity > 1 << 30) {
            throw new IllegalArgumentException("capacity " + capacity + " (expected 1..2^30)");
        }
        int n = capacity <= 2 ? 2 : Integer.highestOneBit(capacity - 1) << 1; // a ring has at least 2 slots
        long[] seq = new long[n];
        this.ring = switch (mode) {
            case 's' -> SlotRing.spsc(seq, 1);
            case 'm' -> SlotRing.mpsc(seq, 1);
            default -> SlotRing.mpmc(seq, 1);
        };
        this.elements = new Object[n];
    }

    /**
     * A queue for one producer thread and one consumer thread.
     *
     * @param capacity at least this many elements (rounded up to a power of two)
     * @param <E>      element type
     * @return a queue for one producer and one consumer
     */
    public static <E> ArrayQueue<E> spsc(int capacity) {
        return new ArrayQueue<>(capacity, 's');
    }

    /**
     * A queue for many producer threads and one consumer thread.
     *
     * @param capacity at least this many elements (rounded up to a power of two)
     * @param <E>      element type
     * @return a queue for many producers and one consumer
     */
    public static <E> ArrayQueue<E> mpsc(int capacity) {
        return new ArrayQueue<>(capacity, 'm');
    }

    /**
     * A queue for many producer and many consumer threads.
     *
     * @param capacity at least this many elements (rounded up to a power of two)
     * @param <E>      element type
     * @return a queue for many producers and many consumers
     */
    public static <E> ArrayQueue<E> mpmc(int capacity) {
        return new ArrayQueue<>(capacity, 'M');
    }

    /**
     * Adds an element at the tail unless the queue is full.
     *
     * @param e the element, not null
     * @return false when the queue is full
     */
    public boolean offer(E e) {
        if (e == null) {
            throw new NullPointerException("element");
        }
        long s = ring.claim();
        if (s < 0) {
            return false;
        }
        elements[ring.index(s)] = e; // plain: the ring's publish is the release store
        ring.publish(s);
        return true;
    }

    /**
     * Returns the oldest element, or null when empty.
     *
     * @return the oldest element, or null when empty
     */
    @SuppressWarnings("unchecked")
    public E poll() {
        long s = ring.poll();
        if (s < 0) {
            return null;
        }
        int i = ring.index(s);
        E e = (E) elements[i];
        elements[i] = null;
        ring.release(s);
        return e;
    }

    /**
     * Hands every element queued now (and any that arrive meanwhile, up to {@code limit}) to {@code sink}.
     *
     * @param sink  called with each element, on this thread
     * @param limit at most this many
     * @return how many were handed over
     */
    public int drain(Consumer<? super E> sink, int limit) {
        int n = 0;
        E e;
        while (n < limit && (e = poll()) != null) {
            sink.accept(e);
            n++;
        }
        return n;
    }

    /**
     * Returns whether the queue looks empty (a hint when others are producing).
     *
     * @return whether the queue looks empty (a hint when others are producing)
     */
    public boolean isEmpty() {
        return ring.isEmpty();
    }

    /**
     * Returns the number of elements queued (a hint when others are producing or consuming).
     *
     * @return the number of elements queued (a hint when others are producing or consuming)
     */
    public int size() {
        return ring.size();
    }

    /**
     * Returns the number of elements it holds at most.
     *
     * @return the number of elements it holds at most
     */
    public int capacity() {
        return ring.capacity();
    }
}
