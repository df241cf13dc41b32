// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.foreign.MemorySegment;

import org.rdma4j.common.concurrent.SlotRing;
import org.rdma4j.verbs.Gid;

/**
 * A queue pair's hand-off ring (docs/engine.md, "Packets between QPs"): packets for the QP that could not be
 * processed when they were sent (its executor was owned, or its own thread polls and runs it). Many
 * producers (peer QPs, links), one consumer (the QP's executor).
 *
 * <p>A slot is two cache lines of a {@code long[]} ({@link #STRIDE} words): the ring's sequence word, the
 * header fields packed into seven words, and either a payload of up to {@link #INLINE_BYTES} bytes or the
 * atomic operands. So the receiving thread of a small SEND or of an ACK reads the two lines the sender wrote
 * and nothing else of the sender's (the hand-off is one cross-core transfer, not one per object: the earlier
 * slots were {@link Packet} objects with their payload lists and buffers, six or more lines that the
 * consumer read one after the other). Larger payloads are held beside the slot: a snapshot of the pieces of
 * a stable payload (the bytes stay in the sender's memory when the sender keeps them until the packet is
 * answered, {@link Packet#payloadStable}: RC requests, READ responses), else (UC, UD, whose WQEs complete
 * when sent; a RoCE receive buffer) a copy in the slot's own buffer. The GIDs are kept as references beside
 * the slot, stored only when they change (they rarely do), so their line stays shared. Thread-safe as
 * described.
 */
final class Inbox {
    /** Words per slot: two cache lines. */
    static final int STRIDE = 16;
    /** The first word of a slot's payload (or atomic operands). */
    private static final int DATA = 8;
    /** Payloads up to this size travel in the slot itself, stable or not. */
    static final int INLINE_BYTES = (STRIDE - DATA) * Long.BYTES;

    // word 1: opcode | flags | hop limit | traffic class | P_Key
    private static final long SOLICITED = 1L << 8;
    private static final long ACK_REQ = 1L << 9;
    private static final long ATOMIC = 1L << 10;
    private static final int MODE_SHIFT = 11;
    private static final int NONE = 0;
    private static final int INLINE = 1;
    private static final int HELD = 2;
    private static final int BROKEN = 3;

    /**
     * One ring of slots. The inbox starts with a small one and moves to one twice as large when a producer finds
     * it full, up to the inbox's maximum: a queue pair's packets pass through the slots one after the other, so a
     * ring of 512 slots (64 KiB) moved its traffic through 64 KiB of lines, most of them out of the cache by the
     * time they came round again, where a QP with a few packets in flight needs a few lines (docs/benchmarks.md,
     * session 8: memory per QP and the 1,000-QP rate).
     */
    private static final class Ring {
        final SlotRing ring;
        final long[] words;
        /** The slots as bytes, for payloads copied in and read out. */
        final MemorySegment bytes;
        /** Per slot: source and destination GID (stride 2). */
        final Object[] gids;
        /** Per slot: where a payload too large for the slot is held, made on first use. */
        final Held[] held;
        /** The inbox's packets before this ring's first: its consumer position plus this is the inbox's. */
        final long base;
        /** The ring the producers moved to when this one was closed (set before {@link #tail} points at it). */
        volatile Ring next;

        Ring(int capacity, long base) {
            this.words = new long[capacity * STRIDE];
            this.ring = SlotRing.mpsc(words, STRIDE);
            this.bytes = MemorySegment.ofArray(words);
            this.gids = new Object[capacity * 2];
            this.held = new Held[capacity];
            this.base = base;
        }

        /** {@return whether a producer claimed a slot of this ring that the consumer has not taken} */
        boolean claimedAny() {
            return ring.producerPosition() != ring.consumerPosition();
        }
    }

    private final int maxSlots;
    /** The ring producers claim in (it only moves to a larger one). */
    private volatile Ring tail;
    /** The ring the consumer takes from: {@link #tail}, or an older one it has not emptied yet. */
    private volatile Ring head;
    /** The consumer's view of the slot it is processing (valid from {@link #packet} to {@link #done}). */
    private final Packet rx = new Packet();
    private final Sgl rxInline = new Sgl(1);
    /** The sequence {@link #rx} holds (decoded by {@link #peek}), or -1; in ring {@link #rxRing}. */
    private long rxSeq = -1;
    private Ring rxRing;
    /** The ring of the slot the consumer polled last ({@link #packet}, {@link #done}). */
    private Ring polled;

    /** A large payload beside its slot. */
    private static final class Held {
        final Sgl sgl = new Sgl(1);
        MemorySegment buf;
    }

    /** @param capacity slots, a power of two: a fixed-size inbox */
    Inbox(int capacity) {
        this(capacity, capacity);
    }

    /**
     * @param first slots of the first ring, a power of two, at least 2
     * @param max   slots at most, a power of two not below {@code first}: a producer that finds a ring of this
     *              size full loses its packet
     */
    Inbox(int first, int max) {
        if (first < 2 || Integer.bitCount(first) != 1 || Integer.bitCount(max) != 1 || max < first) {
            throw new IllegalArgumentException("first=" + first + ", max=" + max + " (powers of two, 2 <= first <= max)");
        }
        this.maxSlots = max;
        Ring r = new Ring(first, 0);
        this.tail = r;
        this.head = r;
    }

