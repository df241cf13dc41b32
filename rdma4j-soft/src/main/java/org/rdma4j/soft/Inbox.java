// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.foreign.MemorySegment;

import org.rdma4j.common.concurrent.SlotRing;

/**
 * A queue pair's hand-off ring (docs/engine.md, "Packets between QPs"): packets for the QP that could not be
 * processed when they were sent (its executor was owned, or its own thread polls and runs it). Many
 * producers (peer QPs, links), one consumer (the QP's executor). Each slot is a preallocated {@link Packet}
 * (made on first use) holding a copy of the header fields and a snapshot of the payload's pieces: the bytes
 * stay in the sender's memory when the sender keeps them until the packet is answered ({@link
 * Packet#payloadStable}: RC requests, READ responses), else (UC, UD, whose WQEs complete when sent) they are
 * copied into the slot's own buffer. Thread-safe as described.
 */
final class Inbox {
    private final SlotRing ring;
    private final Packet[] slots;

    /** @param capacity slots, a power of two */
    Inbox(int capacity) {
        this.ring = SlotRing.mpsc(new long[capacity], 1);
        this.slots = new Packet[capacity];
    }

    /**
     * Copies a packet into the next slot (any thread).
     *
     * @param p the packet, valid during the call
     * @return false when the ring is full (the packet is lost: RC retransmits it)
     * @throws IllegalStateException or IndexOutOfBoundsException if an unstable payload cannot be read
     *         (memory closed under the sender); the slot is then published empty of payload and dropped
     */
    boolean offer(Packet p) {
        long s = ring.claim();
        if (s < 0) {
            return false;
        }
        int i = ring.index(s);
        Packet slot = slots[i];
        if (slot == null) {
            slot = slots[i] = new Packet(); // once per slot; the ring publishes it with the sequence
        }
        try {
            slot.copyHeaderFrom(p);
            slot.holdPayloadOf(p);
        } catch (RuntimeException e) {
            slot.payloadLen = -1; // published, and dropped by the consumer: a slot cannot be given back
            ring.publish(s);
            throw e;
        }
        ring.publish(s);
        return true;
    }

    /**
     * Takes the oldest packet (the QP's executor only): {@link #packet} gives it, valid until {@link #done}.
     *
     * @return its sequence, or -1 when the ring is empty
     */
    long poll() {
        return ring.poll();
    }

    /**
     * The oldest packet, left in the ring (the QP's executor only: the single consumer).
     *
     * @return it, valid until it is polled and {@link #done}; null when the ring is empty
     */
    Packet peek() {
        if (ring.isEmpty()) {
            return null;
        }
        return slots[ring.index(ring.consumerPosition())];
    }

    /**
     * @param seq from {@link #poll}
     * @return the packet in that slot
     */
    Packet packet(long seq) {
        return slots[ring.index(seq)];
    }

    /**
     * Gives a slot taken by {@link #poll} back to the producers.
     *
     * @param seq from {@link #poll}
     */
    void done(long seq) {
        Packet p = slots[ring.index(seq)];
        p.payload = null; // no reference to the sender's memory outlives the packet
        ring.release(seq);
    }

    /** @return whether no packet waits (a hint when peers are producing) */
    boolean isEmpty() {
        return ring.isEmpty();
    }

    /** @return the number of packets waiting (a hint) */
    int size() {
        return ring.size();
    }

    /** @return the packets taken so far (the consumer position: a hint for other threads) */
    long consumed() {
        return ring.consumerPosition();
    }

    /** @return the slots' capacity */
    int capacity() {
        return ring.capacity();
    }

    /** Heap memory of copied payloads: one growable buffer per slot, reused. */
    static MemorySegment grow(MemorySegment buf, int len) {
        if (buf != null && buf.byteSize() >= len) {
            return buf;
        }
        int n = Math.max(64, Integer.highestOneBit(Math.max(1, len - 1)) << 1);
        return MemorySegment.ofArray(new byte[n]);
    }
}
