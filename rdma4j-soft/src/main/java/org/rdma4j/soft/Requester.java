// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.common.Psn;
import org.rdma4j.dma.DmaPiece;
import org.rdma4j.dma.DmaSpace;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WrOpcode;

/**
 * Turns send WQEs into packets (rxe_req.c): assigns PSNs, keeps the RC window and the RDMA READ /
 * atomic initiator depth, honours FENCE, segments at the path MTU on a wire, and sets AckReq.
 * Called by the QP's owner only (its executor).
 */
final class Requester {
    private static final int MAX_PKT_PER_ACK = 64; // rxe RXE_MAX_PKT_PER_ACK
    /**
     * How far a resend may run past its start before a response shows whether the responder still needs
     * what follows (docs/roce.md, "Loss recovery"): {@code -Drdma4j.soft.resendBudget=N}, 0 for no limit
     * (rxe's go-back-N).
     */
    static final int RESEND_BUDGET = Math.clamp(Integer.getInteger("rdma4j.soft.resendBudget", 8), 0, 1 << 22);

    private final SoftQp qp;
    private final SendQueue sq;
    private final Packet tx = new Packet();
    private final DmaPiece piece = new DmaPiece();
    /** The payload of an INLINE request: its bytes in the QP's inline area (SendQueue.inlineOff). */
    private final Sgl inlinePayload;
    /** Next PSN to send (rxe req.psn). */
    int psn;
    /** The PSN after the highest ever sent: where the requester was before go-back-N rewound it. */
    int highWater;
    /** Outstanding RDMA READ / atomic credits left (rxe req.rd_atomic). */
    int rdAtomicAvail;
    private int noackPkts;
    private boolean running;

    Requester(SoftQp qp) {
        this.qp = qp;
        this.sq = qp.sq;
        this.inlinePayload = new Sgl(1, qp.device.dma);
    }

    void reset() {
        psn = 0;
        highWater = 0;
        noackPkts = 0;
        resetDepth();
    }

    /** The initiator depth: max_rd_atomic rounded up to a power of two, as rxe_qp_from_attr does. */
    void resetDepth() {
        rdAtomicAvail = qp.maxRdAtomic == 0 ? 0 : Bytes.ceilPow2(qp.maxRdAtomic);
    }

    /**
     * Sends as much as the queue, the window and the QP state allow. Re-entrant calls (a response
     * processed while this thread is transmitting) return at once; the outer loop continues.
     */
    void run() {
        if (running) {
            return;
        }
        running = true;
        try {
            loop();
        } finally {
            running = false;
        }
    }

    private void loop() {
        // rxe rxe_requester stops at RXE_INFLIGHT_SKBS_PER_QP_HIGH skbs in flight and resumes when their
        // destructors ran; a socket tells us nothing of the kind, so a segmenting path sends at most one burst
        // per turn and resumes in the QP's next duty cycle, after the pacer's gap (docs/engine.md, "Pacing")
        int burst = qp.payloadMax() == Integer.MAX_VALUE ? Integer.MAX_VALUE : Pacer.BURST;
        int sent = 0;
        for (;;) {
            if (!qp.inbox.isEmpty()) {
                // Packets that reached this QP while it sent (a peer this thread ran answered at once, or another
                // thread delivered): taken before the next packet goes, as a NIC's completer runs beside its
                // requester, so an RNR or sequence NAK stops the stream at once.
                qp.drainInbox();
            }
            QpState s = qp.state;
            if (s == QpState.ERR) {
                qp.flushSendQueue();
                return;
            }
            if (s != QpState.RTS && s != QpState.SQD) {
                return;
            }
            if (qp.rnrDeadline != 0 || !sq.hasWork()) {
                qp.maybeSqDrained();
                return;
            }
            if (qp.paceDeadline != 0) {
                return; // a paused burst: the pace timer resumes it
            }
            if (sent == burst) {
                qp.pauseBurst();
                return;
            }
            int w = sq.reqSlot();
            int st = sq.state(w);
            if (st == SendQueue.POSTED || st == SendQueue.REWOUND) {
                if (s == QpState.SQD) {
                    qp.maybeSqDrained();
                    return; // draining: start nothing new
                }
                if (!start(w)) {
                    return;
                }
                if (sq.state(w) == SendQueue.DONE) {
                    continue; // completed without a packet (UD larger than the MTU)
                }
            }
            if (!sendNext(w)) {
                return;
            }
            sent++;
        }
    }

