// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.rdma4j.common.Psn;
import org.rdma4j.dma.DmaPiece;
import org.rdma4j.dma.DmaSpace;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.WcFlags;
import org.rdma4j.verbs.WcOpcode;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.spi.GsiAccess;

/**
 * Executes incoming requests (rxe_resp.c): PSN and opcode-sequence checks, QP and MR access checks,
 * receive WQE consumption with RNR NAKs, data placement, RDMA READ responses, atomics, duplicate
 * detection with read replay and the atomic result cache, the ACK policy, and (unlike rxe) holding
 * requests that arrive past a gap until it fills (docs/roce.md, "Loss recovery"). Error classes follow
 * IBA 9.9.2 as rxe implements them (see {@link #fail}). Called by the QP's owner only (its executor).
 */
final class Responder {
    private static final int UNLIMITED = Aeth.ACK_UNLIMITED;
    /** 8-aligned 64-bit atomics on registered (native) memory. */
    private static final java.lang.invoke.VarHandle ATOMIC = ValueLayout.JAVA_LONG.varHandle();
    /** GRH area at the start of UD receive buffers (ibv_post_recv.3). */
    static final int GRH_BYTES = 40;

    /** Why a request failed, named after rxe's resp_states. */
    private enum Err {
        NONE, PSN_OUT_OF_SEQ, MISSING_FIRST, MISSING_LAST_C, MISSING_LAST_D1E, UNSUPPORTED_OPCODE,
        TOO_MANY_RDMA_ATM_REQ, MISALIGNED_ATOMIC, RNR, RKEY_VIOLATION, LENGTH, MALFORMED_WQE
    }

    private final SoftQp qp;
    private final Packet out = new Packet();
    private final Sgl one;
    private final DmaPiece piece = new DmaPiece();
    private final MemorySegment grh;

    /**
     * How many PSNs past ePSN out-of-sequence requests are held for (a power of two): more than a whole
     * requester window (rxe's 128 PSNs) ahead, so nothing a conforming requester sends is beyond it.
     */
    static final int HOLD = Math.min(256, Bytes.ceilPow2(SoftQp.MAX_UNACKED_PSNS + 1));

    /** Next expected PSN (rxe resp.psn). */
    int psn;
    /** Out-of-sequence requests held until the gap before them fills, by PSN modulo HOLD; allocated on first use. */
    private Packet[] held;
    private int heldCount;
    private boolean draining;
    /** The PSN of the previous request that arrived out of sequence. */
    private int lastOutOfSeq;
    /**
     * Since the last NAK, a request arrived out of sequence at or below the one before it: the requester
     * went back (a resend), and the next AckReq request of it gets the NAK again, once.
     */
    private boolean rewindSeen;
    /**
     * Whether requests past a gap are held ({@link #outOfSequence}); false answers as rxe does, for
     * comparisons ({@code -Drdma4j.soft.holdOutOfSequence=false}) and for tests of a requester facing rxe.
     */
    static final boolean HOLD_DEFAULT = !"false".equals(System.getProperty("rdma4j.soft.holdOutOfSequence"));
    boolean holdsOutOfSequence = HOLD_DEFAULT;
    /** Requests that arrived past the gap before its NAK was sent (after a drain: since the last NAK). */
    private int gapArrivals;
    /**
     * How many requests past a gap make the responder NAK it at first (one that asks for an ACK does at once);
     * {@link #nakThreshold} grows from here with the reordering the path shows.
     */
    static final int NAK_THRESHOLD = 3;
    /**
     * The most {@link #nakThreshold} grows to: a requester asks for an ACK at least every 32 packets (ours;
     * rxe every 64), and such a request past a gap is NAKed at once, so a larger one would change nothing.
     */
    static final int NAK_THRESHOLD_MAX = 32;
    /**
     * Requests past a gap that make the responder NAK it: {@link #NAK_THRESHOLD}, raised by each NAK that
     * turned out spurious to one more than the requests that had arrived past its gap when it filled (a path
     * that reorders, like tc-netem's {@code delay D reorder P}, overtakes more than three).
     */
    int nakThreshold = NAK_THRESHOLD;
    /** Out-of-sequence arrivals, a running count: tells which held requests arrived after the last gap NAK. */
    private int oosArrivals;
    /** {@link #oosArrivals} when the last gap NAK was sent. */
    private int nakAtArrival;
    /** Per slot of {@link #held}: {@link #oosArrivals} when that request arrived. */
    private int[] heldAt;
    /** Out-of-sequence arrivals past the current gap since it opened: how far it was overtaken when it fills. */
    private int gapPast;
    /** PSN of the last gap NAK, while {@link #nakedState} is not NONE. */
    private int nakedPsn;
    /** The requests that had overtaken the last NAKed gap when it filled. */
    private int nakedPast;
    /** What became of the last NAKed gap: NAKED (open), FILLED (then a second copy shows the NAK was spurious). */
    private int nakedState;
    private static final int NAKED_NONE = 0;
    private static final int NAKED_OPEN = 1;
    private static final int NAKED_FILLED = 2;
    private int drainAckPsn;
    /**
     * One past the last SEND/WRITE executed: the PSN a plain ACK may name that does not answer a request of its
     * own (a duplicate's, C9-105 / rxe duplicate_request's ack_psn - 1, and a drain's). A READ or an atomic does
     * not move it: rxe's completer takes an RC_ACKNOWLEDGE for whatever WQE is pending and completes it when the
     * PSN is its last one (rxe_comp.c check_ack -> COMPST_WRITE_SEND -> COMPST_COMP_ACK), a READ or an atomic
     * too, with SUCCESS and without its data. rxe's own responder never names a READ's PSN that way (read_reply
     * moves resp.psn, not resp.ack_psn); it does name an atomic's (atomic_reply sets ack_psn), we do not.
     * Seen against the VM's kernel rxe at 20 % loss: a Linux rping server's READ of our client's buffer, whose
     * response was lost, completed from the re-ACK of its resent go-ahead SEND and kept the previous ping's bytes.
     */
    private int ackPsn;
    private int msn;
    private int lastOpcode = -1;
    private boolean sentPsnNak;
    private boolean dropMsg;
    private int syndrome = UNLIMITED;
    /** The plain ACK not yet transmitted ({@link #ackRequested}): the QP's one ACK coalescer. */
    private final AckCoalescer acks = new AckCoalescer();
    private WcStatus status = WcStatus.SUCCESS;
    private boolean gotoError;

    // Receive WQE in use (rxe resp.wqe)
    private boolean haveWqe;
    private long wqeId;
    private boolean wqeResolved;
    private final Sgl recvSgl;
    private long recvOffset;
    private long recvTotal;

    // RDMA WRITE in progress
    /**
     * The region of the WRITE (or READ, atomic) being executed, valid while {@link #writeMrSet}: the reference is
     * left in place when the message ends (a reference store per message into this old object would cost a GC
     * card-marking barrier with a fence) and cleared only on reset.
     */
    private SoftMr writeMrRef;
    private boolean writeMrSet;
    private long writeVa;
    private long writeResid;
    private int writeLength;