    /**
     * Moves the producers from a full ring to one twice as large (any producer; rare: at most log2(max/first)
     * times in an inbox's life). The full ring is closed first, so no claim lands in it afterwards and the
     * consumer empties it before it moves on: each producer's packets stay in the order it sent them.
     */
    private void grow(Ring full) {
        synchronized (this) {
            if (tail != full) {
                return; // another producer grew it
            }
            long end = full.ring.close();
            Ring n = new Ring(full.ring.capacity() * 2, full.base + end);
            full.next = n;
            tail = n;
        }
    }

    /**
     * Copies a packet into the next slot (any thread).
     *
     * @param p the packet, valid during the call
     * @return false when the ring is full (the packet is lost: RC retransmits it)
     * @throws IllegalStateException or IndexOutOfBoundsException if the payload cannot be read (memory closed
     *         under the sender); the slot is then published empty of payload and dropped by the consumer
     */
    boolean offer(Packet p) {
        Ring r;
        long s;
        for (;;) {
            r = tail;
            s = r.ring.claim();
            if (s >= 0) {
                break;
            }
            if (s == SlotRing.CLOSED_RING) {
                continue; // another producer moved to a larger ring: claim there
            }
            if (r.ring.capacity() >= maxSlots) {
                return false;
            }
            grow(r);
        }
        SlotRing ring = r.ring;
        long[] w = r.words;
        int b = ring.base(s);
        int i = ring.index(s);
        long h = (p.opcode & 0xFF) | (p.solicited ? SOLICITED : 0) | (p.ackReq ? ACK_REQ : 0)
                | (long) (p.hopLimit & 0xFF) << 16 | (long) (p.trafficClass & 0xFF) << 24 | (long) (p.pkey & 0xFFFF) << 32;
        boolean atomic = (p.swapAdd | p.compare | p.origValue) != 0;
        if (atomic) {
            h |= ATOMIC;
            w[b + DATA] = p.swapAdd;
            w[b + DATA + 1] = p.compare;
            w[b + DATA + 2] = p.origValue;
        }
        w[b + 2] = (p.destQpn & 0xFFFF_FFFFL) | (long) p.psn << 32;
        w[b + 3] = p.va;
        w[b + 4] = (p.rkey & 0xFFFF_FFFFL) | (long) p.dmaLen << 32;
        w[b + 5] = (p.imm & 0xFFFF_FFFFL) | (long) p.msn << 32;
        w[b + 6] = (p.qkey & 0xFFFF_FFFFL) | (long) p.srcQpn << 32;
        int len = p.payloadLen;
        w[b + 7] = (Math.max(0, len) & 0xFFFF_FFFFL) | (long) p.syndrome << 32;
        int g = 2 * i;
        Object[] gs = r.gids;
        if (gs[g] != p.sgid) {
            gs[g] = p.sgid;
        }
        if (gs[g + 1] != p.dgid) {
            gs[g + 1] = p.dgid;
        }
        int mode;
        try {
            mode = holdPayload(r, p, len, atomic, b, i);
        } catch (RuntimeException e) {
            w[b + 1] = h | (long) BROKEN << MODE_SHIFT; // published, and dropped by the consumer
            ring.publish(s);
            throw e;
        }
        w[b + 1] = h | (long) mode << MODE_SHIFT;
        ring.publish(s);
        return true;
    }

    private static int holdPayload(Ring r, Packet p, int len, boolean atomic, int b, int i) {
        if (len <= 0 || p.payload == null) {
            return NONE;
        }
        if (len <= INLINE_BYTES && !atomic) {
            Sgl.transfer(p.payload, p.payloadOff, r.bytes, (long) (b + DATA) * Long.BYTES, len);
            return INLINE;
        }
        Held x = r.held[i];
        if (x == null) {
            x = r.held[i] = new Held(); // once per slot; the ring publishes it with the sequence
        }
        if (p.payloadStable) {
            x.sgl.setRange(p.payload, p.payloadOff, len);
        } else {
            x.buf = grow(x.buf, len);
            x.sgl.set(x.buf, 0, len);
            Sgl.transfer(p.payload, p.payloadOff, x.sgl, 0, len);
        }
        return HELD;
    }

    /**
     * Takes the oldest packet (the QP's executor only): {@link #packet} gives it, valid until {@link #done}.
     *
     * @return its sequence, or -1 when the ring is empty
     */
    long poll() {
        Ring r = consumerRing();
        polled = r;
        return r.ring.poll();
    }

    /**
     * The ring the consumer takes from: it moves on from a closed ring once every slot claimed in it was taken
     * (a producer that claimed before the close publishes soon; its packet is older than those of the next ring).
     */
    private Ring consumerRing() {
        Ring r = head;
        for (Ring n; (n = r.next) != null && !r.claimedAny(); r = n) {
            head = n;
        }
        return r;
    }

