// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import org.rdma4j.common.Psn;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.AsyncEventType;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttrMask;
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
import org.rdma4j.verbs.WcOpcode;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WrOpcode;

/**
 * A queue pair of the software device: attributes, the state machine, the send queue and the
 * receive queue. The protocol work is done by its {@link Requester}, {@link Responder} and
 * {@link Completer} on the QP's own {@link QpExecutor} (docs/engine.md). Thread-safe.
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
    private boolean modifyingToError;
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
                SoftQp.this.dutyCycle();
            }

            @Override
            public void endOfBurst() {
                SoftQp.this.endOfBurst();
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

    /**
     * Whether a packet must wait in the inbox: a request while the responder still has a READ's responses to
     * send (rxe get_req: RESPST_READ_REPLY comes before the next request). Owner only.
     */
    private boolean waits(Packet p) {
        return p.is(Opcodes.M_REQ) && responder.resources.replying() && !responder.resources.foldsIntoReply(p);
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
    private final OwnerState own = new OwnerState();

    /** Cache-line padding before {@link OwnerState}'s fields (superclass fields are laid out first). */
    @SuppressWarnings("unused")
    private abstract static class OwnerStatePad {
        long p0, p1, p2, p3, p4, p5, p6, p7;
    }

    /**
     * The owner's per-packet bookkeeping, in an object of its own: every sender reads this QP's fields (its
     * executor, inbox, CQs, addresses) on each delivery, and a field the owner writes per packet on one of
     * those cache lines would move the line between the two cores every time (false sharing). Owner only.
     */
    private abstract static class OwnerStateFields extends OwnerStatePad {
        /** The executor is owned on behalf of a sender's burst (see {@link SoftQp#deliver}). */
        boolean heldForSender;
        /** The peer whose executor this QP's owner keeps for the rest of its burst, or null. */
        SoftQp keptPeer;
        /** Whether {@link SoftQp#drainInbox} is running. */
        boolean draining;
        /** Whether this QP's END_OF_BURST ACK is listed on a thread's burst (owner, or that burst's thread). */
        boolean burstAckListed;
    }

    /** Padding after the fields, so the next object allocated does not share their line. */
    @SuppressWarnings("unused")
    private static final class OwnerState extends OwnerStateFields {
        long q0, q1, q2, q3, q4, q5, q6, q7;
    }

    /**
     * A packet for this QP from a link (the dispatcher checked its transport and addresses): processed now on
     * this thread if the executor is free and nothing waits before it, else copied into the inbox for the
     * owner (the payload's pieces, or its bytes when they do not outlive the call: {@link Packet#payloadStable}).
     * Never waits, so a thread that owns another QP's executor may deliver.
     *
     * @param p the packet, valid during the call
     */
    void deliver(Packet p) {
        QpExecutor ex = exec;
        if (p.sender != null && !ex.heldByCurrentThread() && handToPoller(p)) {
            return;
        }
        if (ex.heldByCurrentThread()) {
            if (own.heldForSender) {
                // kept for the burst of the QP that is sending (below): its next packet goes in directly
                own.heldForSender = false;
                try {
                    if (!inbox.isEmpty()) {
                        drainInbox();
                    }
                    if (!inbox.isEmpty() || waits(p)) {
                        handOff(p); // behind a READ reply still being sent, or what waits for it
                        ex.markPending();
                    } else {
                        process(p);
                    }
                } finally {
                    own.heldForSender = true;
                }
                return;
            }
            // this thread is inside this QP's work further up its stack: never re-enter it
            handOff(p);
            ex.markPending();
            return;
        }
        if (ex.tryAcquire()) {
            boolean keep = false;
            try {
                if (!inbox.isEmpty()) {
                    drainInbox(); // what arrived first is processed first
                }
                if (!inbox.isEmpty() || waits(p)) {
                    handOff(p); // behind a READ reply still being sent, or what waits for it
                    ex.markPending();
                    return;
                }
                process(p);
                SoftQp s = p.sender;
                // keep the executor for the rest of the sender's burst (its next packets, the coalesced ACK at
                // its end): one lock operation per burst instead of per packet. The sender lets go of it at its
                // own end of burst (releaseKeptPeer), before it lets go of its own executor.
                if (s != null && s.own.keptPeer == null && s != this && s.exec.heldByCurrentThread()) {
                    s.own.keptPeer = this;
                    own.heldForSender = true;
                    keep = true;
                }
            } finally {
                if (!keep) {
                    ex.release();
                }
            }
            return;
        }
        handOff(p);
        ex.schedule();
    }

    /**
     * Receiver-driven delivery (docs/engine.md): when a thread polls one of this QP's CQs, a packet from an
     * in-process sender is left in the inbox for that poller, which runs this QP on its own thread, so each
     * thread touches its own side's cache lines; the engine agent runs it if the poller stops first.
     *
     * @return whether the packet was handed over
     */
    private boolean handToPoller(Packet p) {
        if (fabric.timers.manual()) {
            // The fallback for a poller that stops before it takes the packet (an RDMA WRITE makes no completion,
            // so an application may well stop polling) is the timer service's check, which on a manual clock runs
            // only when the clock is advanced: a test that expects no timer would wait forever for a WRITE left in
            // the inbox (SoftConcurrencyTest: 1199 of 1200 send completions). On a manual clock the sender runs it.
            return false;
        }
        SoftCq cq = p.is(Opcodes.M_REQ) ? recvCq : sendCq;
        SoftCq other = cq == recvCq ? sendCq : recvCq;
        SoftCq active = cq.pollerActive(0) ? cq : other != cq && other.pollerActive(0) ? other : null;
        if (active == null) {
            return false;
        }
        boolean ok;
        try {
            ok = inbox.offer(p);
        } catch (IllegalStateException | IndexOutOfBoundsException e) {
            device.count(SoftCounter.DROP_HANDOFF_FULL);
            return true;
        }
        if (!ok) {
            return false; // full: the sender runs it (or queues it behind the owner) below
        }
        if (exec.isHeld()) {
            // an owner runs it before it lets go. Only then: the pending flag is a volatile store, whose fence
            // would wait here for the slot's lines to reach this core, and the poller finds the packet by
            // itself (its empty poll looks at the inbox; the timer service's check covers a poller that stops)
            exec.markPending();
        }
        if (!active.handedOver(this)) {
            exec.schedule(); // the ready list is full: run it now
            return true;
        }
        fabric.timers.handedOver(this);
        return true;
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

    /** Lets go of the peer executor kept for this QP's burst (owner only). */
    private void releaseKeptPeer() {
        SoftQp b = own.keptPeer;
        if (b != null) {
            own.keptPeer = null;
            b.own.heldForSender = false;
            b.exec.release(); // runs what waited for it, and its end of burst (the ACK)
        }
    }

    private void handOff(Packet p) {
        boolean ok;
        try {
            ok = inbox.offer(p);
        } catch (IllegalStateException | IndexOutOfBoundsException e) {
            device.count(SoftCounter.DROP_HANDOFF_FULL); // the sender's memory went away: lost, as on a wire
            return;
        }
        if (!ok) {
            device.count(SoftCounter.DROP_HANDOFF_FULL); // RC retransmits; UC/UD lose it, as a full queue would
        }
    }

    /** Runs one packet through the responder or the completer. Owner only. */
    private void process(Packet p) {
        count(SoftCounter.RCVD_PKTS);
        if (p.payloadLen < 0) {
            count(SoftCounter.DROP_MALFORMED); // a slot whose payload could not be copied
            return;
        }
        try {
            if (p.is(Opcodes.M_REQ)) {
                responder.onRequest(p);
            } else {
                completer.onResponse(p);
            }
        } catch (Throwable t) {
            EngineErrors.receiveFailed(device, this, p, t);
        }
    }

    /** Processes what the inbox holds (at most one ring's worth). Owner only. */
    void drainInbox() {
        if (own.draining) {
            return; // called from the processing of a packet of this drain (a response runs the requester)
        }
        own.draining = true;
        try {
            int n = 0;
            long seq;
            Packet next;
            while (n < INBOX_SLOTS && (next = inbox.peek()) != null && !waits(next) && (seq = inbox.poll()) >= 0) {
                try {
                    process(inbox.packet(seq));
                } finally {
                    inbox.done(seq);
                }
                n++;
            }
            if (n == INBOX_SLOTS && !inbox.isEmpty()) {
                exec.markPending(); // the rest in the next cycle, after the others' work
            }
        } finally {
            own.draining = false;
        }
    }


    /** The duty cycle (QpExecutor.Work): a READ reply's next burst, inbox, due timers, requester. Owner only. */
    private void dutyCycle() {
        if (paceDeadline != 0 && responder.resources.replying() && inbox.size() >= INBOX_SLOTS / 2) {
            // Half the inbox waits behind the paused reply: the peer's requester has been resending what we
            // hold (its timer ran out), and once the inbox is full even the re-read that would move the reply
            // is dropped, as are the responses to our own requester that queue behind the waiting requests.
            // The reply goes on now: the gap protects the path from a burst, not at the price of a livelock
            // (SoftLossyRcPropertiesTest.seedsThatOnceFailed, -Pslow seeds -1 and -2; docs/engine.md "Pacing").
            paceDeadline = 0;
            count(SoftCounter.PACE_SPEEDUPS);
        }
        if (paceDeadline == 0 && responder.resources.replying()) {
            try {
                responder.resources.continueReply(); // rxe READ_REPLY: before the requests that wait behind it
            } catch (Throwable t) {
                EngineErrors.qpWorkFailed(this, "READ reply", t);
            }
        }
        if (!inbox.isEmpty()) {
            drainInbox();
        }
        if (timerDue) {
            timerDue = false;
            try {
                onTimers(fabric.clock.nanoTime());
            } catch (Throwable t) {
                EngineErrors.qpWorkFailed(this, "timers", t);
            }
        }
        if (sq.hasWork() && (state == QpState.RTS || state == QpState.SQD || state == QpState.ERR)) {
            try {
                requester.run();
            } catch (Throwable t) {
                EngineErrors.qpWorkFailed(this, "post", t);
            }
        }
    }

    /**
     * The end of the owner's burst on this QP (QpExecutor.Work): the ACK coalescer's END_OF_BURST. In process
     * the ACK leaves now; on a RoCE device inside a thread's {@link Burst} (a receive batch, a post list) it
     * leaves when that burst ends, so the batch's requests share one ACK and the batch's system call. Owner only.
     */
    private void endOfBurst() {
        try {
            flushAckAtEndOfBurst();
        } finally {
            // last: a packet sent above may have kept a peer; letting go of it cannot keep another (the peer's
            // packets to this QP go to its inbox, this QP being owned here), so none outlives this burst
            try {
                releaseKeptPeer();
            } catch (Throwable t) {
                EngineErrors.qpWorkFailed(this, "peer release", t);
            }
        }
    }

    private void flushAckAtEndOfBurst() {
        try {
            if (!responder.acks.ackDueAtEndOfBurst()) {
                return;
            }
            if (device.onWire() && !own.burstAckListed) {
                Burst b = Burst.current();
                if (b.active()) {
                    own.burstAckListed = true;
                    b.ackAtEnd(this);
                    return;
                }
            }
            if (!own.burstAckListed) {
                responder.acks.flushAck();
            }
        } catch (Throwable t) {
            EngineErrors.qpWorkFailed(this, "ACK", t);
        }
    }


    /** The thread's burst ended: its END_OF_BURST ACK leaves. The caller owns no executor. */
    void flushBurstAck() {
        exec.acquire();
        try {
            own.burstAckListed = false;
            if (responder.acks.ackDueAtEndOfBurst()) {
                responder.acks.flushAck();
            }
        } catch (Throwable t) {
            EngineErrors.qpWorkFailed(this, "ACK", t);
        } finally {
            exec.release();
        }
    }

    /** Sends the responder's deferred (NEXT_VERBS_CALL) ACK; the caller owns no executor. */
    void flushDeferredAck() {
        ackListed = false;
        exec.acquire();
        try {
            responder.acks.flushAck();
        } catch (Throwable t) {
            EngineErrors.qpWorkFailed(this, "deferred ACK", t);
        } finally {
            exec.release();
        }
    }

    /** Runs this QP's due timers now, on this thread (the manual clock's advance); the caller owns no executor. */
    void runTimersNow(long nowNs) {
        Burst b = Burst.enter();
        exec.acquire();
        try {
            onTimers(nowNs);
        } catch (Throwable t) {
            EngineErrors.qpWorkFailed(this, "timers", t);
        } finally {
            exec.release();
            b.exit();
        }
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
            modifyLocked(a);
        } finally {
            exec.release();
            b.exit();
        }
    }

    private void modifyLocked(QpAttributes a) {
        // what the responder acknowledged so far goes out before the QP changes (rxe sent it at receive time)
        responder.acks.flushAck();
        int mask = a.mask();
        QpState cur = state;
        if (a.has(QpAttrMask.CUR_STATE) && a.curState() != cur) {
            throw new VerbsException(Errno.EINVAL, "cur_qp_state " + a.curState() + " but QP 0x"
                    + Integer.toHexString(qpn) + " is in " + cur);
        }
        QpState next = a.has(QpAttrMask.STATE) ? a.state() : cur;
        String why = QpTransitions.check(type, cur, next, mask);
        if (why != null) {
            throw new VerbsException(Errno.EINVAL, why);
        }
        checkValues(a);
        // Everything checked: apply (ibv_modify_qp.3: all or nothing).
        if (a.has(QpAttrMask.QKEY)) {
            qkey = a.qkey();
        }
        if (a.has(QpAttrMask.PKEY_INDEX)) {
            pkeyIndex = a.pkeyIndex();
        }
        if (a.has(QpAttrMask.PORT)) {
            port = a.port();
        }
        if (a.has(QpAttrMask.ACCESS_FLAGS)) {
            accessFlags = a.accessFlags();
        }
        if (a.has(QpAttrMask.AV)) {
            av = a.av().copy();
            if (av.dgid() != null) {
                pacer.bind(device.pacePath(av.dgid())); // what the device's QPs learnt of the path there (Pacer)
            }
            dgid = av.dgid();
            sgid = device.gid(av.sgidIndex());
            peer = fabric.deviceFor(dgid);
            if (peer != null) {
                dgid = peer.ownGid(dgid);
            }
        }
        if (a.has(QpAttrMask.PATH_MTU)) {
            pathMtu = a.pathMtu().bytes() > device.activeMtu().bytes() ? device.activeMtu() : a.pathMtu();
        }
        if (a.has(QpAttrMask.DEST_QPN)) {
            destQpn = a.destQpNum() & Psn.MASK;
        }
        if (a.has(QpAttrMask.TIMEOUT)) {
            timeout = a.timeout();
        }
        if (a.has(QpAttrMask.RETRY_CNT)) {
            retryCnt = a.retryCnt();
            completer.retryCnt = retryCnt;
        }
        if (a.has(QpAttrMask.RNR_RETRY)) {
            rnrRetry = a.rnrRetry();
            completer.rnrRetry = rnrRetry;
        }
        if (a.has(QpAttrMask.MIN_RNR_TIMER)) {
            minRnrTimer = a.minRnrTimer();
        }
        if (a.has(QpAttrMask.MAX_QP_RD_ATOMIC)) {
            maxRdAtomic = rdAtomicDepth(a.maxRdAtomic());
            requester.resetDepth();
        }
        if (a.has(QpAttrMask.MAX_DEST_RD_ATOMIC)) {
            maxDestRdAtomic = rdAtomicDepth(a.maxDestRdAtomic());
            // rxe allocates the resources for the rounded value (256 for 129) although the QP keeps 0
            responder.resources.resize(a.maxDestRdAtomic());
        }
        if (a.has(QpAttrMask.RQ_PSN)) {
            rqPsn = a.rqPsn() & Psn.MASK;
            responder.psn = rqPsn;
            responder.held.drop();
        }
        if (a.has(QpAttrMask.SQ_PSN)) {
            sqPsn = a.sqPsn() & Psn.MASK;
            requester.psn = sqPsn;
            requester.highWater = sqPsn;
            completer.psn = sqPsn;
        }
        if (a.has(QpAttrMask.EN_SQD_ASYNC_NOTIFY)) {
            enSqdAsyncNotify = a.enSqdAsyncNotify();
        }
        if (next != cur) {
            SoftEvents.qpState(this, cur, next, "modify");
            switch (next) {
                case RESET -> reset();
                case ERR -> {
                    modifyingToError = true;
                    try {
                        moveToError();
                    } finally {
                        modifyingToError = false;
                    }
                }
                case SQD -> {
                    state = QpState.SQD;
                    maybeSqDrained();
                }
                case RTS -> {
                    state = QpState.RTS;
                    requester.run();
                }
                default -> state = next;
            }
        }
    }

    private void checkValues(QpAttributes a) {
        if (a.has(QpAttrMask.PORT)) {
            device.checkPort(a.port());
        }
        if (a.has(QpAttrMask.PKEY_INDEX) && a.pkeyIndex() != 0) {
            throw new VerbsException(Errno.EINVAL, "pkey_index " + a.pkeyIndex() + " (P_Key table has 1 entry)");
        }
        if (a.has(QpAttrMask.AV)) {
            AhAttributes v = a.av();
            if (v.sgidIndex() < 0 || v.sgidIndex() >= device.gidTableLength()) {
                throw new VerbsException(Errno.EINVAL, "ah_attr.sgid_index " + v.sgidIndex() + " (GID table has "
                        + device.gidTableLength() + " entries)");
            }
            if (v.dgid() == null) {
                throw new VerbsException(Errno.EINVAL, "ah_attr.dgid is null");
            }
        }
        if (a.has(QpAttrMask.TIMEOUT) && (a.timeout() < 0 || a.timeout() > 31)) {
            throw new VerbsException(Errno.EINVAL, "timeout " + a.timeout() + " (expected 0..31)");
        }
        // rxe_qp_chk_attr checks neither retry_cnt, rnr_retry, min_rnr_timer nor max_dest_rd_atomic: any value
        // of their u8 in struct ibv_qp_attr is accepted (seen in the VM: interop/rxe-probes, case modify), and
        // the engine does with it what rxe does (see modifyLocked and the Completer). Only what a u8 cannot
        // hold is refused here.
        checkU8(a, QpAttrMask.RETRY_CNT, a.retryCnt(), "retry_cnt", "7 and above retry forever");
        checkU8(a, QpAttrMask.RNR_RETRY, a.rnrRetry(), "rnr_retry", "7 and above retry forever");
        checkU8(a, QpAttrMask.MIN_RNR_TIMER, a.minRnrTimer(), "min_rnr_timer", "the RNR NAK carries its low 5 bits");
        checkU8(a, QpAttrMask.MAX_DEST_RD_ATOMIC, a.maxDestRdAtomic(), "max_dest_rd_atomic",
                "129 and above round up to 256, which rxe keeps as 0");
        if (a.has(QpAttrMask.MAX_QP_RD_ATOMIC) && (a.maxRdAtomic() < 0 || a.maxRdAtomic() > SoftDevice.MAX_RD_ATOMIC)) {
            // rxe_qp_chk_attr: max_rd_atomic > max_qp_rd_atom => -EINVAL
            throw new VerbsException(Errno.EINVAL, "max_rd_atomic " + a.maxRdAtomic() + " (expected 0.."
                    + SoftDevice.MAX_RD_ATOMIC + ", the device's max_qp_rd_atom)");
        }
        if (a.has(QpAttrMask.ACCESS_FLAGS) && (a.accessFlags() & ~0xF) != 0) {
            throw new VerbsException(Errno.EINVAL, "qp_access_flags 0x" + Integer.toHexString(a.accessFlags())
                    + " has unsupported bits");
        }
    }

    private static void checkU8(QpAttributes a, QpAttrMask bit, int value, String name, String note) {
        if (a.has(bit) && (value < 0 || value > 255)) {
            throw new VerbsException(Errno.EINVAL, name + " " + value + " (expected 0..255, a u8 in verbs; " + note + ")");
        }
    }

    /**
     * rxe_qp_from_attr: an rd_atomic depth is rounded up to a power of two and kept in a u8 field, so 129..255
     * become 256 and then 0 (seen in the VM: a QP given max_dest_rd_atomic 129 reports 0 and refuses READs).
     */
    private static int rdAtomicDepth(int v) {
        return v == 0 ? 0 : Bytes.ceilPow2(v) & 0xFF;
    }

    @Override
    public QpAttributes query() {
        checkNotClosed();
        exec.acquire();
        try {
            QpAttributes a = new QpAttributes()
                    .state(state).curState(state).qkey(qkey).pkeyIndex(pkeyIndex).port(port).accessFlags(accessFlags)
                    .av(av).pathMtu(pathMtu).destQpNum(destQpn).timeout(timeout).retryCnt(retryCnt)
                    .rnrRetry(rnrRetry).minRnrTimer(minRnrTimer).maxRdAtomic(maxRdAtomic)
                    .maxDestRdAtomic(maxDestRdAtomic).sqPsn(requester.psn).rqPsn(responder.psn)
                    .enSqdAsyncNotify(enSqdAsyncNotify).cap(cap);
            a.sqDraining(state == QpState.SQD && !sq.isEmpty());
            return a;
        } finally {
            exec.release();
        }
    }

    // ------------------------------------------------------------------ state changes (owner)

    private void reset() {
        state = QpState.RESET;
        sq.reset();
        retransDeadline = 0;
        rnrDeadline = 0; // the timer service forgets a QP with no deadline
        paceDeadline = 0;
        probeDeadline = 0;
        pacer.reset();
        if (rq != null) {
            rq.reset();
        }
        requester.reset();
        completer.reset();
        responder.reset();
        qkey = 0;
        accessFlags = 0;
    }

    /**
     * Moves to ERR: every outstanding send and receive completes with WR_FLUSH_ERR (rxe_qp_error and
     * the flush in rxe_requester / rxe_receiver). With an SRQ, the shared queue is left alone and
     * QP_LAST_WQE_REACHED is raised instead (rxe flush_recv_queue).
     */
    void moveToError() {
        boolean was = state == QpState.ERR;
        if (!was && !modifyingToError) {
            SoftEvents.qpState(this, state, QpState.ERR, "error");
        }
        state = QpState.ERR;
        retransDeadline = 0;
        rnrDeadline = 0;
        paceDeadline = 0;
        probeDeadline = 0;
        responder.held.drop();
        flushSendQueue();
        if (srq != null) {
            if (!was) {
                pd.ctx.raise(new AsyncEvent(AsyncEventType.QP_LAST_WQE_REACHED, this, null, null, 0));
            }
        } else {
            flushRecvQueue();
        }
    }

    void flushSendQueue() {
        SendQueue q = sq;
        while (!q.isEmpty()) {
            int w = q.compSlot();
            if (q.tookCredit(w)) {
                q.setTookCredit(w, false);
                requester.rdAtomicAvail++;
            }
            q.setState(w, SendQueue.DONE);
            q.advanceComp();
            sendCq.post(q.wrId(w), WcStatus.WR_FLUSH_ERR, q.opcode(w).wcOpcode(), 0, 0, qpn, 0, 0, false);
        }
        q.reqToHead();
    }

    void flushRecvQueue() {
        responder.dropCurrentWqe();
        while (!rq.isEmpty()) {
            int s = rq.headSlot();
            long id = rq.wrId[s];
            rq.advance();
            recvCq.post(id, WcStatus.WR_FLUSH_ERR, WcOpcode.RECV, 0, 0, qpn, 0, 0, false);
        }
    }

    /**
     * Completes a send WQE, the oldest outstanding one (slot {@code w}); a CQE is generated if it failed or is
     * signaled.
     */
    void completeSend(int w, WcStatus status) {
        SendQueue q = sq;
        q.setState(w, SendQueue.DONE);
        if (q.tookCredit(w)) {
            q.setTookCredit(w, false);
            requester.rdAtomicAvail++;
        }
        q.advanceComp();
        if (status != WcStatus.SUCCESS || q.signaled(w)) {
            // rxe make_send_cqe: byte_len is the WQE's length, for an atomic too (16 for a 16-byte SGE:
            // seen in the VM)
            int byteLen = (int) q.length(w);
            // A full send CQ loses the completion and raises CQ_ERR; the QP carries on (rxe's completer
            // ignores rxe_cq_post's -EBUSY).
            sendCq.post(q.wrId(w), status, q.opcode(w).wcOpcode(), byteLen, 0, qpn, 0, 0, false);
        }
    }

    /**
     * A receive completion was lost to a full CQ: the QP goes to ERR (rxe do_complete ->
     * RESPST_ERR_CQ_OVERFLOW -> RESPST_ERROR, class G) and the request is not acknowledged. The user
     * learns of it from the CQ_ERR event {@link SoftCq#post} raised, one per lost completion (the flushed
     * receives that do not fit either raise theirs); rxe raises no QP event, and neither do we (seen in the
     * VM: interop/rxe-probes, case cqovf).
     */
    void overflowed() {
        if (state != QpState.ERR) {
            moveToError();
        }
    }

    void maybeSqDrained() {
        if (state == QpState.SQD && sq.isEmpty() && enSqdAsyncNotify) {
            enSqdAsyncNotify = false;
            pd.ctx.raise(new AsyncEvent(AsyncEventType.SQ_DRAINED, this, null, null, 0));
        }
    }

    // ------------------------------------------------------------------ timers (owner; the service reads deadlines)

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

    void armRetransmit() {
        if (retransDeadline == 0) {
            long t = Aeth.retransmitTimeoutNs(timeout);
            if (t > 0) {
                retransDeadline = fabric.clock.nanoTime() + t;
                progressSinceArm = false;
                fabric.timers.watch(this);
            }
        }
    }

    void armRnr(long delayNs) {
        rnrDeadline = fabric.clock.nanoTime() + Math.max(1, delayNs);
        fabric.timers.watch(this);
    }

    /** Arms the loss probe's check at {@code deadlineNs} (owner only). */
    void armProbe(long deadlineNs) {
        probeDeadline = deadlineNs == 0 ? 1 : deadlineNs;
        fabric.timers.watch(this);
    }

    boolean hasArmedTimer() {
        return retransDeadline != 0 || rnrDeadline != 0 || paceDeadline != 0 || probeDeadline != 0;
    }

    long nextDeadline() {
        long d = Long.MAX_VALUE;
        if (retransDeadline != 0) {
            d = retransDeadline;
        }
        if (rnrDeadline != 0 && rnrDeadline - d < 0) {
            d = rnrDeadline;
        }
        if (paceDeadline != 0 && paceDeadline - d < 0) {
            d = paceDeadline;
        }
        if (probeDeadline != 0 && probeDeadline - d < 0) {
            d = probeDeadline;
        }
        return d;
    }

    void onTimers(long nowNs) {
        if (paceDeadline != 0 && nowNs - paceDeadline >= 0) {
            paceDeadline = 0;
            exec.markPending(); // the paused burst goes on in the next duty cycle (this owner's)
        }
        if (rnrDeadline != 0 && nowNs - rnrDeadline >= 0) {
            rnrDeadline = 0;
            // rxe rnr_nak_timer: retry from the oldest unacknowledged PSN.
            completer.goBackN();
            requester.run();
        }
        if (probeDeadline != 0 && nowNs - probeDeadline >= 0) {
            probeDeadline = 0;
            if (completer.probeCheck(nowNs)) {
                requester.run();
            }
        }
        if (retransDeadline != 0 && nowNs - retransDeadline >= 0) {
            retransDeadline = 0;
            if (completer.outstanding() == SendQueue.NONE) {
                return;
            }
            if (progressSinceArm || rnrDeadline != 0) {
                // Responses arrived since the timer was armed: push it down the road (rxe re-arms on progress).
                armRetransmit();
                return;
            }
            completer.timeout();
        }
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
            afterVerbsCall();
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
            afterVerbsCall();
            return n;
        } finally {
            b.exit();
        }
    }

    /**
     * The ACKs deferred to this thread's next verbs call (AckCoalescer NEXT_VERBS_CALL) leave now, in the
     * same burst as the packets the call made: an answer leaves before the ACKs it follows. The caller owns
     * no executor.
     */
    private void afterVerbsCall() {
        if (fabric.acksPending()) {
            fabric.flushAcks();
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
        if (!validate(wr)) {
            return false;
        }
        SendQueue q = sq;
        if (q.isFull()) {
            String m = sqFullMessage;
            if (m == null) {
                m = sqFullMessage = "send queue of " + describe() + " is full (" + cap.maxSendWr()
                        + " WRs outstanding, max_send_wr): poll its send CQ, and signal at least every "
                        + cap.maxSendWr() + "th WR, so that slots are freed";
            }
            wr.postError(Errno.ENOMEM, m);
            return false;
        }
        int w = q.headSlot();
        q.write(w, wr, sqSigAll || (wr.sendFlags() & SendFlags.SIGNALED) != 0);
        int n = wr.numSge();
        if ((wr.sendFlags() & SendFlags.INLINE) != 0) {
            // the bytes are copied now; the scatter list is not kept (nothing reads it again)
            if (!copyInline(w, wr)) {
                long total = 0;
                for (int i = 0; i < n; i++) {
                    total += wr.sge(i).length();
                }
                return refuse(wr, Errno.EINVAL, "inline data of " + total + " bytes is not readable: each entry must"
                        + " lie in its segment (ScatterGatherEntry.inline) or in a registered region of this context,"
                        + " and in memory this thread may access");
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
    private String sqFullMessage;

    /** {@return whether the request may be posted; if not, its postError and message say why} */
    private boolean validate(SendWorkRequest wr) {
        QpState s = state;
        if (closed || s == QpState.RESET || s == QpState.INIT || s == QpState.RTR) {
            // rxe_post_send: the requester is not ready before RTS => -EINVAL
            return refuse(wr, Errno.EINVAL, closed ? describe() + " is closed" : describe() + " is in " + s
                    + ": sends can be posted in RTS (and SQD, SQE, ERR) only; modify it "
                    + (s == QpState.RESET ? "RESET -> INIT -> RTR -> RTS" : s == QpState.INIT ? "INIT -> RTR -> RTS"
                    : "RTR -> RTS") + " first");
        }
        WrOpcode op = wr.opcode();
        if (op == null) {
            return refuse(wr, Errno.EINVAL, "the request has no opcode (SendWorkRequest.opcode)");
        }
        // An opcode the QP type does not have (READ or an atomic on UC, RDMA on UD) is accepted here, as
        // rdma-core's rxe provider accepts it; the requester then fails it (Requester.start).
        int n = wr.numSge();
        if (n > cap.maxSendSge()) {
            return refuse(wr, Errno.EINVAL, "num_sge " + n + " exceeds max_send_sge " + cap.maxSendSge() + " of "
                    + describe() + " (ask for more in QpCapabilities when creating the QP)");
        }
        long total = 0;
        for (int i = 0; i < n; i++) {
            int l = wr.sge(i).length();
            if (l < 0) {
                return refuse(wr, Errno.EINVAL, "sge[" + i + "] has length " + l + " (lengths are unsigned 32-bit"
                        + " in verbs; rdma4j takes 0.." + Integer.MAX_VALUE + ")");
            }
            total += l;
        }
        if (total > SoftDevice.MAX_MSG_SZ) {
            return refuse(wr, Errno.EINVAL, "a message of " + total + " bytes exceeds max_msg_sz "
                    + SoftDevice.MAX_MSG_SZ);
        }
        if (op.isAtomic() && (total < 8 || (wr.remoteAddr() & 7) != 0)) {
            // rdma-core rxe validate_send_wr: fewer than 8 bytes, or a misaligned remote address; longer SGEs
            // are accepted and the original value lands in their first 8 bytes (seen in the VM)
            return refuse(wr, Errno.EINVAL, total < 8 ? op + " needs at least 8 bytes of local SGEs for the"
                    + " original value, has " + total : op + " remote_addr 0x" + Long.toHexString(wr.remoteAddr())
                    + " is not 8-byte aligned");
        }
        int f = wr.sendFlags();
        if ((f & SendFlags.INLINE) != 0) {
            if (!(op == WrOpcode.SEND || op == WrOpcode.SEND_WITH_IMM || op == WrOpcode.RDMA_WRITE
                    || op == WrOpcode.RDMA_WRITE_WITH_IMM)) {
                return refuse(wr, Errno.EINVAL, "INLINE is for SEND and RDMA WRITE, not " + op);
            }
            if (total > cap.maxInlineData()) {
                return refuse(wr, Errno.EINVAL, "inline data of " + total + " bytes exceeds max_inline_data "
                        + cap.maxInlineData() + " of " + describe());
            }
        }
        if (type == QpType.UD) {
            if (!(wr.ah() instanceof SoftAh ah) || ah.closed || ah.pd != pd) {
                // the AH must belong to the QP's PD
                return refuse(wr, Errno.EINVAL, wr.ah() == null ? "a UD send needs an address handle (ah)"
                        : "the address handle is closed, of another device or of another PD than " + describe());
            }
        }
        return true;
    }

    private static boolean refuse(SendWorkRequest wr, Errno e, String message) {
        wr.postError(e, message);
        return false;
    }

    /**
     * Copies inline data into the WQE's stride of the inline area and sets its length; the L_Key is not checked
     * (ibv_post_send.3).
     */
    private boolean copyInline(int w, SendWorkRequest wr) {
        long pos = 0;
        MemorySegment dst = inlineArea;
        long base = sq.inlineOff(w);
        try {
            for (int i = 0, n = wr.numSge(); i < n; i++) {
                ScatterGatherEntry s = wr.sge(i);
                int l = s.length();
                if (l == 0) {
                    continue;
                }
                MemorySegment src = s.segment();
                if (src != null) {
                    // The CPU copies inline data (no device access, no L_Key): from the memory the entry
                    // names, at the address's offset in it (0 for ScatterGatherEntry.inline).
                    long o = s.addr() - src.address();
                    if (o < 0 || o > src.byteSize() - l) {
                        return false;
                    }
                    Bytes.copy(src, o, dst, base + pos, l);
                } else {
                    SoftMr mr = device.lookupMr(s.lkey());
                    if (mr == null || mr.pd.ctx != pd.ctx || !mr.contains(s.addr(), l)) {
                        mr = device.findMrByAddress(pd.ctx, s.addr(), l);
                    }
                    if (mr == null) {
                        return false; // an address outside registered memory cannot be read safely
                    }
                    Bytes.copy(mr.segment, s.addr() - mr.address, dst, base + pos, l);
                }
                pos += l;
            }
        } catch (IllegalStateException | IndexOutOfBoundsException | WrongThreadException ex) {
            return false; // a closed arena, a range outside the segment, a confined segment of another thread
        }
        sq.setLength(w, pos);
        return true;
    }

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
                    flushRecvQueue();
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