    /** Begins a WQE: fence, initiator depth, local key checks. Returns false if it must wait or failed. */
    private boolean start(int w) {
        SendQueue q = sq;
        boolean rc = qp.type == QpType.RC;
        // rxe req_next_wqe: a fenced WQE waits until every earlier WQE has completed (stricter than
        // IBA 10.8.3.3, which waits only for RDMA READ and atomics).
        if (rc && (q.flags(w) & SendFlags.FENCE) != 0 && !q.reqAtComp()) {
            return false;
        }
        WrOpcode op = q.opcode(w);
        if (!qp.hasOpcode(op)) {
            // rxe_req.c next_opcode: no opcode of this transport for the WR (READ or an atomic on UC, RDMA on
            // UD; rdma-core posted it): LOC_QP_OP_ERR and the QP to ERR (seen in the VM: interop/rxe-probes)
            fail(w, WcStatus.LOC_QP_OP_ERR);
            return false;
        }
        if (op.isReadOrAtomic()) {
            if (rdAtomicAvail <= 0) {
                return false; // rxe check_init_depth
            }
        }
        boolean inline = q.inline(w);
        WcStatus bad = inline ? null : resolveLocal(w, op);
        if (bad != null) {
            fail(w, bad);
            return false;
        }
        // A slot is reused by later WQEs: an inline one (copied at post) must not be held to the checksum of the
        // slot's last checked WQE.
        q.setPostedAt(w, null);
        long length = q.length(w);
        if (!inline && qp.device.dma.checker() != null && !op.isReadOrAtomic()) {
            // DMA checker: checksum the payload now, compare when it is transmitted.
            Sgl sgl = q.sgl(w);
            if (!sgl.reachable(0, length)) {
                sgl.unreachable(op + " wr_id " + q.wrId(w) + " on " + qp.describe() + " reads memory that is gone");
                fail(w, WcStatus.LOC_PROT_ERR);
                return false;
            }
            q.setPostCrc(w, sgl.checksum(0, length));
            q.setPostedAt(w, new Throwable("posted"));
        }
        if (op.isReadOrAtomic()) {
            rdAtomicAvail--;
            q.setTookCredit(w, true);
        }
        if (qp.type == QpType.UD && length > qp.device.activeMtu().bytes()) {
            // IBA C10-93.1.1: a UD message longer than the path MTU emits no packet and no error (rxe
            // "fake a success").
            q.advanceReq();
            qp.completeSend(w, WcStatus.SUCCESS);
            return true;
        }
        q.setPsns(w, psn, Psn.add(psn, packets(op, length) - 1));
        q.setSent(w, 0);
        q.setReceived(w, 0);
        q.setState(w, SendQueue.PROCESSING);
        return true;
    }

    private int packets(WrOpcode op, long bytes) {
        long max = qp.payloadMax();
        if (op.isAtomic() || bytes == 0) {
            return 1;
        }
        return (int) Math.max(1, (bytes + max - 1) / max);
    }

    /** Fails a WQE the requester could not start: it completes with {@code status}, the QP goes to ERR. */
    private void fail(int w, WcStatus status) {
        sq.advanceReq();
        qp.completeSend(w, status);
        qp.moveToError();
    }