    // Responder resources for RDMA READ and atomics (rxe resp_res), replayed for duplicates.
    private Resource[] res = new Resource[0];
    private int resNext;

    private static final class Resource {
        static final int READ = 1;
        static final int ATOMIC = 2;
        int type;
        int firstPsn;
        int lastPsn;
        long va;
        int rkey;
        int length;
        long orig;
        /** The pacer's epoch when its responses were last sent (Pacer.lost). */
        int epoch;
        /** The PSN its latest reply (or replay) began at, and when (Pacer.lost's estimate). */
        int startPsn;
        long startNs;
    }

    // READ_REPLY (rxe: qp->resp.res while the READ has bytes left): the responses of the READ being answered
    // that are still to be sent, in bursts (docs/engine.md, "Pacing"); requests wait in the inbox meanwhile.
    private boolean replying;
    private boolean replyResumed;
    private Resource replyRes;
    private SoftMr replyMr;
    private int replyRkey;
    private long replyVa;
    private long replyLeft;
    private int replyPsn;
    private boolean replyFirst;

    Responder(SoftQp qp) {
        this.qp = qp;
        this.recvSgl = new Sgl(Math.max(1, qp.cap.maxRecvSge()) + 1, qp.device.dma);
        this.one = new Sgl(1, qp.device.dma);
        this.grh = Arena.ofAuto().allocate(GRH_BYTES, 8);
    }

    void reset() {
        dropHeld();
        acks.clear();
        psn = 0;
        ackPsn = 0;
        msn = 0;
        lastOpcode = -1;
        sentPsnNak = false;
        gapArrivals = 0;
        gapPast = 0;
        nakThreshold = NAK_THRESHOLD;
        nakedState = NAKED_NONE;
        dropMsg = false;
        haveWqe = false;
        writeMrSet = false;
        writeMrRef = null;
        endReply();
        for (Resource r : res) {
            r.type = 0;
        }
    }

    void resizeResources(int n) {
        int size = Bytes.ceilPow2(n);
        if (size != res.length) {
            res = new Resource[size];
            for (int i = 0; i < size; i++) {
                res[i] = new Resource();
            }
            resNext = 0;
        }
    }

    /** {@return the QP this responder serves} */
    SoftQp qp() {
        return qp;
    }

    void dropCurrentWqe() {
        haveWqe = false;
        wqeResolved = false;
    }

    // ------------------------------------------------------------------ entry

    void onRequest(Packet p) {
        QpState s = qp.state;
        if (s == QpState.RESET || s == QpState.INIT || s == QpState.ERR) {
            qp.count(SoftCounter.DROP_BAD_STATE); // rxe check_type_state / rxe_receiver
            return;
        }
        if (qp.type == QpType.UD) {
            syndrome = UNLIMITED;
            status = WcStatus.SUCCESS;
            gotoError = false;
            handleUd(p);
            return;
        }
        // check_psn
        int diff = Psn.compare(p.psn, psn);
        if (qp.type == QpType.RC) {
            if (diff > 0) {
                outOfSequence(p);
                return;
            }
            if (diff < 0) {
                qp.count(SoftCounter.DUPLICATE_REQUEST);
                if (nakedState == NAKED_FILLED && p.psn == nakedPsn) {
                    spuriousNak();
                }
                duplicate(p);
                return;
            }
            if (nakedState != NAKED_NONE) {
                if (nakedState == NAKED_OPEN && p.psn == nakedPsn) {
                    nakedState = NAKED_FILLED;
                    nakedPast = gapPast;
                } else if (nakedState == NAKED_FILLED && Psn.compare(p.psn, nakedPsn) > 2 * SoftQp.MAX_UNACKED_PSNS) {
                    // A resend from the NAKed PSN would have come by now: the requester's window kept it within
                    // one window of it. What arrives from here on says nothing about that NAK.
                    nakedState = NAKED_NONE;
                }
            }
            sentPsnNak = false;
            gapArrivals = 0;
            gapPast = 0;
            if (heldCount == 0) {
                request(p);
                return;
            }
            // The gap fills: this request and the held ones after it execute, and one ACK answers them all.
            draining = true;
            drainAckPsn = -1;
            int before = psn;
            try {
                request(p);
            } finally {
                draining = false;
            }
            if (psn != before) {
                drainHeld();
            } else if (drainAckPsn >= 0) {
                ackRequested(drainAckPsn);
            }
            return;
        }
        if (dropMsg || diff != 0) {
            // UC: after a gap, drop until the next FIRST/ONLY (rxe check_psn).
            if (!p.is(Opcodes.M_START)) {
                dropMsg = true;
                psn = Psn.add(p.psn, 1);
                qp.count(SoftCounter.DROP_MESSAGE);
                return;
            }
            dropMsg = false;
            abandonMessage();
        }
        request(p);
    }

    /**
     * An RC request ahead of the expected PSN (ePSN). rxe check_psn (class B, IBA 9.7.5.1.2): NAK the
     * first one of a gap with ePSN (resp.sent_psn_nak, cleared when ePSN arrives; counted
     * out_of_seq_request) and drop it and every later one. We differ in two ways (docs/roce.md, "Loss
     * recovery"): a later out-of-sequence request of a resend that asks for an acknowledgement (AckReq)
     * gets the same NAK again, since if the resend lost its first packet too nothing else would tell the
     * requester before its retransmit timer (rxe's completer ignores the repeat: same PSN, a retry under
     * way); and the request is held, not dropped, so that when the gap fills it executes in order without
     * being sent again ({@link #drainHeld}).
     */
    private void outOfSequence(Packet p) {
        if (!holdsOutOfSequence) {
            // rxe check_psn exactly: NAK the first one of a gap, drop it and all that follow.
            if (!sentPsnNak) {
                sentPsnNak = true;
                qp.count(SoftCounter.OUT_OF_SEQ_REQUEST);
                sendAck(Aeth.NAK_PSN_SEQ_ERROR, psn);
            }
            qp.count(SoftCounter.DROP_OUT_OF_SEQ);
            return;
        }
        oosArrivals++;
        gapPast++;
        hold(p);
        if (!sentPsnNak) {
            // The NAK waits until nakThreshold requests have arrived past the gap, or one that asks for an
            // answer: a request that is only late (reordered) then usually fills the gap first, and nothing
            // is sent again (TCP's duplicate-ACK threshold, RFC 5681, for the same reason; and, as Linux TCP
            // raises its reordering metric on a D-SACK, the threshold grows with each NAK that proves
            // spurious: spuriousNak). rxe NAKs the first one.
            lastOutOfSeq = p.psn;
            if (++gapArrivals < nakThreshold && !p.ackReq) {
                return;
            }
            gapNak();
            return;
        }
        // Repeated only for a packet of a resend, and once for each: the packets the requester sent before
        // it heard the first NAK come in rising order and say nothing new; a PSN at or below the previous
        // one shows the requester went back, and a resend's packet that asks for an ACK while ePSN is still
        // missing means the resend lost its first packet too. The requester counts every repeat as a retry
        // without progress (Completer.sequenceNak), so a resend whose later AckReq packets each drew one
        // would use up retry_cnt in one go: seen between two processes at 5 % loss, where a resend that
        // went on past its budget drew a repeat for every AckReq of the pass and failed RETRY_EXC_ERR.
        if (Psn.compare(p.psn, lastOutOfSeq) <= 0) {
            rewindSeen = true;
        }
        lastOutOfSeq = p.psn;
        if (p.ackReq && rewindSeen) {
            rewindSeen = false;
            qp.count(SoftCounter.SEQ_NAK_REPEATS);
            sendAck(Aeth.NAK_PSN_SEQ_ERROR, psn);
        }
    }

