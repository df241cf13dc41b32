// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

import org.rdma4j.common.concurrent.ArrayQueue;
import org.rdma4j.common.concurrent.SlotRing;

import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.AsyncEventType;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcOpcode;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;

/**
 * A completion queue (docs/engine.md, "Rings"): completions as fixed 64-byte slots of a {@code long[]}, one
 * cache line each, sequenced by a {@link SlotRing} (MPMC: the executors of the QPs completing here produce,
 * any number of pollers consume). A poller reads one line per completion and an empty poll one line, the head
 * slot's sequence word; a producer reads the consumers' index only when the ring looks full. Nothing is
 * allocated per completion. Thread-safe.
 */
final class SoftCq extends SoftResource implements CompletionQueue {
    private static final int ARM_NONE = 0;
    private static final int ARM_ANY = 1;
    private static final int ARM_SOLICITED = 2;
    /** Words per completion slot: sequence, wr_id, status|opcode|flags, byte_len|imm, qp_num|src_qp, padding. */
    private static final int STRIDE = 8;
    private static final VarHandle ARMED;
    private static final WcStatus[] STATUS = WcStatus.values();
    private static final WcOpcode[] OPCODE = WcOpcode.values();

    static {
        try {
            ARMED = MethodHandles.lookup().findVarHandle(SoftCq.class, "armed", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** One generation of the ring: replaced whole by {@link #resize}. */
    private static final class Ring {
        final long[] slots;
        final SlotRing ring;
        final int capacity;
        /** Set once a resize has taken what was left: pollers then move to the new ring. */
        volatile boolean retired;

        Ring(int cqe) {
            // a ring has at least two slots (SlotRing); a CQ of one entry claims up to its logical capacity
            this.slots = new long[Bytes.ceilPow2(Math.max(2, cqe)) * STRIDE];
            this.ring = SlotRing.mpmc(slots, STRIDE);
            this.capacity = cqe;
        }
    }

    final SoftContext ctx;
    private final SoftChannel channel;
    private volatile Ring current;
    @SuppressWarnings("unused") // through ARMED
    private volatile int armed;
    final AtomicInteger unackedEvents = new AtomicInteger();
    /** The QPs completing on this CQ (their executors are the producers), for {@link #resize}. */
    private final CopyOnWriteArrayList<SoftQp> qps = new CopyOnWriteArrayList<>();

    SoftCq(SoftContext ctx, int cqe, SoftChannel channel) {
        this.ctx = ctx;
        this.channel = channel;
        this.current = new Ring(cqe);
    }

    @Override
    String describe() {
        return "CQ(" + current.capacity + ")";
    }

    @Override
    public int capacity() {
        return current.capacity;
    }

    @Override
    public CompletionChannel channel() {
        return channel;
    }

    /** A QP completes here from now on. */
    void attach(SoftQp qp) {
        qps.addIfAbsent(qp);
        attached = qps.toArray(SoftQp[]::new);
    }

    /** A QP went. */
    void detach(SoftQp qp) {
        qps.remove(qp);
        attached = qps.toArray(SoftQp[]::new);
    }

    // ------------------------------------------------------------------ receiver-driven delivery (docs/engine.md)

    /** A poller is active for this long after its last empty poll: senders leave it its QPs' packets. */
    static final long ACTIVE_NS = 50_000;
    /** Empty polls record the time at most this often, so the field's cache line stays shared with senders. */
    private static final long ACTIVE_RESOLUTION_NS = 10_000;
    /** At most this many QPs are looked at on an empty poll; a CQ with more gets a ready list. */
    private static final int SCAN_QPS = 4;

    /** The QPs on this CQ, copied on change: an empty poll looks at their inboxes. */
    private volatile SoftQp[] attached = new SoftQp[0];
    /**
     * When a thread last polled this CQ and found it empty (System.nanoTime), 0 when nobody polls it (never, or
     * its poller armed it for a completion channel and blocks).
     */
    private volatile long lastEmptyPollNs;
    /** The thread of that poll: a sender on the same thread gains nothing by leaving it the work. */
    private volatile Thread lastPoller;
    /** QPs with packets handed to this CQ's poller, for a CQ with more than {@link #SCAN_QPS} QPs. */
    private final ArrayQueue<SoftQp> ready = ArrayQueue.mpmc(1024);

    /**
     * @param nowNs System.nanoTime, or 0 to read it only if needed
     * @return whether another thread than the caller polls this CQ now (a sender may then leave the work of the
     *         CQ's QPs to it)
     */
    boolean pollerActive(long nowNs) {
        long last = lastEmptyPollNs;
        if (last == 0 || lastPoller == Thread.currentThread()) {
            return false;
        }
        return (nowNs != 0 ? nowNs : System.nanoTime()) - last < ACTIVE_NS;
    }

    /** The poller stops polling (it arms the CQ and blocks on the channel): senders deliver on their threads. */
    void pollerGone() {
        if (lastEmptyPollNs != 0) {
            lastEmptyPollNs = 0;
        }
    }

    /** {@return whether {@code t} is the thread that last recorded a poll of this CQ (a hint)} */
    boolean polledBy(Thread t) {
        return lastPoller == t;
    }

    /**
     * Thread {@code t} stops polling (it waits on a completion channel, Burst.stopPolling): if it was this CQ's
     * poller, senders deliver on their own threads from now on.
     *
     * @param t the thread
     */
    void pollerGone(Thread t) {
        if (lastPoller == t) {
            pollerGone();
        }
    }

    /**
     * Runs the QPs whose packets senders left to this CQ's poller, recording no activity (a poller that stopped
     * takes what was left to it before senders saw it go). The caller owns no executor.
     *
     * @return whether any QP was run
     */
    boolean runStragglers() {
        boolean ran = false;
        SoftQp[] a = attached;
        if (a.length <= SCAN_QPS) {
            for (SoftQp q : a) {
                if (!q.inbox.isEmpty()) {
                    ran |= q.runHandedOver();
                }
            }
            return ran;
        }
        for (int i = 0; i < 64; i++) {
            SoftQp q = ready.poll();
            if (q == null) {
                break;
            }
            q.readyListed = false;
            ran |= q.runHandedOver();
        }
        return ran;
    }

    /**
     * A sender left {@code qp} a packet for this CQ's poller: a CQ with few QPs finds it by looking at their
     * inboxes, one with many through its ready list.
     *
     * @return false if the ready list is full (the sender then runs the QP itself)
     */
    boolean handedOver(SoftQp qp) {
        if (attached.length <= SCAN_QPS) {
            return true;
        }
        if (qp.readyListed || !SoftQp.READY_LISTED.compareAndSet(qp, false, true)) {
            return true; // listed already, on this CQ or on its other one: a poller will take it
        }
        if (ready.offer(qp)) {
            return true;
        }
        qp.readyListed = false;
        return false;
    }

    /**
     * An empty poll: records the poller's activity and runs the QPs whose packets senders left to it.
     *
     * @return whether any QP was run (a completion may be there now)
     */
    private boolean runHandedOver() {
        long now = System.nanoTime();
        if (now - lastEmptyPollNs > ACTIVE_RESOLUTION_NS) {
            Thread self = Thread.currentThread();
            if (lastPoller != self) {
                lastPoller = self;
            }
            lastEmptyPollNs = now;
            Burst.current().polling(this); // so that a wait on a completion channel ends the activity at once
        }
        return runStragglers();
    }

    /**
     * Adds a completion. On a full queue the completion is lost and CQ_ERR is raised (rxe_cq_post
     * returns -EBUSY and reports IB_EVENT_CQ_ERR). Called by the owner of the completing QP's executor.
     *
     * @return false on overflow
     */
    boolean post(long wrId, WcStatus status, WcOpcode opcode, int byteLen, int imm, int qpNum, int srcQp,
                 int wcFlags, boolean solicited) {
        Ring r = current;
        long seq = r.ring.claim(r.capacity);
        if (seq < 0) {
            ctx.device.count(SoftCounter.CQ_OVERFLOW);
            ctx.raise(new AsyncEvent(AsyncEventType.CQ_ERR, null, this, null, 0));
            return false;
        }
        long[] w = r.slots;
        int b = r.ring.base(seq);
        // plain stores: the ring's publish is the release store that makes them visible with the sequence
        w[b + 1] = wrId;
        w[b + 2] = status.ordinal() | (long) opcode.ordinal() << 8 | (long) wcFlags << 16;
        w[b + 3] = (byteLen & 0xFFFF_FFFFL) | (long) imm << 32;
        w[b + 4] = (qpNum & 0xFFFF_FFFFL) | (long) srcQp << 32;
        r.ring.publish(seq);
        if (channel == null) {
            return true; // nothing can arm it
        }
        // Dekker with reqNotify, which stores the arm (volatile) and then polls (an acquire load of the slot's
        // sequence): this stores the sequence and then loads the arm. The publish is a release store, which
        // neither the JMM nor x86 orders before a later load (the store may wait in this core's store buffer
        // while the load reads the arm of before), so without the fence both could miss: the poll after arming
        // finds the CQ empty, this post sees it unarmed, no event is raised, and a thread waiting on the channel
        // is never told of the completion (issue 15: the event-driven round trip stopped for 10 s;
        // SoftCqArmRaceTest). With it, one of the two sees the other's store, as rxe's cq_lock orders
        // rxe_cq_post's producer advance against rxe_req_notify_cq's write of cq->notify.
        VarHandle.fullFence();
        int a = armed;
        if (a != ARM_NONE && (a == ARM_ANY || solicited || status != WcStatus.SUCCESS)
                && ARMED.compareAndSet(this, a, ARM_NONE)) {
            channel.push(this); // one event per arm (ibv_req_notify_cq), the waiter woken at once
        }
        return true;
    }

    /** Copies a taken slot into a work completion and gives the slot back. */
    private static void take(Ring r, long seq, WorkCompletion wc) {
        long[] w = r.slots;
        int b = r.ring.base(seq);
        long id = w[b + 1];
        long f = w[b + 2];
        long l = w[b + 3];
        long q = w[b + 4];
        r.ring.release(seq);
        wc.set(id, STATUS[(int) f & 0xFF], OPCODE[(int) (f >>> 8) & 0xFF], 0, (int) l, (int) (l >>> 32), (int) q,
                (int) (q >>> 32), (int) (f >>> 16), 0);
    }

    /**
     * A closed CQ refuses polls, as it refuses {@link #reqNotify}: verbs would touch a destroyed CQ (use
     * after free in ibv_poll_cq), and an empty answer would hide the mistake.
     */
    private void checkPollable() {
        if (closed) {
            throw new VerbsException(Errno.EINVAL, describe() + " is closed: it cannot be polled (closing a CQ"
                    + " drops the completions still in it; poll them before closing)");
        }
    }

    @Override
    public int poll(WorkCompletion[] wcs, int max) {
        checkPollable();
        int n = Math.min(max, wcs.length);
        if (n <= 0) {
            return 0;
        }
        if (current.ring.isEmpty() && (!idle() || current.ring.isEmpty())) {
            return 0;
        }
        Ring r = current;
        int got = 0;
        while (got < n) {
            long seq = r.ring.poll();
            if (seq < 0) {
                if (r.retired) {
                    r = current; // a resize moved the rest to the next ring
                    continue;
                }
                break;
            }
            take(r, seq, wcs[got++]);
        }
        return got;
    }

    @Override
    public boolean poll(WorkCompletion wc) {
        checkPollable();
        if (current.ring.isEmpty() && (!idle() || current.ring.isEmpty())) {
            return false;
        }
        Ring r = current;
        for (;;) {
            long seq = r.ring.poll();
            if (seq >= 0) {
                take(r, seq, wc);
                return true;
            }
            if (!r.retired) {
                return false;
            }
            r = current; // a resize moved the rest to the next ring
        }
    }

    /** What a poll of an empty CQ does: the QPs' handed-over packets, deferred ACKs, the wire (RoCE). */
    private boolean idle() {
        boolean ran = runHandedOver();
        return ctx.device.pollIdle() | ran;
    }

    /** {@return the number of completions queued} */
    int count() {
        return current.ring.size();
    }

    @Override
    public void reqNotify(boolean solicitedOnly) {
        checkNotClosed();
        if (channel == null) {
            throw new VerbsException(Errno.EINVAL, "CQ has no completion channel");
        }
        ARMED.setVolatile(this, solicitedOnly ? ARM_SOLICITED : ARM_ANY);
        // the other half of post's Dekker: the arm is ordered before the caller's next poll, whose empty check is
        // an acquire load (the JMM orders it after a volatile store only through a fence; on x86 HotSpot ends a
        // volatile store with one already, so this adds at most a second fence to the arming path)
        VarHandle.fullFence();
        pollerGone(); // armed: its thread waits for the event, senders run its QPs (the CQE then wakes it)
    }

    @Override
    public void ackEvents(int count) {
        unackedEvents.addAndGet(-count);
    }

    /**
     * {@inheritDoc}
     *
     * <p>The producers are the executors of the QPs on this CQ: they are all taken (in QP-number order, so two
     * resizes cannot deadlock), the completions left are moved to the new ring, the old one is retired, and
     * pollers racing with it take each completion from one ring or the other, once.
     */
    @Override
    public void resize(int cqe) {
        checkNotClosed();
        if (cqe < 1 || cqe > SoftDevice.MAX_CQE) {
            throw new VerbsException(Errno.EINVAL, "cqe=" + cqe + " (expected 1.." + SoftDevice.MAX_CQE + ")");
        }
        synchronized (this) {
            List<SoftQp> owners = new ArrayList<>(qps);
            owners.sort(Comparator.comparingInt(q -> q.qpn));
            int taken = 0;
            try {
                for (SoftQp q : owners) {
                    q.exec.acquire();
                    taken++;
                }
                Ring old = current;
                if (old.ring.size() > cqe) {
                    throw new VerbsException(Errno.EINVAL, "cqe=" + cqe + " is smaller than the " + old.ring.size()
                            + " completions queued");
                }
                Ring r = new Ring(cqe);
                WorkCompletion wc = new WorkCompletion();
                for (long seq; (seq = old.ring.poll()) >= 0; ) {
                    take(old, seq, wc);
                    long ns = r.ring.claim(r.capacity);
                    long[] w = r.slots;
                    int b = r.ring.base(ns);
                    w[b + 1] = wc.wrId();
                    w[b + 2] = wc.status().ordinal() | (long) wc.opcode().ordinal() << 8 | (long) wc.wcFlags() << 16;
                    w[b + 3] = (wc.byteLen() & 0xFFFF_FFFFL) | (long) wc.immData() << 32;
                    w[b + 4] = (wc.qpNum() & 0xFFFF_FFFFL) | (long) wc.srcQp() << 32;
                    r.ring.publish(ns);
                }
                current = r;
                old.retired = true;
            } finally {
                for (int i = taken - 1; i >= 0; i--) {
                    owners.get(i).exec.release();
                }
            }
        }
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        checkIdle("ibv_destroy_cq");
        closed = true;
        if (channel != null) {
            channel.cqClosed(this);
        }
        ctx.children.remove(this);
    }
}