    /**
     * The oldest packet, left in the ring (the QP's executor only: the single consumer).
     *
     * @return it, valid until it is polled and {@link #done}; null when the ring is empty
     */
    Packet peek() {
        Ring r = consumerRing();
        if (r.ring.isEmpty()) {
            return null;
        }
        return decode(r, r.ring.consumerPosition());
    }

    /**
     * The packet in a slot taken by {@link #poll} (or the oldest, for {@link #peek}), decoded into the consumer's
     * packet object (the QP's executor only; one slot at a time).
     *
     * @param seq from {@link #poll}
     * @return the packet, valid until {@link #done}; its payload is stable until then
     */
    Packet packet(long seq) {
        return decode(polled, seq);
    }

    private Packet decode(Ring r, long seq) {
        if (seq == rxSeq && r == rxRing) {
            return rx; // decoded by peek
        }
        rxSeq = seq;
        rxRing = r;
        SlotRing ring = r.ring;
        long[] w = r.words;
        Object[] gids = r.gids;
        int b = ring.base(seq);
        int i = ring.index(seq);
        Packet p = rx;
        long h = w[b + 1];
        p.opcode = (int) h & 0xFF;
        p.solicited = (h & SOLICITED) != 0;
        p.ackReq = (h & ACK_REQ) != 0;
        p.hopLimit = (int) (h >>> 16) & 0xFF;
        p.trafficClass = (int) (h >>> 24) & 0xFF;
        p.pkey = (int) (h >>> 32) & 0xFFFF;
        long x = w[b + 2];
        p.destQpn = (int) x;
        p.psn = (int) (x >>> 32);
        p.va = w[b + 3];
        x = w[b + 4];
        p.rkey = (int) x;
        p.dmaLen = (int) (x >>> 32);
        x = w[b + 5];
        p.imm = (int) x;
        p.msn = (int) (x >>> 32);
        x = w[b + 6];
        p.qkey = (int) x;
        p.srcQpn = (int) (x >>> 32);
        x = w[b + 7];
        int len = (int) x;
        p.syndrome = (int) (x >>> 32);
        if ((h & ATOMIC) != 0) {
            p.swapAdd = w[b + DATA];
            p.compare = w[b + DATA + 1];
            p.origValue = w[b + DATA + 2];
        } else {
            p.swapAdd = 0;
            p.compare = 0;
            p.origValue = 0;
        }
        p.setRoute(null, (Gid) gids[2 * i], (Gid) gids[2 * i + 1]);
        if (p.sender != null) {
            p.sender = null;
        }
        p.payloadStable = true;
        p.payloadOff = 0;
        p.payloadLen = len;
        switch ((int) (h >>> MODE_SHIFT) & 3) {
            case INLINE -> {
                rxInline.set(r.bytes, (long) (b + DATA) * Long.BYTES, len);
                if (p.payload != rxInline) {
                    p.payload = rxInline;
                }
            }
            case HELD -> p.payload = r.held[i].sgl;
            case BROKEN -> {
                p.payload = null;
                p.payloadLen = -1; // the payload could not be copied: the consumer drops it
            }
            default -> p.payload = null;
        }
        return p;
    }

    /**
     * Gives a slot taken by {@link #poll} back to the producers.
     *
     * @param seq from {@link #poll}
     */
    void done(long seq) {
        rxSeq = -1;
        rxRing = null;
        if (rx.payload != rxInline) {
            rx.payload = null; // no reference to the sender's memory outlives the packet (the slot's own may)
        }
        polled.ring.release(seq);
    }

    /**
     * {@return whether no packet waits (a hint when peers are producing)} The owner's check before a drain, on
     * every packet it sends or receives: it reads the slot at the consumer's head (the line the producer wrote,
     * which the consumer reads anyway to take the packet), not the producers' index, whose line a check would
     * pull away from the next producer's claim on every packet between two threads (the two-thread SEND latency
     * rose from about 0.8 to 1.2 µs when it did: docs/benchmarks.md, session 8). While an older ring still
     * holds packets, or has just been emptied, it answers false: the caller drains, which moves on.
     */
    boolean isEmpty() {
        Ring r = head;
        return r.next == null && r.ring.isEmpty();
    }

    /**
     * {@return whether a producer has claimed a slot the consumer has not taken, published or not yet} For a
     * Dekker with a producer, whose claim (a CAS) is ordered before its later loads where its publish is not: the
     * rings are read from the consumer's to the producers' through their links, which a grower writes before the
     * producers see the new ring.
     */
    boolean claimedAny() {
        for (Ring r = head; r != null; r = r.next) {
            if (r.claimedAny()) {
                return true;
            }
        }
        return false;
    }

    /** @return the number of packets waiting (a hint) */
    int size() {
        int n = 0;
        for (Ring r = head; r != null; r = r.next) {
            n += r.ring.size();
        }
        return n;
    }

    /** @return the packets taken so far (the consumer position: a hint for other threads) */
    long consumed() {
        Ring r = head;
        return r.base + r.ring.consumerPosition();
    }

    /** @return the slots of the ring producers claim in now (it grows up to the maximum given at creation) */
    int capacity() {
        return tail.ring.capacity();
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