    /** NAKs the gap at ePSN (resp.sent_psn_nak in rxe), and remembers it to learn whether it was spurious. */
    private void gapNak() {
        sentPsnNak = true;
        rewindSeen = false; // lastOutOfSeq stays: a resend from the gap comes in below it
        nakAtArrival = oosArrivals;
        nakedPsn = psn;
        nakedState = NAKED_OPEN;
        qp.count(SoftCounter.OUT_OF_SEQ_REQUEST);
        sendAck(Aeth.NAK_PSN_SEQ_ERROR, psn);
    }

    /**
     * The request a gap NAK named arrived (filling the gap), and now again: the requester's resend, so the
     * first copy was only late, overtaken by {@link #nakedPast} requests. From now on a gap is NAKed after one
     * more than that (at most {@link #NAK_THRESHOLD_MAX}): the reordering this path does costs no resend. A
     * loss then costs a few more arrivals before its NAK, and none at all where a request asks for an ACK.
     */
    private void spuriousNak() {
        nakedState = NAKED_NONE;
        qp.count(SoftCounter.SPURIOUS_SEQ_NAKS);
        nakThreshold = Math.clamp(nakedPast + 1L, nakThreshold, NAK_THRESHOLD_MAX);
    }

    /** Keeps a copy of an out-of-sequence request within {@link #HOLD} PSNs of ePSN, else drops it. */
    private void hold(Packet p) {
        int d = Psn.compare(p.psn, psn);
        if (d >= HOLD) {
            qp.count(SoftCounter.DROP_OUT_OF_SEQ);
            return;
        }
        if (held == null) {
            held = new Packet[HOLD];
            heldAt = new int[HOLD];
        }
        int slot = p.psn & (HOLD - 1);
        Packet h = held[slot];
        if (h != null && h.psn == p.psn) {
            qp.count(SoftCounter.DROP_OUT_OF_SEQ); // held already (a duplicate or a resend)
            return;
        }
        Packet c;
        try {
            c = p.deepCopy();
        } catch (IllegalStateException | IndexOutOfBoundsException e) {
            qp.count(SoftCounter.DROP_OUT_OF_SEQ); // the sender's memory went away (in process)
            return;
        }
        if (h == null) {
            heldCount++;
        }
        held[slot] = c; // a stale one (behind ePSN by now) is replaced
        heldAt[slot] = oosArrivals;
        qp.count(SoftCounter.HELD_OUT_OF_SEQ);
    }

    /**
     * The request with ePSN arrived and executed: the held requests that now follow in sequence execute
     * in turn. If some are still held beyond a new gap, that gap is NAKed at once (its packet was lost
     * or is late), as a first out-of-sequence arrival would be.
     */
    private void drainHeld() {
        // One ACK for the whole drain if any of its requests asked for one, and for the newest request
        // executed (IBA 9.7.5.1.1: an ACK covers every PSN up to its own): the requester learns at once how
        // far it may skip ahead.
        draining = true;
        try {
            drainInOrder();
        } finally {
            draining = false;
        }
        if (qp.state == QpState.ERR) {
            dropHeld();
            return;
        }
        int since = 0;
        for (int i = 0; i < HOLD && heldCount > 0; i++) {
            Packet h = held[i];
            if (h == null) {
                continue;
            }
            if (Psn.compare(h.psn, psn) <= 0) {
                held[i] = null; // behind ePSN: stale
                heldCount--;
                continue;
            }
            if (heldAt[i] - nakAtArrival > 0) {
                since++;
            }
        }
        // What is still held arrived past the new gap, if there is one; only what arrived since the last NAK
        // counts toward its NAK. Requests that overtook the old gap and were counted for its NAK (a reordering
        // path: tc-netem's reorder sends one in twenty at once, ahead of a whole delay of traffic) say nothing
        // about the new one, which is usually the very next to arrive: counted again, every request of the
        // rest of the message drew a NAK of its own, each a resend of what was on its way.
        gapArrivals = since;
        gapPast = heldCount;
        if (heldCount > 0 && !sentPsnNak && since >= nakThreshold) {
            // Enough requests arrived beyond a new gap: its NAK alone answers (it acknowledges every PSN before
            // it, as the drain's ACK would), so the requester resends from the gap instead of going on from an
            // ACK and hearing of the gap only after. (Fewer: the next request usually fills it; if it was lost,
            // the requests that follow draw its NAK, or the first of them that asks for an ACK.)
            gapNak();
        } else if (drainAckPsn >= 0) {
            ackRequested(Psn.add(ackPsn, -1)); // the newest SEND/WRITE drained, never a READ or atomic: see ackPsn
        }
    }

    private void drainInOrder() {
        while (heldCount > 0 && qp.state != QpState.ERR) {
            int slot = psn & (HOLD - 1);
            Packet h = held[slot];
            if (h == null || h.psn != psn) {
                break;
            }
            held[slot] = null;
            heldCount--;
            int before = psn;
            request(h);
            if (psn == before) {
                break; // not executed (an RNR NAK, an error): the requester sends it again
            }
        }
    }

    /** Forgets every held request (reset, error, a new ePSN). */
    void dropHeld() {
        if (held != null && heldCount > 0) {
            java.util.Arrays.fill(held, null);
        }
        heldCount = 0;
    }

    /** Checks and executes a request with the expected PSN (UC: one it accepts), or fails it. */
    private void request(Packet p) {
        syndrome = UNLIMITED;
        status = WcStatus.SUCCESS;
        gotoError = false;
        Err e = checkOpSeq(p);
        if (e == Err.NONE) {
            e = checkOpValid(p);
        }
        if (e == Err.NONE && dropMsg) {
            psn = Psn.add(p.psn, 1);
            return;
        }
        if (e == Err.NONE) {
            e = checkResource(p);
        }
        if (e == Err.NONE) {
            e = checkLength(p);
        }
        if (e == Err.NONE && p.is(Opcodes.M_WRITE | Opcodes.M_READ | Opcodes.M_ATOMIC)) {
            e = checkRkey(p);
        }
        if (e == Err.NONE) {
            e = execute(p);
            if (e == Err.NONE) {
                return;
            }
        }
        fail(p, e);
    }

    // ------------------------------------------------------------------ checks

