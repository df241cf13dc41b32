// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.ScatterGatherEntry;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WrOpcode;

/**
 * A queue pair of the software device: attributes, the state machine, the send queue and the
 * receive queue. The protocol work is done by its {@link Requester}, {@link Responder} and
 * {@link Completer} on the QP's own {@link QpExecutor} (docs/engine.md). Thread-safe.
 *
 * <p>This class holds the QP's identity, attributes and queues, and the verbs entry points; its other roles
 * are static methods taking the QP, each class named for the thread that runs it: {@link QpDelivery} (the
 * delivering thread), {@link OwnerWork} (the owner's duty cycle and burst end), {@link AckFlush} (when the
 * coalesced ACKs leave), {@link QpStateChanges} (RESET, ERR and its flushes; owner), {@link QpTimers} (the
 * owner arms, the timer service reads), {@link QpModify} (modify and query, under the executor) and
 * {@link PostChecks} (a send post's refusals and inline copy, under the executor).
 */
final class SoftQp extends SoftResource implements QueuePair {
    /**
     * The requester's window: rxe RXE_MAX_UNACKED_PSNS (128) unless {@code -Drdma4j.soft.window=N} (1..2^22,
     * within IBA's limit of 2^23 unacknowledged PSNs) asks for another, for measuring how bandwidth depends on
     * it (docs/benchmarks.md).
     */
    static final int MAX_UNACKED_PSNS = Math.clamp(Integer.getInteger("rdma4j.soft.window", 128), 1, 1 << 22);

    final SoftPd pd;
    final SoftDevice device;
    final SoftFabric fabric;
    final QpType type;
    final SoftCq sendCq;
    final SoftCq recvCq;
    final SoftSrq srq;
    final QpCapabilities cap;
    final boolean sqSigAll;
    final int qpn;
    final RecvQueue rq;
    private final Arena arena;
    /** The send queue's inline data, one stride per slot (SendQueue.inlineOff). */
    final MemorySegment inlineArea;

    // Attributes (written by the owner after creation; state is volatile for posting and polling).
    volatile QpState state = QpState.RESET;
    /** modify() is moving the QP to ERR (engine lock): moveToError reports the change as the modify's. */
    boolean modifyingToError;
    int qkey;
    int pkeyIndex;
    int port = 1;
    int accessFlags;
    int destQpn;
    Mtu pathMtu = Mtu.MTU_1024;
    int timeout;
    int retryCnt;
    int rnrRetry;
    int minRnrTimer;
    int maxRdAtomic;
    int maxDestRdAtomic;
    int sqPsn;
    int rqPsn;
    boolean enSqdAsyncNotify;
    AhAttributes av = new AhAttributes();
    Gid dgid = Gid.ZERO;
    Gid sgid;
    /** The device owning dgid, resolved when the address vector is set (null if none yet). */
    SoftDevice peer;

    /** The send queue: at most cap.maxSendWr() outstanding (owner only). */
    final SendQueue sq;

    // Timers: written by the owner; volatile, so the engine agent reads them without the executor. 0 = disarmed.
    volatile long retransDeadline;
    boolean progressSinceArm;
    volatile long rnrDeadline;
    /** Whether the timer service watches this QP (TimerService: set by a CAS, cleared by the service). */
    volatile boolean watched;
    /** The next QP on the timer service's stack of newly watched QPs. */
    SoftQp timerNext;
    /** Set by the engine agent when a deadline passed; the duty cycle runs the timers and clears it. */
    volatile boolean timerDue;
    /** When a paused burst resumes (docs/engine.md, "Pacing"); 0 when none waits. Written by the owner. */
    volatile long paceDeadline;
    /** When the completer checks for a silence worth a loss probe ({@link LossWindow}); 0 when not armed. */
    volatile long probeDeadline;
    /** The gap between this QP's bursts (owner only). */
    final Pacer pacer = new Pacer();