    /**
     * Resolves the local SGEs into registered memory (rxe lookup_mr + mr_check_range), or, for the
     * local DMA L_Key, into DMA-mapped memory through the device's mode.
     *
     * @return null, or the status the WQE fails with. SEND and WRITE as rxe's requester (finish_packet ->
     *         copy_data): an L_Key that names no MR of the QP's PD is -EINVAL, LOC_QP_OP_ERR; a range outside
     *         the MR, or a DMA fault, is -EFAULT, LOC_PROT_ERR (seen in the VM with kernel 6.1:
     *         interop/rxe-probes, case lkey). READ and atomics as rxe's completer, which checks their sink
     *         when the response arrives (do_read, do_atomic): every failure is LOC_PROT_ERR. We check it
     *         before sending, so the remote side is not touched.
     */
    private WcStatus resolveLocal(int w, WrOpcode op) {
        SendQueue q = sq;
        Sgl sgl = q.sgl(w);
        sgl.clear();
        // RDMA READ and atomics write their result locally: LOCAL_WRITE is needed (ibv_reg_mr.3).
        boolean sink = op == WrOpcode.RDMA_READ || op.isAtomic();
        int need = sink ? AccessFlag.LOCAL_WRITE.bit() : 0;
        int access = sink ? DmaSpace.WRITE : DmaSpace.READ;
        WcStatus badKey = sink ? WcStatus.LOC_PROT_ERR : WcStatus.LOC_QP_OP_ERR;
        for (int i = 0, n = q.numSge(w); i < n; i++) {
            int l = q.sgeLen(w, i);
            if (l == 0) {
                continue;
            }
            int lkey = q.sgeLkey(w, i);
            long addr = q.sgeAddr(w, i);
            if (lkey == SoftDevice.LOCAL_DMA_LKEY) {
                if (!sgl.addDma(qp.device.dma, piece, addr, l, q.sgeBuf(w, i), access)) {
                    return WcStatus.LOC_PROT_ERR;
                }
                continue;
            }
            SoftMr mr = qp.device.lookupMr(lkey);
            if (mr == null || mr.pd != qp.pd || !mr.allows(need)) {
                return badKey; // rxe lookup_mr: key, PD and access
            }
            if (!mr.contains(addr, l) || !sgl.addMr(mr, addr - mr.address, l, access, piece)) {
                return WcStatus.LOC_PROT_ERR; // rxe mr_check_range: -EFAULT
            }
        }
        return null;
    }