    private Err checkOpSeq(Packet p) {
        int op = p.opcode & 0x1F;
        int last = lastOpcode < 0 ? -1 : lastOpcode & 0x1F;
        boolean inSend = last == Opcodes.SEND_FIRST || last == Opcodes.SEND_MIDDLE;
        boolean inWrite = last == Opcodes.WRITE_FIRST || last == Opcodes.WRITE_MIDDLE;
        boolean contSend = op == Opcodes.SEND_MIDDLE || op == Opcodes.SEND_LAST || op == Opcodes.SEND_LAST_IMM;
        boolean contWrite = op == Opcodes.WRITE_MIDDLE || op == Opcodes.WRITE_LAST || op == Opcodes.WRITE_LAST_IMM;
        boolean rc = qp.type == QpType.RC;
        if (inSend) {
            return contSend ? Err.NONE : rc ? Err.MISSING_LAST_C : Err.MISSING_LAST_D1E;
        }
        if (inWrite) {
            return contWrite ? Err.NONE : rc ? Err.MISSING_LAST_C : Err.MISSING_LAST_D1E;
        }
        if (contSend || contWrite) {
            if (rc) {
                return Err.MISSING_FIRST;
            }
            dropMsg = true; // UC: a middle/last without a first is dropped
        }
        return Err.NONE;
    }

    private Err checkOpValid(Packet p) {
        int a = qp.accessFlags;
        if (qp.type == QpType.RC) {
            // rxe check_qp_attr_access: the QP must enable the remote operation.
            if ((p.is(Opcodes.M_READ) && (a & AccessFlag.REMOTE_READ.bit()) == 0)
                    || (p.is(Opcodes.M_WRITE) && (a & AccessFlag.REMOTE_WRITE.bit()) == 0)
                    || (p.is(Opcodes.M_ATOMIC) && (a & AccessFlag.REMOTE_ATOMIC.bit()) == 0)) {
                return Err.UNSUPPORTED_OPCODE;
            }
        } else if (p.is(Opcodes.M_WRITE) && (a & AccessFlag.REMOTE_WRITE.bit()) == 0) {
            dropMsg = true; // UC write not enabled: silently dropped
            qp.count(SoftCounter.DROP_MESSAGE);
        }
        return Err.NONE;
    }

    private Err checkResource(Packet p) {
        if (p.is(Opcodes.M_READ | Opcodes.M_ATOMIC)) {
            // rxe: it is the requester's job not to exceed max_dest_rd_atomic; 0 means none at all.
            return qp.maxDestRdAtomic > 0 ? Err.NONE : Err.TOO_MANY_RDMA_ATM_REQ;
        }
        if (p.is(Opcodes.M_RWR) && !haveWqe) {
            return fetchWqe() ? Err.NONE : Err.RNR;
        }
        return Err.NONE;
    }

    private boolean fetchWqe() {
        if (qp.srq != null) {
            // The responders of every QP on the SRQ take from it, each on its own executor: one at a time (rxe
            // get_srq_wqe holds srq->rq.consumer_lock).
            synchronized (qp.srq.rq) {
                return fetchWqeFrom(qp.srq.rq);
            }
        }
        return fetchWqeFrom(qp.rq);
    }

    private boolean fetchWqeFrom(RecvQueue q) {
        if (q.isEmpty()) {
            return false;
        }
        int slot = q.headSlot();
        wqeId = q.wrId[slot];
        recvTotal = q.totalLength(slot);
        recvOffset = 0;
        haveWqe = true;
        wqeResolved = resolveRecv(q, slot);
        if (qp.srq != null) {
            // rxe get_srq_wqe copies the SRQ WQE and consumes it at once, then checks the limit.
            q.advance();
            qp.srq.afterConsume();
        }
        return true;
    }

    /** Resolves the receive SGEs (LOCAL_WRITE, same PD, in range); false means a malformed WQE. */
    private boolean resolveRecv(RecvQueue q, int slot) {
        recvSgl.clear();
        for (int i = 0; i < q.numSge[slot]; i++) {
            int l = q.len[slot][i];
            if (l == 0) {
                continue;
            }
            long a = q.addr[slot][i];
            if (q.lkey[slot][i] == SoftDevice.LOCAL_DMA_LKEY) {
                // DMA-mapped receive buffer: reached through the device's mode; a fault is a malformed WQE
                // as rxe treats a failed receive copy (class A, LOC_QP_OP_ERR).
                if (!recvSgl.addDma(qp.device.dma, piece, a, l, q.buf[slot][i], DmaSpace.WRITE)) {
                    return false;
                }
                continue;
            }
            SoftMr mr = qp.device.lookupMr(q.lkey[slot][i]);
            if (mr == null || mr.pd != qp.pd || !mr.allows(AccessFlag.LOCAL_WRITE.bit()) || !mr.contains(a, l)) {
                return false;
            }
            if (!recvSgl.addMr(mr, a - mr.address, l, DmaSpace.WRITE, piece)) {
                return false;
            }
        }
        return true;
    }

    private Err checkLength(Packet p) {
        // IBA C9-94: RDMA length at most 2^31.
        if (p.is(Opcodes.M_RETH) && (p.dmaLen & 0xFFFF_FFFFL) > SoftDevice.MAX_MSG_SZ) {
            return Err.LENGTH;
        }
        int max = qp.payloadMax();
        if (p.is(Opcodes.M_PAYLOAD) && max != Integer.MAX_VALUE) {
            boolean start = p.is(Opcodes.M_START);
            boolean end = p.is(Opcodes.M_END);
            if (start && end ? p.payloadLen > max
                    : start || p.is(Opcodes.M_MIDDLE) ? p.payloadLen != max
                    : p.payloadLen == 0 || p.payloadLen > max) {
                return Err.LENGTH;
            }
        }
        return Err.NONE;
    }

    /** {@return the region of the operation being executed, or null} */
    private SoftMr writeMr() {
        return writeMrSet ? writeMrRef : null;
    }

    /** Sets (or, with null, ends) the region of the operation being executed; the reference only on change. */
    private void writeMr(SoftMr mr) {
        if (mr == null) {
            writeMrSet = false;
            return;
        }
        if (writeMrRef != mr) {
            writeMrRef = mr;
        }
        writeMrSet = true;
    }

    private Err checkRkey(Packet p) {
        int need;
        if (p.is(Opcodes.M_ATOMIC)) {
            writeVa = p.va;
            writeResid = 8;
            writeLength = 8;
            need = AccessFlag.REMOTE_ATOMIC.bit();
        } else {
            if (p.is(Opcodes.M_RETH)) {
                writeVa = p.va;
                writeResid = p.dmaLen & 0xFFFF_FFFFL;
                writeLength = p.dmaLen;
                writeMr(null);
                // C9-88: a zero-length READ or WRITE needs no valid R_Key. One that carries payload anyway is a
                // length error (the packet's payload exceeds the RETH's DMA length): NAK Invalid Request, as for
                // any WRITE longer than its RETH. (What kernel rxe does with such a packet was not checked.)
                if (writeResid == 0) {
                    return p.is(Opcodes.M_WRITE) && p.payloadLen > 0 ? Err.LENGTH : Err.NONE;
                }
            } else if (writeMrSet || writeResid == 0) {
                return p.payloadLen <= writeResid ? Err.NONE : Err.LENGTH;
            }
            need = p.is(Opcodes.M_READ) ? AccessFlag.REMOTE_READ.bit() : AccessFlag.REMOTE_WRITE.bit();
        }
        SoftMr mr = qp.device.lookupMr(p.is(Opcodes.M_ATOMIC) || p.is(Opcodes.M_RETH) ? p.rkey : -1);
        // rxe lookup_mr (key, PD, access) and mr_check_range.
        if (mr == null || mr.pd != qp.pd || !mr.allows(need) || !mr.contains(writeVa, writeResid)) {
            writeMr(null);
            return Err.RKEY_VIOLATION;
        }
        if (p.is(Opcodes.M_WRITE) && p.payloadLen > writeResid) {
            return Err.LENGTH;
        }
        writeMr(mr);
        return Err.NONE;
    }