    /** Serialises this QP's protocol work (docs/engine.md). */
    final QpExecutor exec;
    /** Packets handed over while the executor was owned elsewhere (docs/engine.md, "Packets between QPs"). */
    final Inbox inbox;
    /** This QP's counts (owner-written), summed by {@link SoftDevice#counter}. */
    private final long[] counts = new long[SoftCounter.values().length];

    /** WrOpcode.validFor(type), by ordinal, so the requester does not switch per request. */
    private final boolean[] validOps;
    final Requester requester;
    final Completer completer;
    final Responder responder;
    /** The states its roles enter, if traced ({@link StateTrace}; owner only); null when not. */
    StateTrace trace = StateTrace.DEFAULT;
    /** Whether this QP is on the fabric's list of deferred ACKs (set by the owner, cleared by the flusher). */
    volatile boolean ackListed;
    /** The next QP on the fabric's list of deferred ACKs. */
    SoftQp ackNext;

    SoftQp(SoftPd pd, QpInitAttributes init) {
        this(pd, init, false);
    }

    /** @param gsi take QP number 1, the port's GSI QP ({@link SoftGsi}) */
    SoftQp(SoftPd pd, QpInitAttributes init, boolean gsi) {
        this.pd = pd;
        this.device = pd.device;
        this.fabric = device.fabric;
        this.type = init.type();
        QpCapabilities c = init.cap();
        if (!(init.sendCq() instanceof SoftCq scq) || !(init.recvCq() instanceof SoftCq rcq)) {
            throw new VerbsException(Errno.EINVAL, "send_cq and recv_cq must be CQs of this device");
        }
        if (scq.ctx != pd.ctx || rcq.ctx != pd.ctx) {
            throw new VerbsException(Errno.EINVAL, "CQs belong to another context");
        }
        scq.checkNotClosed();
        rcq.checkNotClosed();
        if (c.maxSendWr() < 1 || c.maxSendWr() > SoftDevice.MAX_QP_WR) {
            throw new VerbsException(Errno.EINVAL, "max_send_wr=" + c.maxSendWr() + " (expected 1.." + SoftDevice.MAX_QP_WR + ")");
        }
        if (c.maxSendSge() < 0 || c.maxSendSge() > SoftDevice.MAX_SGE
                || c.maxRecvSge() < 0 || c.maxRecvSge() > SoftDevice.MAX_SGE) {
            throw new VerbsException(Errno.EINVAL, "max_send_sge=" + c.maxSendSge() + ", max_recv_sge=" + c.maxRecvSge()
                    + " (expected 0.." + SoftDevice.MAX_SGE + ")");
        }
        if (c.maxInlineData() < 0 || c.maxInlineData() > SoftDevice.MAX_INLINE) {
            throw new VerbsException(Errno.EINVAL, "max_inline_data=" + c.maxInlineData() + " (expected 0.."
                    + SoftDevice.MAX_INLINE + ")");
        }
        SoftSrq s = null;
        if (init.srq() != null) {
            if (type == QpType.UC) {
                // ibv_create_qp.3: only RC and UD QPs may be attached to an SRQ (rxe_qp_chk_init).
                throw new VerbsException(Errno.EINVAL, "UC QPs cannot use an SRQ");
            }
            if (!(init.srq() instanceof SoftSrq ss) || ss.pd.ctx != pd.ctx) {
                throw new VerbsException(Errno.EINVAL, "SRQ belongs to another context");
            }
            ss.checkNotClosed();
            s = ss;
        } else if (init.cap().maxRecvWr() < 1 || c.maxRecvWr() > SoftDevice.MAX_QP_WR) {
            throw new VerbsException(Errno.EINVAL, "max_recv_wr=" + c.maxRecvWr() + " (expected 1.." + SoftDevice.MAX_QP_WR + ")");
        }
        this.srq = s;
        this.sendCq = scq;
        this.recvCq = rcq;
        this.sqSigAll = init.sqSigAll();
        int sendSge = Math.max(1, c.maxSendSge());
        int recvSge = Math.max(1, c.maxRecvSge());
        this.cap = new QpCapabilities(c.maxSendWr(), s == null ? c.maxRecvWr() : 0, sendSge,
                s == null ? recvSge : 0, c.maxInlineData());
        this.rq = s == null ? new RecvQueue(c.maxRecvWr(), recvSge) : null;
        this.arena = Arena.ofShared();
        int inl = Math.max(8, (c.maxInlineData() + 7) & ~7);
        this.sq = new SendQueue(c.maxSendWr(), sendSge, inl, device.dma);
        this.inlineArea = arena.allocate((long) inl * sq.slots(), 8);
        this.validOps = new boolean[WrOpcode.values().length];
        for (WrOpcode op : WrOpcode.values()) {
            validOps[op.ordinal()] = op.validFor(type);
        }
        this.requester = new Requester(this);
        this.completer = new Completer(this);
        this.responder = new Responder(this);
        this.exec = new QpExecutor(new QpExecutor.Work() {
            @Override
            public void dutyCycle() {
                OwnerWork.dutyCycle(SoftQp.this);
            }

            @Override
            public void endOfBurst() {
                OwnerWork.endOfBurst(SoftQp.this);
            }

            @Override
            public String toString() {
                return SoftQp.this.describe() + " on " + device.name();
            }
        });
        this.inbox = new Inbox(INBOX_FIRST_SLOTS, INBOX_SLOTS);
        this.qpn = gsi ? device.addGsiQp(this) : device.addQp(this);
        device.publishQp(this);
        scq.users.incrementAndGet();
        rcq.users.incrementAndGet();
        scq.attach(this);
        rcq.attach(this);
        if (s != null) {
            s.users.incrementAndGet();
        }
    }

