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
    /** The CQs this thread polls (receiver-driven delivery hands their QPs' packets to it: SoftCq.pollerActive). */
    private final SoftCq[] polled = new SoftCq[8];
    private int polledCount;

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
                    AckFlush.flushBurstAck(qp);
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
     * A RoCE QP's coalesced ACK waits for the end of this burst ({@link AckFlush#flushBurstAck}).
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
     * This thread polls {@code cq} (SoftCq records it as the CQ's active poller): remembered, so that when the
     * thread goes to wait on a completion channel it stops being the poller of every CQ at once
     * ({@link #stopPolling}). Called when the CQ records the activity, at most every few microseconds.
     *
     * @param cq the CQ
     */
    void polling(SoftCq cq) {
        for (int i = 0; i < polledCount; i++) {
            if (polled[i] == cq) {
                return;
            }
        }
        if (polledCount == polled.length) {
            // bounded: forget the CQs this thread is no longer the poller of (another took over, or it closed),
            // then the oldest
            Thread self = Thread.currentThread();
            int n = 0;
            for (int i = 0; i < polledCount; i++) {
                SoftCq c = polled[i];
                if (!c.closed && c.polledBy(self)) {
                    polled[n++] = c;
                }
            }
            if (n == polled.length) {
                System.arraycopy(polled, 1, polled, 0, n - 1);
                n--;
            }
            for (int i = n; i < polledCount; i++) {
                polled[i] = null;
            }
            polledCount = n;
        }
        polled[polledCount++] = cq;
    }

    /**
     * The thread stops polling (it waits on a completion channel): senders stop leaving packets for it, and it
     * runs those they left before they saw it go (docs/engine.md, "Active poller"). The caller owns no executor.
     *
     * @return whether it ran any QP
     */
    boolean stopPolling() {
        Thread self = Thread.currentThread();
        for (int i = 0; i < polledCount; i++) {
            polled[i].pollerGone(self);
        }
        return runHandedOver();
    }

    /**
     * Runs what senders left in the inboxes of the QPs of the CQs this thread polled until {@link #stopPolling}
     * (a packet whose sender saw the thread as the poller just before it stopped). The caller owns no executor.
     *
     * @return whether it ran any QP
     */
    boolean runHandedOver() {
        boolean ran = false;
        for (int i = 0; i < polledCount; i++) {
            ran |= polled[i].runStragglers();
        }
        return ran;
    }

    /** The thread's wait ended: the CQs it polls are remembered again as it polls them. */
    void forgetPolled() {
        for (int i = 0; i < polledCount; i++) {
            polled[i] = null;
        }
        polledCount = 0;
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