    // ------------------------------------------------------------------ execute

    private Err execute(Packet p) {
        if (p.is(Opcodes.M_SEND)) {
            if (!wqeResolved) {
                return Err.MALFORMED_WQE;
            }
            if (recvOffset + p.payloadLen > recvTotal) {
                // rxe send_data_in: copy_data fails with -EINVAL when the data exceeds what the WQE has left
                // (length > dma.resid), and -EINVAL means a malformed WQE: class A, the receive completes
                // with LOC_QP_OP_ERR, an RC requester gets NAK Remote Operational Error (REM_OP_ERR), and the
                // QP goes to ERR -- on RC, UC and UD alike (kernel 6.1; seen in the VM: interop/rxe-probes).
                return Err.MALFORMED_WQE;
            }
            if (!copyIn(p, recvSgl, recvOffset)) {
                return Err.MALFORMED_WQE;
            }
            recvOffset += p.payloadLen;
        } else if (p.is(Opcodes.M_WRITE)) {
            if (p.payloadLen > 0) {
                one.clear();
                SoftMr mr = writeMr(); // (null, as before, if no region was resolved: never a stale one)
                if (mr == null || !one.addMr(mr, writeVa - mr.address, p.payloadLen, DmaSpace.WRITE, piece)
                        || !copyIn(p, one, 0)) {
                    return Err.RKEY_VIOLATION;
                }
            }
            writeVa += p.payloadLen;
            writeResid -= p.payloadLen;
        } else if (p.is(Opcodes.M_READ)) {
            return readReply(p);
        } else if (p.is(Opcodes.M_ATOMIC)) {
            return atomic(p);
        }
        if (p.is(Opcodes.M_END)) {
            msn++;
        }
        psn = Psn.add(p.psn, 1);
        ackPsn = psn;
        lastOpcode = p.opcode;
        if (p.is(Opcodes.M_COMP) && !completeRecv(p)) {
            // rxe do_complete: rxe_cq_post failed (CQ full) => RESPST_ERR_CQ_OVERFLOW => RESPST_ERROR: the QP
            // went to ERR and the request is not acknowledged, so the requester never sees SUCCESS for a
            // message whose completion was lost; it retries into an ERR QP and ends with RETRY_EXC_ERR (seen
            // in the VM: interop/rxe-probes, case cqovf).
            return Err.NONE;
        }
        if (qp.type == QpType.RC && p.ackReq) {
            ackRequested(p.psn);
        }
        if (p.is(Opcodes.M_END)) {
            lastOpcode = -1;
            writeMr(null);
        }
        return Err.NONE;
    }

    private boolean copyIn(Packet p, Sgl dst, long dstPos) {
        if (p.payloadLen == 0) {
            return true;
        }
        try {
            Sgl.transfer(p.payload, p.payloadOff, dst, dstPos, p.payloadLen);
            return true;
        } catch (IllegalStateException | IndexOutOfBoundsException e) {
            return false; // memory closed under us: treated as a protection failure
        }
    }

    private Err readReply(Packet p) {
        int len = p.dmaLen;
        if (len != 0) {
            // The device reads the region as it answers: a fault (an IOMMU unmap, memory whose arena was
            // closed under the registration) is an R_Key violation (rxe read_reply: a failed copy).
            one.clear();
            long l = len & 0xFFFF_FFFFL;
            SoftMr mr = writeMr();
            if (!one.addMr(mr, p.va - mr.address, l, DmaSpace.READ, piece)
                    || one.port != null && !one.access(0, l, DmaSpace.READ)) {
                return Err.RKEY_VIOLATION;
            }
            if (!one.reachable(0, l)) {
                one.unreachable("RDMA READ of " + l + " bytes at 0x" + Long.toHexString(p.va) + " on " + qp.describe());
                return Err.RKEY_VIOLATION;
            }
        }
        int npkts = len == 0 ? 1 : (int) ((len + (long) qp.payloadMax() - 1) / qp.payloadMax());
        Resource r = res[resNext];
        resNext = (resNext + 1) & (res.length - 1);
        r.type = Resource.READ;
        r.firstPsn = p.psn;
        r.lastPsn = Psn.add(p.psn, npkts - 1);
        r.va = p.va;
        r.rkey = p.rkey;
        r.length = len;
        r.epoch = qp.pacer.epoch();
        // C9-148: a READ advances the MSN when it executes.
        msn++;
        psn = Psn.add(p.psn, npkts);
        // ackPsn stays (rxe read_reply advances resp.psn only, not resp.ack_psn): see ackPsn
        lastOpcode = -1;
        SoftMr mr = writeMr();
        writeMr(null);
        sendReadResponses(r, mr, p.rkey, p.va, len, p.psn, true);
        return Err.NONE;
    }

    /**
     * Starts sending the responses of an RDMA READ from {@code firstPsn} on (rxe read_reply): the first burst
     * leaves now, the rest from {@link #continueReply} in later duty cycles of the QP.
     *
     * @param fromStart the responses start the READ's response sequence (FIRST or ONLY); false for a
     *                  replay that resumes in the middle (MIDDLE ... LAST, rxe read_reply in
     *                  rdatm_res_state_replay), which is what a requester that already holds the
     *                  first part expects (rxe check_ack accepts only MIDDLE/LAST then)
     */
    private void sendReadResponses(Resource r, SoftMr mr, int rkey, long va, int len, int firstPsn, boolean fromStart) {
        replying = true;
        replyRes = r;
        r.startPsn = firstPsn;
        r.startNs = qp.fabric.clock.nanoTime();
        replyResumed = false;
        replyMr = mr;
        replyRkey = rkey;
        replyVa = va;
        replyLeft = len & 0xFFFF_FFFFL;
        replyPsn = firstPsn;
        replyFirst = fromStart;
        continueReply();
    }

    /**
     * {@return whether a READ's responses are still to be sent: requests wait behind them (rxe get_req goes to
     *     RESPST_READ_REPLY while qp->resp.res is set, before it looks at the next request)}
     */
    boolean replying() {
        return replying && qp.state != QpState.ERR;
    }

    /**
     * {@return whether a request may overtake the READ reply in progress: a duplicate of that READ (the requester
     *     asks again for part of it), which {@link #duplicate} folds into the reply instead of answering after it}
     *
     * @param p a request, while {@link #replying}
     */
    boolean foldsIntoReply(Packet p) {
        Resource r = replyRes;
        return r != null && p.is(Opcodes.M_READ) && Psn.compare(p.psn, r.firstPsn) >= 0
                && Psn.compare(p.psn, r.lastPsn) <= 0;
    }