    @Override
    String describe() {
        return type + " QP 0x" + Integer.toHexString(qpn);
    }

    @Override
    public int qpNum() {
        return qpn;
    }

    @Override
    public QpType type() {
        return type;
    }

    @Override
    public ProtectionDomain pd() {
        return pd;
    }

    @Override
    public QpCapabilities cap() {
        return cap;
    }

    @Override
    public QpState state() {
        // Under the executor, as query() is: a packet being processed by another thread (a RoCE receive, a
        // peer's delivery) finishes first, so an error completion is never seen before its state change.
        exec.acquire();
        try {
            return state;
        } finally {
            exec.release();
        }
    }

    // ------------------------------------------------------------------ the executor's work (docs/engine.md)

    /** Inbox slots per QP at most: more than the packets an RC peer can have outstanding both ways (2 x 128 PSNs). */
    static final int INBOX_SLOTS = 512;
    /**
     * Inbox slots a QP starts with (4 KiB); the inbox doubles when a producer finds it full, up to
     * {@link #INBOX_SLOTS} (Inbox, "one ring of slots").
     */
    static final int INBOX_FIRST_SLOTS = 32;

    /**
     * Counts an event of this QP's protocol work. Owner only.
     *
     * @param c the counter
     */
    void count(SoftCounter c) {
        counts[c.ordinal()]++;
        if (c.isDrop()) {
            SoftEvents.drop(device, c);
        }
    }

    /**
     * Counts events of this QP's protocol work. Owner only.
     *
     * @param c the counter
     * @param n how many
     */
    void count(SoftCounter c, long n) {
        counts[c.ordinal()] += n;
    }

    /** @return this QP's share of counter {@code ordinal} (any thread: a count in progress may be missed) */
    long counted(int ordinal) {
        return counts[ordinal];
    }

    /**
     * Sends a packet of this QP's roles through its device's link. Owner only; the packet is valid during
     * the call, its payload as {@link Packet#payloadStable} says.
     *
     * @param p the packet
     */
    void transmit(Packet p) {
        count(SoftCounter.SENT_PKTS);
        if (p.sender != this) {
            p.sender = this; // the roles' own packet objects, sent by this QP only: stored once (a GC barrier)
        }
        device.link.send(device, p);
    }