    /** Emits the next packet of a started WQE. */
    private boolean sendNext(int w) {
        SendQueue q = sq;
        boolean rc = qp.type == QpType.RC;
        if (rc && Psn.compare(psn, Psn.add(qp.completer.psn, SoftQp.MAX_UNACKED_PSNS)) > 0) {
            return false; // rxe wait_psn: the window is full
        }
        boolean drops = rc && qp.completer.peer == Completer.Responder.DROPS;
        LossWindow lw = qp.completer.lossWindow;
        if (drops && !lw.allows(psn, qp.completer.psn)) {
            return false; // the loss window is full, or a probe waits for its answer
        }
        boolean budgeted = rc && RESEND_BUDGET > 0 && qp.completer.recovery == Completer.Recovery.RESENDING
                && !drops;
        if (budgeted && Psn.compare(psn, Psn.add(qp.completer.resendFrom, RESEND_BUDGET)) >= 0) {
            // A resend waits after its first packets for a response: a responder that held what followed
            // the gap (ours) then answers for all of it, and the resend continues from there; one that
            // dropped it (rxe) acknowledges these packets, and the resend goes on as go-back-N.
            return false;
        }
        if (q.state(w) == SendQueue.RETRY) {
            q.setState(w, SendQueue.PROCESSING); // resent: its responses count again
        }
        // the packet object is this requester's own: its reference fields are stored only when they change (a
        // reference store into an old object is a G1 card-marking barrier with a StoreLoad fence, and at 1,000
        // QPs each one dirtied a card the refinement threads had cleaned: docs/benchmarks.md, "Session 4")
        Packet p = tx;
        p.payloadOff = 0;
        p.payloadLen = 0;
        p.payloadStable = false;
        route(p, w);
        p.psn = psn;
        p.solicited = false;
        p.ackReq = false;
        int t = qp.type == QpType.RC ? Opcodes.RC : qp.type == QpType.UC ? Opcodes.UC : Opcodes.UD;
        boolean last;
        WrOpcode wop = q.opcode(w);
        long length = q.length(w);
        long sent = q.sent(w);
        switch (wop) {
            case RDMA_READ -> {
                long remaining = length - sent;
                p.opcode = Opcodes.RC | Opcodes.READ_REQUEST;
                p.va = q.remoteAddr(w) + sent;
                p.rkey = q.rkey(w);
                p.dmaLen = (int) remaining;
                int n = packets(wop, remaining);
                psn = Psn.add(psn, n);
                last = true;
            }
            case ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD -> {
                p.opcode = Opcodes.RC | (wop == WrOpcode.ATOMIC_CMP_AND_SWP ? Opcodes.COMPARE_SWAP : Opcodes.FETCH_ADD);
                p.va = q.remoteAddr(w);
                p.rkey = q.rkey(w);
                if (wop == WrOpcode.ATOMIC_CMP_AND_SWP) {
                    p.compare = q.compareAdd(w);
                    p.swapAdd = q.swap(w);
                } else {
                    p.swapAdd = q.compareAdd(w);
                    p.compare = 0;
                }
                psn = Psn.add(psn, 1);
                last = true;
            }
            default -> {
                long max = qp.payloadMax();
                long remaining = length - sent;
                int chunk = (int) Math.min(remaining, max);
                boolean first = sent == 0;
                last = remaining == chunk;
                boolean write = wop == WrOpcode.RDMA_WRITE || wop == WrOpcode.RDMA_WRITE_WITH_IMM;
                boolean imm = wop.hasImm();
                int op;
                if (write) {
                    op = first && last ? (imm ? Opcodes.WRITE_ONLY_IMM : Opcodes.WRITE_ONLY)
                            : first ? Opcodes.WRITE_FIRST
                            : last ? (imm ? Opcodes.WRITE_LAST_IMM : Opcodes.WRITE_LAST) : Opcodes.WRITE_MIDDLE;
                    if (first) {
                        p.va = q.remoteAddr(w);
                        p.rkey = q.rkey(w);
                        p.dmaLen = (int) length;
                    }
                } else {
                    op = first && last ? (imm ? Opcodes.SEND_ONLY_IMM : Opcodes.SEND_ONLY)
                            : first ? Opcodes.SEND_FIRST
                            : last ? (imm ? Opcodes.SEND_LAST_IMM : Opcodes.SEND_LAST) : Opcodes.SEND_MIDDLE;
                }
                p.opcode = t | op;
                if (imm && last) {
                    p.imm = q.imm(w);
                }
                if (last && (q.flags(w) & SendFlags.SOLICITED) != 0) {
                    p.solicited = true;
                }
                Sgl src;
                if (q.inline(w)) {
                    src = inlinePayload;
                    src.set(qp.inlineArea, q.inlineOff(w), length);
                } else {
                    src = q.sgl(w);
                }
                if (p.payload != src) {
                    p.payload = src;
                }
                p.payloadOff = sent;
                p.payloadLen = chunk;
                if (src.port != null && !sourceReadable(w, src, chunk, last) || !src.reachable(sent, chunk)) {
                    // The device reads the payload as it transmits (rxe finish_packet): a fault now, an IOMMU
                    // mapping removed since post or memory whose arena was closed, fails the WQE with
                    // LOC_PROT_ERR (rxe: -EFAULT from the copy).
                    if (!src.reachable(sent, chunk)) {
                        src.unreachable(wop + " wr_id " + q.wrId(w) + " on " + qp.describe()
                                + " reads memory whose arena is closed or that another thread owns");
                    }
                    fail(w, WcStatus.LOC_PROT_ERR);
                    return false;
                }
                q.setSent(w, sent + chunk);
                psn = Psn.add(psn, 1);
                if (qp.type == QpType.UD) {
                    // rxe init_req_packet: the DETH carries the WR's remote_qkey unchanged, bit 31 or not (IBA
                    // C10-15 would send the QP's own Q_Key for a controlled one; rxe does not; seen in the VM:
                    // interop/rxe-probes, case qkey).
                    p.qkey = q.remoteQkey(w);
                    p.srcQpn = qp.qpn;
                    p.destQpn = q.remoteQpn(w) & Psn.MASK;
                }
            }
        }
        if (rc) {
            // rxe init_req_packet asks for an ACK on the last packet of every message and every 64
            // packets. We ask on the last packet of a message that needs one: signaled, a read/atomic,
            // the last one posted so far, or every MAX_PKT_PER_ACK / 2 packets. The responder answers
            // exactly the packets that ask (rxe acknowledge()), and one ACK completes every earlier
            // SEND/WRITE (IBA 9.7.5.1.3 coalescing), so every quiescent point is still acknowledged.
            boolean want = last && (q.signaled(w) || wop.isReadOrAtomic() || q.reqIsLast()
                    || (q.flags(w) & SendFlags.FENCE) != 0);
            // A resend's first packet and the last its budget allows ask for the response that lets it go
            // on: the first fills the gap and is answered with how far the responder now is; if it was
            // lost, the last is answered with the NAK again; a single lost packet cannot stall the resend.
            boolean budgetAsk = budgeted && (p.psn == qp.completer.resendFrom
                    || Psn.compare(psn, Psn.add(qp.completer.resendFrom, RESEND_BUDGET)) >= 0);
            // Against a responder that drops what follows a gap, every half window asks (else a window below 32
            // packets would wait for the timer), and so does a probe.
            int spacing = drops ? Math.min(MAX_PKT_PER_ACK / 2, lw.ackSpacing()) : MAX_PKT_PER_ACK / 2;
            p.ackReq = want || budgetAsk || ++noackPkts > spacing || drops && lw.probing;
            if (p.ackReq) {
                noackPkts = 0;
            }
            if (drops) {
                dropsPeerSent(p, lw);
            } else if (Psn.compare(p.psn, highWater) >= 0 && qp.completer.timesRoundTrips()) {
                // Karn's rule (RFC 6298): only packets sent for the first time are timed; an answer to an earlier
                // copy would make the round trip look shorter than it is, and the completer ignores a repeated NAK
                // that comes within one (Completer.sequenceNak). A first sample is taken on a packet into an empty
                // pipe too, so that the first losses of a connection find an estimate.
                boolean first = lw.srttNs == 0 && p.psn == qp.completer.psn;
                if (p.ackReq || first) {
                    timeRoundTrip(p, lw, first && !p.ackReq);
                }
            }
        }
        if (Psn.compare(psn, highWater) > 0) {
            highWater = psn;
        }
        if (last) {
            q.advanceReq();
            q.setState(w, rc ? SendQueue.PENDING : SendQueue.DONE);
        }
        if (rc) {
            qp.armRetransmit();
        }
        // an RC WQE keeps its payload until the ACK: a packet held in the peer's inbox may point at it; a UC/UD
        // WQE completes below, so its packet's bytes are copied if they are held
        p.payloadStable = rc;
        qp.transmit(p);
        if (!rc && last) {
            // UC and UD have no acknowledgements: the WQE is done once its last packet is sent.
            qp.completeSend(w, WcStatus.SUCCESS);
        }
        return true;
    }

