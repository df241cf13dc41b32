// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

/**
 * What one thread's current piece of engine work has left to do when it ends (docs/engine.md): the RoCE
 * links it queued packets on (they leave with one {@code sendmmsg} per link when the outermost burst ends,
 * so a receive batch's ACKs or a post list's packets share a system call) and whether ACKs it makes may wait
 * for the thread's next verbs call (a thread busy-polling a RoCE device: {@link AckCoalescer.Timing}).
 * Entered by the engine's entry points (posting, polling, modify, the receive and timer agents); nested
 * entries count. Confined to its thread.
 */
final class Burst {
    private static final ThreadLocal<Burst> CURRENT = ThreadLocal.withInitial(Burst::new);

    private int depth;
    /** Whether ACKs made in this burst may wait for the thread's next verbs call (RoCE busy-poll receive). */
    boolean deferAcks;
    private RoceLink[] dirty = new RoceLink[2];
    private int dirtyCount;
    private SoftQp[] acks = new SoftQp[4];
    private int ackCount;

    private Burst() {
    }

    /**
     * Starts (or nests) this thread's burst.
     *
     * @return the burst, to {@link #exit} in a finally block
     */
    static Burst enter() {
        Burst b = CURRENT.get();
        b.depth++;
        return b;
    }

    /** @return this thread's burst (depth 0 when the thread is outside any) */
    static Burst current() {
        return CURRENT.get();
    }

    /** @return whether the thread is inside a burst, so queued packets may wait for its end */
    boolean active() {
        return depth > 0;
    }

    /**
     * Ends a level of the burst; the outermost end sends the ACKs its QPs coalesced, then what the links queued
     * for it. It must be called owning no executor (the ACKs' QPs are taken in turn).
     */
    void exit() {
        if (depth == 1) {
            deferAcks = false;
            try {
                for (int i = 0; i < ackCount; i++) {
                    SoftQp qp = acks[i];
                    acks[i] = null;
                    qp.flushBurstAck();
                }
            } finally {
                ackCount = 0;
                depth = 0;
                flush();
            }
            return;
        }
        depth--;
    }

    /**
     * A RoCE QP's coalesced ACK waits for the end of this burst ({@link SoftQp#flushBurstAck}).
     *
     * @param qp the QP, listed once (its flag says so)
     */
    void ackAtEnd(SoftQp qp) {
        if (ackCount == acks.length) {
            acks = java.util.Arrays.copyOf(acks, acks.length * 2);
        }
        acks[ackCount++] = qp;
    }

    /**
     * A link queued a packet for this burst.
     *
     * @param link the link, flushed when the burst ends
     */
    void queued(RoceLink link) {
        for (int i = 0; i < dirtyCount; i++) {
            if (dirty[i] == link) {
                return;
            }
        }
        if (dirtyCount == dirty.length) {
            dirty = java.util.Arrays.copyOf(dirty, dirty.length * 2);
        }
        dirty[dirtyCount++] = link;
    }

    private void flush() {
        while (dirtyCount > 0) {
            RoceLink l = dirty[--dirtyCount];
            dirty[dirtyCount] = null;
            l.flush(); // only system calls: it queues nothing new
        }
    }
}