    /**
     * Sends the next burst of the READ being answered: at most {@link Pacer#BURST} responses on a segmenting path
     * (a wire, or a fabric that segments at the MTU), after which the QP pauses ({@link SoftQp#pauseBurst}) and
     * resumes here in a later duty cycle. rxe sends one response per call of its responder and resumes from
     * qp->resp.res the same way (rxe_resp.c read_reply). A READ executed while held requests drain (loss
     * recovery) is answered whole, so that the requests behind it are answered after it. Owner only.
     */
    void continueReply() {
        if (!replying) {
            return;
        }
        if (replyResumed && qp.device.lookupMr(replyRkey) != replyMr) {
            // rxe read_reply: rxe_recheck_mr for every response but the first; the region went away meanwhile
            endReply();
            return;
        }
        replyResumed = true;
        int max = qp.payloadMax();
        boolean paced = max != Integer.MAX_VALUE && !draining;
        int n = 0;
        while (replying) {
            if (qp.state == QpState.ERR) {
                endReply();
                return;
            }
            if (paced && n == Pacer.BURST) {
                qp.pauseBurst();
                return;
            }
            int chunk = (int) Math.min(max, replyLeft);
            boolean first = replyFirst;
            boolean last = chunk == replyLeft;
            Packet o = response(first && last ? Opcodes.READ_RESPONSE_ONLY : first ? Opcodes.READ_RESPONSE_FIRST
                    : last ? Opcodes.READ_RESPONSE_LAST : Opcodes.READ_RESPONSE_MIDDLE, replyPsn);
            o.syndrome = UNLIMITED;
            if (chunk > 0) {
                one.clear();
                if (!one.addMr(replyMr, replyVa - replyMr.address, chunk, DmaSpace.READ, piece)
                        || !one.reachable(0, chunk)) {
                    endReply(); // the mapping or the memory went away (a replayed read after deregistration)
                    return;
                }
                o.payload = one;
                o.payloadOff = 0;
                o.payloadLen = chunk;
            }
            replyVa += chunk;
            replyLeft -= chunk;
            replyPsn = Psn.add(replyPsn, 1);
            replyFirst = false;
            if (last) {
                endReply();
            }
            n++;
            qp.transmit(o);
        }
    }

    private void endReply() {
        replying = false;
        replyMr = null;
        replyRes = null;
    }

    private Err atomic(Packet p) {
        if ((p.va & 7) != 0) {
            return Err.MISALIGNED_ATOMIC;
        }
        SoftMr mr = writeMr();
        writeMr(null);
        long off = p.va - mr.address;
        MemorySegment target = mr.segment;
        if (!mr.direct || one.port != null) {
            one.clear();
            if (!one.addMr(mr, off, 8, DmaSpace.READ | DmaSpace.WRITE, piece) || !one.access(0, 8, DmaSpace.WRITE)) {
                return Err.RKEY_VIOLATION;
            }
            target = one.seg[0];
            off = one.off[0];
        }
        long orig;
        try {
            // Atomic with respect to every other atomic, whichever QP's thread runs it (rxe: IB_ATOMIC_HCA, one
            // lock for the device's atomics): a compare-and-exchange or get-and-add of the CPU on the 8-aligned
            // word (aligned: MISALIGNED_ATOMIC above), which is even atomic with respect to the CPU's own.
            if ((p.opcode & 0x1F) == Opcodes.COMPARE_SWAP) {
                orig = (long) ATOMIC.compareAndExchange(target, off, p.compare, p.swapAdd);
            } else {
                orig = (long) ATOMIC.getAndAdd(target, off, p.swapAdd);
            }
        } catch (IllegalStateException | WrongThreadException e) {
            one.unreachable("atomic at 0x" + Long.toHexString(p.va) + " on " + qp.describe() + ": " + e.getMessage());
            return Err.RKEY_VIOLATION;
        } catch (IndexOutOfBoundsException | IllegalArgumentException e) {
            return Err.RKEY_VIOLATION;
        }
        Resource r = res[resNext];
        resNext = (resNext + 1) & (res.length - 1);
        r.type = Resource.ATOMIC;
        r.firstPsn = p.psn;
        r.lastPsn = p.psn;
        r.orig = orig;
        msn++;
        psn = Psn.add(p.psn, 1);
        // ackPsn stays, unlike rxe atomic_reply (which sets resp.ack_psn): see ackPsn
        lastOpcode = -1;
        sendAtomicAck(orig, p.psn);
        return Err.NONE;
    }

    /** {@return false if the completion was lost to a full CQ (the QP is then in ERR)} */
    private boolean completeRecv(Packet p) {
        boolean writeImm = p.is(Opcodes.M_WRITE);
        int flags = WcFlags.GRH; // rxe sets IB_WC_GRH on every user receive completion
        if (p.is(Opcodes.M_IMM)) {
            flags |= WcFlags.WITH_IMM;
        }
        int byteLen = writeImm ? writeLength : (int) recvOffset;
        long id = wqeId;
        consumeWqe();
        if (!qp.recvCq.post(id, WcStatus.SUCCESS, writeImm ? WcOpcode.RECV_RDMA_WITH_IMM : WcOpcode.RECV,
                byteLen, p.is(Opcodes.M_IMM) ? p.imm : 0, qp.qpn, 0, flags, p.solicited)) {
            qp.overflowed();
            return false;
        }
        return true;
    }

    private void consumeWqe() {
        if (haveWqe && qp.srq == null) {
            qp.rq.advance();
        }
        haveWqe = false;
        wqeResolved = false;
    }

    // ------------------------------------------------------------------ UD

    private void handleUd(Packet p) {
        // rxe check_keys: the DETH Q_Key must match the QP's; for QPN 1 (GSI) it must be GSI_QKEY.
        if (p.qkey != (qp.qpn == SoftGsi.GSI_QPN ? GsiAccess.GSI_QKEY : qp.qkey)) {
            qp.count(SoftCounter.DROP_QKEY_VIOLATION);
            return;
        }
        if (!fetchWqe()) {
            qp.count(SoftCounter.DROP_MESSAGE); // UD class D: no receive WQE
            return;
        }
        WcStatus st = WcStatus.SUCCESS;
        if (!wqeResolved) {
            st = WcStatus.LOC_QP_OP_ERR; // malformed WQE: class A
        } else if (GRH_BYTES + (long) p.payloadLen > recvTotal) {
            // Too small for the GRH area and the payload: rxe 6.1 execute -> send_data_in -> copy_data -EINVAL
            // (length > resid) -> RESPST_ERR_MALFORMED_WQE, class A: the WQE completes with LOC_QP_OP_ERR and
            // the QP goes to ERR, with or without an SRQ (seen in the VM: interop/rxe-probes, sendlong-UD).
            // Kernels with commit 05301cb42a55 ("RDMA/rxe: Fix responder length checking for UD request
            // packets", 2024) check the length first (rxe_resp_check_length) and drop the message instead.
            st = WcStatus.LOC_QP_OP_ERR;
        } else {
            writeGrh(p);
            one.set(grh, 0, GRH_BYTES);
            try {
                Sgl.transfer(one, 0, recvSgl, 0, GRH_BYTES);
            } catch (IllegalStateException | IndexOutOfBoundsException e) {
                st = WcStatus.LOC_QP_OP_ERR;
            }
            if (st == WcStatus.SUCCESS && !copyIn(p, recvSgl, GRH_BYTES)) {
                st = WcStatus.LOC_QP_OP_ERR;
            }
        }
        long id = wqeId;
        consumeWqe();
        int flags = WcFlags.GRH | (p.is(Opcodes.M_IMM) ? WcFlags.WITH_IMM : 0);
        boolean ok = st == WcStatus.SUCCESS;
        if (!qp.recvCq.post(id, st, WcOpcode.RECV, ok ? GRH_BYTES + p.payloadLen : 0,
                ok && p.is(Opcodes.M_IMM) ? p.imm : 0, qp.qpn, ok ? p.srcQpn : 0, ok ? flags : 0, p.solicited)) {
            qp.overflowed();
        }
        if (st == WcStatus.LOC_QP_OP_ERR) {
            qp.moveToError();
        }
    }