    /**
     * A packet to a responder that drops what follows a gap leaves: it may time a round trip, and it arms the
     * loss probe (measuring silence from now if nothing was outstanding). One clock read, only when needed.
     */
    private void dropsPeerSent(Packet p, LossWindow lw) {
        boolean empty = Psn.compare(p.psn, qp.completer.psn) <= 0;
        boolean timed = p.ackReq && lw.wantsSample(p);
        if (!timed && !empty && qp.probeDeadline != 0) {
            return;
        }
        long now = qp.fabric.clock.nanoTime();
        if (timed) {
            lw.ackReqSent(p.psn, now);
        }
        if (empty && !lw.probing) {
            lw.lastActivityNs = now;
        }
        qp.completer.armProbe(now);
    }

    /** Times a round trip, before the completer knows what the responder does with what follows a gap. */
    private void timeRoundTrip(Packet p, LossWindow lw, boolean anyResponse) {
        if (lw.wantsSample(p)) {
            lw.ackReqSent(p.psn, qp.fabric.clock.nanoTime(), anyResponse);
        }
    }

    /** Checks the device's read of the next chunk; with the DMA checker, compares the payload checksum. */
    private boolean sourceReadable(int w, Sgl src, int chunk, boolean last) {
        SendQueue q = sq;
        if (!src.access(q.sent(w), chunk, DmaSpace.READ)) {
            return false;
        }
        Throwable postedAt = last ? q.postedAt(w) : null;
        if (postedAt != null && qp.device.dma.checker() != null) {
            long length = q.length(w);
            Sgl sgl = q.sgl(w);
            if (sgl.reachable(0, length) && sgl.checksum(0, length) != q.postCrc(w)) {
                qp.device.dma.checker().sendBufferChanged(q.opcode(w) + " wr_id " + q.wrId(w) + " on QP 0x"
                        + Integer.toHexString(qp.qpn) + " (" + length + " bytes)", postedAt);
                q.setPostedAt(w, null); // once per request
            }
        }
        return true;
    }

    private void route(Packet p, int w) {
        if (qp.type == QpType.UD) {
            SoftAh ah = sq.ah(w);
            AhAttributes a = ah.attrs;
            p.setRoute(ah.peer, qp.device.gid(a.sgidIndex()), a.dgid());
            p.hopLimit = a.hopLimit();
            p.trafficClass = a.trafficClass();
        } else {
            Gid s = qp.sgid;
            p.setRoute(qp.peer, s != null ? s : qp.device.gid(0), qp.dgid);
            p.hopLimit = qp.av.hopLimit();
            p.trafficClass = qp.av.trafficClass();
            p.destQpn = qp.destQpn;
            p.srcQpn = qp.qpn;
        }
    }
}