    /**
     * A role stopped at the pacing bound with more of its operation to send (docs/engine.md, "Pacing"): what the
     * link holds leaves now, and the QP resumes after the pacer's gap, at once if there is none (the next duty
     * cycle of this owner, after what the inbox holds). Owner only.
     */
    void pauseBurst() {
        count(SoftCounter.PACED_BURSTS);
        device.link.flush();
        long now = fabric.clock.nanoTime();
        long gap = pacer.gap(now);
        if (gap == 0) {
            exec.markPending();
            return;
        }
        paceDeadline = now + gap;
        fabric.timers.watch(this);
    }

    /** A paused burst goes on in the next duty cycle, whatever its gap (owner only). */
    void resumeBurstNow() {
        paceDeadline = 0;
        exec.markPending();
    }

    /**
     * Whether this thread owns the executor on behalf of a sender's burst without running this QP's work: the
     * sender delivers its next packets here directly, with no lock operation per packet (owner only).
     */
    final OwnerWork.OwnerState own = new OwnerWork.OwnerState();

    /**
     * A packet for this QP from a link (the dispatcher checked its transport and addresses): processed now on
     * this thread if the executor is free and nothing waits before it, else copied into the inbox for the
     * owner ({@link QpDelivery#deliver}). Never waits, so a thread that owns another QP's executor may deliver.
     *
     * @param p the packet, valid during the call
     */
    void deliver(Packet p) {
        QpDelivery.deliver(this, p);
    }

    /** Processes what the inbox holds (at most one ring's worth: {@link OwnerWork#drainInbox}). Owner only. */
    void drainInbox() {
        OwnerWork.drainInbox(this);
    }

    /** Whether the timer service watches this QP's handed-over packets (TimerService.handedOver). */
    volatile boolean handedWatched;
    /** The next QP on the timer service's stack of handed-over QPs. */
    SoftQp handedNext;
    /** The inbox's consumer position at the timer service's last check (its thread only). */
    long handedSeen;

    /** Whether this QP is on a CQ's ready list (SoftCq.handedOver; set by CAS, cleared by the poller). */
    volatile boolean readyListed;
    static final java.lang.invoke.VarHandle READY_LISTED;