    /**
     * The 40-byte GRH area: for an IPv4-mapped source GID, 20 zero bytes then the IPv4 header; else
     * the IPv6 header (rxe execute() copies the network header: union rdma_network_hdr).
     */
    private void writeGrh(Packet p) {
        grh.fill((byte) 0);
        int udpLen = 8 + 12 + 8 + (p.is(Opcodes.M_IMM) ? 4 : 0) + p.payloadLen + ((-p.payloadLen) & 3) + 4;
        if (p.sgid.isIpv4Mapped()) {
            byte[] s = p.sgid.toBytes();
            byte[] d = p.dgid.toBytes();
            grh.set(ValueLayout.JAVA_BYTE, 20, (byte) 0x45);
            grh.set(ValueLayout.JAVA_BYTE, 21, (byte) p.trafficClass);
            putShort(22, 20 + udpLen);
            grh.set(ValueLayout.JAVA_BYTE, 28, (byte) p.hopLimit);
            grh.set(ValueLayout.JAVA_BYTE, 29, (byte) 17);
            for (int i = 0; i < 4; i++) {
                grh.set(ValueLayout.JAVA_BYTE, 32 + i, s[12 + i]);
                grh.set(ValueLayout.JAVA_BYTE, 36 + i, d[12 + i]);
            }
            return;
        }
        int vtf = (6 << 28) | ((p.trafficClass & 0xFF) << 20);
        grh.set(ValueLayout.JAVA_INT_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN), 0, vtf);
        putShort(4, udpLen);
        grh.set(ValueLayout.JAVA_BYTE, 6, (byte) 17);
        grh.set(ValueLayout.JAVA_BYTE, 7, (byte) p.hopLimit);
        putLong(8, p.sgid.hi());
        putLong(16, p.sgid.lo());
        putLong(24, p.dgid.hi());
        putLong(32, p.dgid.lo());
    }

    private void putShort(long off, int v) {
        grh.set(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN), off, (short) v);
    }

    private void putLong(long off, long v) {
        grh.set(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN), off, v);
    }

    // ------------------------------------------------------------------ duplicates (rxe duplicate_request)

    private void duplicate(Packet p) {
        if (p.is(Opcodes.M_SEND) || p.is(Opcodes.M_WRITE)) {
            // C9-105: acknowledge again with the last PSN processed. rxe sends one ACK per duplicate; the
            // duplicates of one receive batch on a wire (a resend of packets we hold) get one, as requests do
            // (ackRequested; IBA 9.7.5.1.1 lets a responder coalesce).
            ackRequested(Psn.add(ackPsn, -1));
            return;
        }
        Resource r = find(p.psn);
        if (r == null) {
            return; // class D: drop
        }
        if (p.is(Opcodes.M_READ) && r.type == Resource.READ) {
            long end = r.va + (r.length & 0xFFFF_FFFFL);
            long len = p.dmaLen & 0xFFFF_FFFFL;
            if (p.va < r.va || p.va + len > end || p.rkey != r.rkey) {
                return; // not a subset of the original request: drop
            }
            SoftMr mr = qp.device.lookupMr(r.rkey);
            if (mr == null || !mr.contains(p.va, len)) {
                return;
            }
            if (replying && r == replyRes) {
                reReadDuringReply(p, len);
                return;
            }
            // A re-read: the requester lost responses we sent (or gave up waiting for them). The pacer widens
            // the gap between this QP's bursts, once for what it sent at the current gap (docs/engine.md, "Pacing").
            if (lostSince(r, p.psn)) {
                qp.count(SoftCounter.PACE_SLOWDOWNS);
            }
            r.epoch = qp.pacer.epoch();
            // rxe duplicate_request: replay from the requested PSN; past the first PSN the numbering
            // and the opcodes continue the original sequence (MIDDLE/LAST).
            sendReadResponses(r, mr, r.rkey, p.va, (int) len, p.psn, p.psn == r.firstPsn);
        } else if (p.is(Opcodes.M_ATOMIC) && r.type == Resource.ATOMIC) {
            sendAtomicAck(r.orig, p.psn); // replay the cached result, never re-execute
        }
    }

    /**
     * A duplicate of the READ whose reply is still being sent (it overtook the requests waiting behind the reply:
     * {@link #foldsIntoReply}). Where rxe would replay it after the reply (rxe duplicate_request, a second pass over
     * the same PSNs), the reply is moved instead: a re-read of responses not sent yet means the requester's timer ran
     * out while the reply waited for its gap, so the gap halves and the reply goes on at once; a re-read of responses
     * already sent means they were lost (or are still on the way): the gap widens and the reply goes back to the PSN
     * asked for, with the numbering and opcodes of the original sequence.
     */
    private void reReadDuringReply(Packet p, long len) {
        Resource r = replyRes;
        if (Psn.compare(p.psn, replyPsn) >= 0) {
            if (qp.pacer.tooSlow()) {
                qp.count(SoftCounter.PACE_SPEEDUPS);
            }
            qp.resumeBurstNow();
            return;
        }
        if (lostSince(r, p.psn)) {
            qp.count(SoftCounter.PACE_SLOWDOWNS);
        }
        r.epoch = qp.pacer.epoch();
        r.startPsn = p.psn;
        r.startNs = qp.fabric.clock.nanoTime();
        replyVa = p.va;
        replyLeft = len;
        replyPsn = p.psn;
        replyFirst = p.psn == r.firstPsn;
    }

    /** A re-read from {@code psn} of resource {@code r}: tells the pacer what the path took of its last reply. */
    private boolean lostSince(Resource r, int psn) {
        long delivered = Math.max(0, Psn.compare(psn, r.startPsn));
        return qp.pacer.lost(r.epoch, qp.fabric.clock.nanoTime(), delivered, r.startNs);
    }

    private Resource find(int pktPsn) {
        for (Resource r : res) {
            if (r.type != 0 && Psn.compare(pktPsn, r.firstPsn) >= 0 && Psn.compare(pktPsn, r.lastPsn) <= 0) {
                return r;
            }
        }
        return null;
    }

    // ------------------------------------------------------------------ errors

    /**
     * The error classes of IBA 9.9.2 as rxe_receiver applies them. Class B (sequence, RNR): NAK and
     * drop, no completion. Class C (invalid request, remote access on RC): NAK, complete the receive
     * WQE if one is held, QP to ERR. Class D/E (UC/UD): drop, or complete the WQE with an SRQ.
     * Class A (malformed receive WQE): NAK REM_OP_ERR, the WQE completes with LOC_QP_OP_ERR.
     */
    private void fail(Packet p, Err e) {
        boolean rc = qp.type == QpType.RC;
        switch (e) {
            case RNR -> {
                if (rc) {
                    qp.count(SoftCounter.SND_RNR);
                    sendAck(Aeth.TYPE_RNR_NAK | (qp.minRnrTimer & 0x1F), p.psn);
                } else {
                    dropMsg = true;
                    qp.count(SoftCounter.DROP_MESSAGE);
                }
                return;
            }
            case TOO_MANY_RDMA_ATM_REQ, MISSING_FIRST, MISSING_LAST_C, UNSUPPORTED_OPCODE, MISALIGNED_ATOMIC ->
                    classAc(p, Aeth.NAK_INVALID_REQ, WcStatus.REM_INV_REQ_ERR);
            case MISSING_LAST_D1E -> {
                // UC: the previous message is abandoned; this packet may start a new one.
                abandonMessage();
                dropMsg = true;
                qp.count(SoftCounter.DROP_MESSAGE);
            }
            case RKEY_VIOLATION -> {
                if (rc) {
                    classAc(p, Aeth.NAK_REM_ACC_ERR, WcStatus.REM_ACCESS_ERR);
                } else {
                    dropMsg = true;
                    qp.count(SoftCounter.DROP_MESSAGE);
                    abandonMessage();
                }
            }
            case LENGTH -> {
                if (rc) {
                    // rxe completes the receive WQE with REM_INV_REQ_ERR here, where IBA (and most
                    // hardware) reports LOC_LEN_ERR at the responder; we match rxe.
                    classAc(p, Aeth.NAK_INVALID_REQ, WcStatus.REM_INV_REQ_ERR);
                } else {
                    dropMsg = true;
                    qp.count(SoftCounter.DROP_MESSAGE);
                    abandonMessage();
                }
            }
            case MALFORMED_WQE -> classAc(p, Aeth.NAK_REM_OP_ERR, WcStatus.LOC_QP_OP_ERR);
            default -> qp.count(SoftCounter.DROP_MALFORMED);
        }
    }

    private void classAc(Packet p, int nak, WcStatus st) {
        if (haveWqe) {
            long id = wqeId;
            consumeWqe();
            qp.recvCq.post(id, st, WcOpcode.RECV, 0, 0, qp.qpn, 0, 0, false);
        }
        lastOpcode = -1;
        writeMr(null);
        if (qp.type == QpType.RC) {
            sendAck(nak, p.psn);
        }
        qp.moveToError();
    }

    /** Forgets a partly received UC message: its receive WQE starts over (rxe class D1). */
    private void abandonMessage() {
        recvOffset = 0;
        lastOpcode = -1;
        writeMr(null);
    }

    // ------------------------------------------------------------------ acknowledgements

    /**
     * Answers an AckReq with a plain ACK, now or deferred. A deferred ACK is held only while the packet was
     * received by a busy-polling application thread (RoCE links): sending it there would put a system call
     * between the arrival of a message and its completion reaching that thread. It is sent at the thread's
     * next verbs call, by the receive agent within a bounded time, or before any other response of this QP,
     * and a later AckReq replaces it, so one ACK covers both (IBA 9.7.5.1.1 lets a responder coalesce
     * acknowledgements: an ACK acknowledges every PSN up to its own).
     */
    private void ackRequested(int ackedPsn) {
        if (draining) {
            drainAckPsn = ackedPsn; // answered once the drain is over
            return;
        }
        if (!qp.device.onWire()) {
            // In process the ACK leaves at once, as rxe sends each: it reaches the requester (through its inbox
            // when this thread runs it) before that sends its next packet, so a resend stops where the responder
            // holds the rest (docs/roce.md, "Loss recovery") and the requester's view of the responder is the
            // same whichever thread runs which side. It costs no system call here.
            acks.request(ackedPsn, msn, AckCoalescer.Timing.END_OF_BURST);
            flushAck();
            return;
        }
        // On a wire the requests one burst of the owner executes (one RoCE receive batch, one inbox drain) get
        // one ACK, for the newest that asked, sent when the burst ends (endOfBurst) or before any other response
        // of this QP: each ACK costs a packet and a system call on both sides, and a stream of small messages
        // asks for one per message. rxe acknowledges each, which is also valid. A busy-polling thread that
        // received on a RoCE device defers it to its next verbs call instead.
        AckCoalescer.Timing t = qp.device.onWire() && Burst.current().deferAcks
                ? AckCoalescer.Timing.NEXT_VERBS_CALL : AckCoalescer.Timing.END_OF_BURST;
        acks.request(ackedPsn, msn, t);
        if (t == AckCoalescer.Timing.NEXT_VERBS_CALL && !qp.ackListed) {
            qp.ackListed = true;
            qp.fabric.ackDeferred(qp);
        }
    }

    /** @return whether the coalesced ACK waits for the end of the owner's burst (not for a verbs call) */
    boolean ackDueAtEndOfBurst() {
        return acks.dueAtEndOfBurst();
    }

    /** Sends the pending ACK, if any. */
    void flushAck() {
        if (!acks.pending()) {
            return;
        }
        int ackPsnNow = acks.psn();
        int ackMsn = acks.msn();
        acks.clear();
        Packet o = response(Opcodes.ACKNOWLEDGE, ackPsnNow);
        o.msn = ackMsn;
        o.syndrome = UNLIMITED;
        qp.transmit(o);
    }

    private Packet response(int op, int respPsn) {
        // responses leave in the order they were made: a deferred ACK first
        flushAck();
        Packet o = out.clearPayload();
        o.opcode = Opcodes.RC | op;
        o.setRoute(qp.peer, qp.sgid != null ? qp.sgid : qp.device.gid(0), qp.dgid);
        o.destQpn = qp.destQpn;
        o.srcQpn = qp.qpn;
        o.psn = respPsn;
        o.msn = msn;
        o.ackReq = false;
        o.solicited = false;
        o.hopLimit = qp.av.hopLimit();
        o.payloadStable = true; // a READ response's bytes are the responder's MR, which outlives the packet
        return o;
    }

    private void sendAck(int syn, int ackedPsn) {
        Packet o = response(Opcodes.ACKNOWLEDGE, ackedPsn);
        o.syndrome = syn;
        qp.transmit(o);
    }

    private void sendAtomicAck(long orig, int ackedPsn) {
        Packet o = response(Opcodes.ATOMIC_ACKNOWLEDGE, ackedPsn);
        o.syndrome = UNLIMITED;
        o.origValue = orig;
        qp.transmit(o);
    }
}