    static {
        try {
            READY_LISTED = java.lang.invoke.MethodHandles.lookup().findVarHandle(SoftQp.class, "readyListed",
                    boolean.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /**
     * A poller of one of this QP's CQs (or the engine agent) runs what senders left in the inbox, if nobody owns
     * the executor (an owner runs it before it lets go). The caller owns no executor.
     *
     * @return whether this thread ran the QP
     */
    boolean runHandedOver() {
        return exec.tryRun();
    }

    /** {@return whether the QP's transport has this operation (rxe next_opcode finds an opcode for it)} */
    boolean hasOpcode(WrOpcode op) {
        return validOps[op.ordinal()];
    }

    /** Bytes per packet on this QP's path: the path MTU on a wire, unlimited in-process. */
    int payloadMax() {
        return type == QpType.UD ? Integer.MAX_VALUE : device.onWire() ? pathMtu.bytes() : fabric.maxPayload(pathMtu.bytes());
    }

    // ------------------------------------------------------------------ modify / query

    @Override
    public void modify(QpAttributes a) {
        checkNotClosed();
        Burst b = Burst.enter();
        exec.acquire();
        try {
            QpModify.modify(this, a);
        } finally {
            exec.release();
            b.exit();
        }
    }

    @Override
    public QpAttributes query() {
        checkNotClosed();
        exec.acquire();
        try {
            return QpModify.query(this);
        } finally {
            exec.release();
        }
    }

    // ------------------------------------------------------------------ state changes (owner: QpStateChanges)

    /** Moves to ERR, flushing the queues (QpStateChanges.moveToError). Owner only. */
    void moveToError() {
        QpStateChanges.moveToError(this);
    }

    /** Completes every outstanding send with WR_FLUSH_ERR. Owner only. */
    void flushSendQueue() {
        QpStateChanges.flushSendQueue(this);
    }

    /**
     * Completes the oldest outstanding send WQE (QpStateChanges.completeSend). Owner only.
     *
     * @param w its slot
     * @param status the completion's status
     */
    void completeSend(int w, WcStatus status) {
        QpStateChanges.completeSend(this, w, status);
    }

    /** A receive completion was lost to a full CQ: to ERR (QpStateChanges.overflowed). Owner only. */
    void overflowed() {
        QpStateChanges.overflowed(this);
    }

    /** Raises SQ_DRAINED if it is due (QpStateChanges.maybeSqDrained). Owner only. */
    void maybeSqDrained() {
        QpStateChanges.maybeSqDrained(this);
    }

    // ------------------------------------------------------------------ timers (owner; the service reads deadlines: QpTimers)

    /**
     * A response arrived since the retransmit timer was armed (the completer's rxe behaviour). Stored only when
     * it changes: the timer stays armed across messages, so the flag is true nearly always, and a store per
     * response would take its cache line from the senders that read the fields beside it.
     */
    void progressMade() {
        if (!progressSinceArm) {
            progressSinceArm = true;
        }
    }

    /** Arms the retransmit timer if it is not (QpTimers.armRetransmit). Owner only. */
    void armRetransmit() {
        QpTimers.armRetransmit(this);
    }

    /**
     * Arms the RNR timer (QpTimers.armRnr). Owner only.
     *
     * @param delayNs the RNR NAK's delay
     */
    void armRnr(long delayNs) {
        QpTimers.armRnr(this, delayNs);
    }

    /**
     * Arms the loss probe's check (QpTimers.armProbe). Owner only.
     *
     * @param deadlineNs when
     */
    void armProbe(long deadlineNs) {
        QpTimers.armProbe(this, deadlineNs);
    }

    // ------------------------------------------------------------------ posting

    @Override
    public boolean postSend(SendWorkRequest wr) {
        Burst b = Burst.enter();
        try {
            exec.acquire();
            boolean ok;
            try {
                ok = enqueue(wr);
                if (ok) {
                    afterPost();
                }
            } finally {
                exec.release();
            }
            AckFlush.afterVerbsCall(this);
            return ok;
        } finally {
            b.exit();
        }
    }

    @Override
    public int postSend(SendWorkRequest[] wrs, int count) {
        Burst b = Burst.enter();
        try {
            int n = 0;
            exec.acquire();
            try {
                while (n < count && enqueue(wrs[n])) {
                    n++;
                }
                if (n > 0) {
                    afterPost();
                }
            } finally {
                exec.release();
            }
            AckFlush.afterVerbsCall(this);
            return n;
        } finally {
            b.exit();
        }
    }

    /** The protocol work of a post; a failure in it takes this QP to ERR (EngineErrors), the WRs are flushed. */
    private void afterPost() {
        try {
            if (state == QpState.ERR) {
                flushSendQueue();
            } else {
                requester.run();
            }
        } catch (Throwable t) {
            EngineErrors.qpWorkFailed(this, "post", t);
        }
    }

    /** Validates and copies one request into the send queue (rxe validate_send_wr / init_send_wqe). */
    private boolean enqueue(SendWorkRequest wr) {
        if (!PostChecks.validate(this, wr)) {
            return false;
        }
        SendQueue q = sq;
        if (q.isFull()) {
            return PostChecks.sqFull(this, wr);
        }
        int w = q.headSlot();
        q.write(w, wr, sqSigAll || (wr.sendFlags() & SendFlags.SIGNALED) != 0);
        int n = wr.numSge();
        if ((wr.sendFlags() & SendFlags.INLINE) != 0) {
            // the bytes are copied now; the scatter list is not kept (nothing reads it again)
            if (!PostChecks.copyInline(this, w, wr)) {
                return PostChecks.inlineUnreadable(wr);
            }
        } else {
            long total = 0;
            for (int i = 0; i < n; i++) {
                ScatterGatherEntry s = wr.sge(i);
                q.setSge(w, i, s);
                total += s.length();
            }
            q.setLength(w, total);
        }
        q.publish(w);
        wr.postError(null);
        return true;
    }

    /** Refused-post sentence for a full send queue, made once (a full queue may be hit in a loop). */
    String sqFullMessage;

    @Override
    public boolean postRecv(RecvWorkRequest wr) {
        if (srq != null || closed || state == QpState.RESET) {
            // rxe_post_recv: SRQ attached, or QP in RESET => -EINVAL
            wr.postError(Errno.EINVAL, closed ? describe() + " is closed" : srq != null ? describe()
                    + " takes its receives from an SRQ: post them with SharedReceiveQueue.postRecv"
                    : describe() + " is in RESET: receives can be posted from INIT on; modify it to INIT first");
            return false;
        }
        if (!rq.post(wr, this)) {
            return false;
        }
        if (state == QpState.ERR) {
            exec.acquire();
            try {
                if (state == QpState.ERR) {
                    QpStateChanges.flushRecvQueue(this);
                }
            } finally {
                exec.release();
            }
        }
        return true;
    }

    // ------------------------------------------------------------------ multicast

    /** Groups this QP is attached to: its monitor. */
    private final java.util.List<Gid> mcastGroups = new java.util.ArrayList<>(2);

    @Override
    public void attachMcast(Gid mgid, int mlid) {
        checkMcast(mgid, "attach");
        synchronized (mcastGroups) {
            checkNotClosed();
            device.attachMcast(this, mgid);
            if (!mcastGroups.contains(mgid)) {
                mcastGroups.add(mgid);
            }
        }
    }

    @Override
    public void detachMcast(Gid mgid, int mlid) {
        checkMcast(mgid, "detach");
        synchronized (mcastGroups) {
            checkNotClosed();
            device.detachMcast(this, mgid);
            mcastGroups.remove(mgid);
        }
    }

    private void checkMcast(Gid mgid, String what) {
        // ib_attach_mcast / ib_detach_mcast: UD QPs and multicast GIDs only
        if (type != QpType.UD) {
            throw new VerbsException(Errno.EINVAL, "cannot " + what + " multicast on a " + type
                    + " QP: only UD QPs join multicast groups (ib_attach_mcast)");
        }
        if (mgid == null || !mgid.isMulticast()) {
            throw new VerbsException(Errno.EINVAL, mgid + " is not a multicast GID (ff00::/8 or ::ffff:224.0.0.0/4)");
        }
    }

    // ------------------------------------------------------------------ destroy

    @Override
    public void close() {
        if (closed) {
            return;
        }
        synchronized (mcastGroups) {
            if (!mcastGroups.isEmpty()) {
                // ib_destroy_qp_user: a QP with attached groups is busy (ib_attach_mcast raised its usecnt)
                throw new VerbsException(Errno.EBUSY, "QP " + qpn + " is still attached to multicast group(s) "
                        + mcastGroups + "; detach them first");
            }
        }
        Burst b = Burst.enter();
        exec.acquire();
        try {
            responder.acks.flushAck(); // acknowledged before it goes, as rxe had at receive time
            closed = true;
            state = QpState.RESET;
            retransDeadline = 0;
            rnrDeadline = 0; // the timer service forgets a closed QP
            paceDeadline = 0;
            probeDeadline = 0;
            device.removeQp(qpn);
            device.retire(this);
        } finally {
            exec.release();
            b.exit();
        }
        sendCq.users.decrementAndGet();
        recvCq.users.decrementAndGet();
        sendCq.detach(this);
        recvCq.detach(this);
        if (srq != null) {
            srq.users.decrementAndGet();
        }
        arena.close();
        pd.children.remove(this);
    }
}
