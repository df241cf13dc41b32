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
    private final Packet tx = new Packet();
    private final DmaPiece piece = new DmaPiece();
    /** The payload of an INLINE request: its bytes in the QP's inline area (SendWqe.inlineOff). */
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
            if (qp.rnrDeadline != 0 || qp.reqIdx == qp.sqHead) {
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
            SendWqe w = qp.slot(qp.reqIdx);
            if (w.state == SendWqe.POSTED || w.state == SendWqe.REWOUND) {
                if (s == QpState.SQD) {
                    qp.maybeSqDrained();
                    return; // draining: start nothing new
                }
                if (!start(w)) {
                    return;
                }
                if (w.state == SendWqe.DONE) {
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
    private boolean start(SendWqe w) {
        boolean rc = qp.type == QpType.RC;
        // rxe req_next_wqe: a fenced WQE waits until every earlier WQE has completed (stricter than
        // IBA 10.8.3.3, which waits only for RDMA READ and atomics).
        if (rc && (w.flags & SendFlags.FENCE) != 0 && qp.reqIdx != qp.compIdx) {
            return false;
        }
        if (!qp.hasOpcode(w.opcode)) {
            // rxe_req.c next_opcode: no opcode of this transport for the WR (READ or an atomic on UC, RDMA on
            // UD; rdma-core posted it): LOC_QP_OP_ERR and the QP to ERR (seen in the VM: interop/rxe-probes)
            fail(w, WcStatus.LOC_QP_OP_ERR);
            return false;
        }
        if (w.opcode.isReadOrAtomic()) {
            if (rdAtomicAvail <= 0) {
                return false; // rxe check_init_depth
            }
        }
        WcStatus bad = w.inline ? null : resolveLocal(w);
        if (bad != null) {
            fail(w, bad);
            return false;
        }
        // A slot is reused by later WQEs: an inline one (copied at post) must not be held to the checksum of the
        // slot's last checked WQE.
        w.postedAt = null;
        if (!w.inline && qp.device.dma.checker() != null && !w.opcode.isReadOrAtomic()) {
            // DMA checker: checksum the payload now, compare when it is transmitted.
            if (!w.sgl.reachable(0, w.length)) {
                w.sgl.unreachable(w.opcode + " wr_id " + w.wrId + " on " + qp.describe() + " reads memory that is gone");
                fail(w, WcStatus.LOC_PROT_ERR);
                return false;
            }
            w.postCrc = w.sgl.checksum(0, w.length);
            w.postedAt = new Throwable("posted");
        }
        if (w.opcode.isReadOrAtomic()) {
            rdAtomicAvail--;
            w.tookCredit = true;
        }
        if (qp.type == QpType.UD && w.length > qp.device.activeMtu().bytes()) {
            // IBA C10-93.1.1: a UD message longer than the path MTU emits no packet and no error (rxe
            // "fake a success").
            qp.reqIdx++;
            qp.completeSend(w, WcStatus.SUCCESS);
            return true;
        }
        w.firstPsn = psn;
        w.lastPsn = Psn.add(psn, packets(w, w.length) - 1);
        w.sent = 0;
        w.received = 0;
        w.state = SendWqe.PROCESSING;
        return true;
    }

    private int packets(SendWqe w, long bytes) {
        long max = qp.payloadMax();
        if (w.opcode.isAtomic() || bytes == 0) {
            return 1;
        }
        return (int) Math.max(1, (bytes + max - 1) / max);
    }

    /** Fails a WQE the requester could not start: it completes with {@code status}, the QP goes to ERR. */
    private void fail(SendWqe w, WcStatus status) {
        qp.reqIdx++;
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
    private WcStatus resolveLocal(SendWqe w) {
        Sgl sgl = w.sgl;
        sgl.clear();
        // RDMA READ and atomics write their result locally: LOCAL_WRITE is needed (ibv_reg_mr.3).
        boolean sink = w.opcode == WrOpcode.RDMA_READ || w.opcode.isAtomic();
        int need = sink ? AccessFlag.LOCAL_WRITE.bit() : 0;
        int access = sink ? DmaSpace.WRITE : DmaSpace.READ;
        WcStatus badKey = sink ? WcStatus.LOC_PROT_ERR : WcStatus.LOC_QP_OP_ERR;
        for (int i = 0; i < w.numSge; i++) {
            int l = w.len[i];
            if (l == 0) {
                continue;
            }
            if (w.lkey[i] == SoftDevice.LOCAL_DMA_LKEY) {
                if (!sgl.addDma(qp.device.dma, piece, w.addr[i], l, w.buf[i], access)) {
                    return WcStatus.LOC_PROT_ERR;
                }
                continue;
            }
            SoftMr mr = qp.device.lookupMr(w.lkey[i]);
            if (mr == null || mr.pd != qp.pd || !mr.allows(need)) {
                return badKey; // rxe lookup_mr: key, PD and access
            }
            if (!mr.contains(w.addr[i], l) || !sgl.addMr(mr, w.addr[i] - mr.address, l, access, piece)) {
                return WcStatus.LOC_PROT_ERR; // rxe mr_check_range: -EFAULT
            }
        }
        return null;
    }

    /** Emits the next packet of a started WQE. */
    private boolean sendNext(SendWqe w) {
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
        if (w.state == SendWqe.RETRY) {
            w.state = SendWqe.PROCESSING; // resent: its responses count again
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
        switch (w.opcode) {
            case RDMA_READ -> {
                long remaining = w.length - w.sent;
                p.opcode = Opcodes.RC | Opcodes.READ_REQUEST;
                p.va = w.remoteAddr + w.sent;
                p.rkey = w.rkey;
                p.dmaLen = (int) remaining;
                int n = packets(w, remaining);
                psn = Psn.add(psn, n);
                last = true;
            }
            case ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD -> {
                p.opcode = Opcodes.RC | (w.opcode == WrOpcode.ATOMIC_CMP_AND_SWP ? Opcodes.COMPARE_SWAP : Opcodes.FETCH_ADD);
                p.va = w.remoteAddr;
                p.rkey = w.rkey;
                if (w.opcode == WrOpcode.ATOMIC_CMP_AND_SWP) {
                    p.compare = w.compareAdd;
                    p.swapAdd = w.swap;
                } else {
                    p.swapAdd = w.compareAdd;
                    p.compare = 0;
                }
                psn = Psn.add(psn, 1);
                last = true;
            }
            default -> {
                long max = qp.payloadMax();
                long remaining = w.length - w.sent;
                int chunk = (int) Math.min(remaining, max);
                boolean first = w.sent == 0;
                last = remaining == chunk;
                boolean write = w.opcode == WrOpcode.RDMA_WRITE || w.opcode == WrOpcode.RDMA_WRITE_WITH_IMM;
                boolean imm = w.opcode.hasImm();
                int op;
                if (write) {
                    op = first && last ? (imm ? Opcodes.WRITE_ONLY_IMM : Opcodes.WRITE_ONLY)
                            : first ? Opcodes.WRITE_FIRST
                            : last ? (imm ? Opcodes.WRITE_LAST_IMM : Opcodes.WRITE_LAST) : Opcodes.WRITE_MIDDLE;
                    if (first) {
                        p.va = w.remoteAddr;
                        p.rkey = w.rkey;
                        p.dmaLen = (int) w.length;
                    }
                } else {
                    op = first && last ? (imm ? Opcodes.SEND_ONLY_IMM : Opcodes.SEND_ONLY)
                            : first ? Opcodes.SEND_FIRST
                            : last ? (imm ? Opcodes.SEND_LAST_IMM : Opcodes.SEND_LAST) : Opcodes.SEND_MIDDLE;
                }
                p.opcode = t | op;
                if (imm && last) {
                    p.imm = w.imm;
                }
                if (last && (w.flags & SendFlags.SOLICITED) != 0) {
                    p.solicited = true;
                }
                Sgl src = w.sgl;
                if (w.inline) {
                    src = inlinePayload;
                    src.set(qp.inlineArea, w.inlineOff, w.length);
                }
                if (p.payload != src) {
                    p.payload = src;
                }
                p.payloadOff = w.sent;
                p.payloadLen = chunk;
                if (src.port != null && !sourceReadable(w, src, chunk, last) || !src.reachable(w.sent, chunk)) {
                    // The device reads the payload as it transmits (rxe finish_packet): a fault now, an IOMMU
                    // mapping removed since post or memory whose arena was closed, fails the WQE with
                    // LOC_PROT_ERR (rxe: -EFAULT from the copy).
                    if (!src.reachable(w.sent, chunk)) {
                        src.unreachable(w.opcode + " wr_id " + w.wrId + " on " + qp.describe()
                                + " reads memory whose arena is closed or that another thread owns");
                    }
                    fail(w, WcStatus.LOC_PROT_ERR);
                    return false;
                }
                w.sent += chunk;
                psn = Psn.add(psn, 1);
                if (qp.type == QpType.UD) {
                    // rxe init_req_packet: the DETH carries the WR's remote_qkey unchanged, bit 31 or not (IBA
                    // C10-15 would send the QP's own Q_Key for a controlled one; rxe does not; seen in the VM:
                    // interop/rxe-probes, case qkey).
                    p.qkey = w.remoteQkey;
                    p.srcQpn = qp.qpn;
                    p.destQpn = w.remoteQpn & Psn.MASK;
                }
            }
        }
        if (rc) {
            // rxe init_req_packet asks for an ACK on the last packet of every message and every 64
            // packets. We ask on the last packet of a message that needs one: signaled, a read/atomic,
            // the last one posted so far, or every MAX_PKT_PER_ACK / 2 packets. The responder answers
            // exactly the packets that ask (rxe acknowledge()), and one ACK completes every earlier
            // SEND/WRITE (IBA 9.7.5.1.3 coalescing), so every quiescent point is still acknowledged.
            boolean want = last && (w.signaled || w.opcode.isReadOrAtomic() || qp.reqIdx + 1 == qp.sqHead
                    || w.flags != 0 && (w.flags & SendFlags.FENCE) != 0);
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
            qp.reqIdx++;
            w.state = rc ? SendWqe.PENDING : SendWqe.DONE;
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
    private boolean sourceReadable(SendWqe w, Sgl src, int chunk, boolean last) {
        if (!src.access(w.sent, chunk, DmaSpace.READ)) {
            return false;
        }
        if (last && w.postedAt != null && qp.device.dma.checker() != null && w.sgl.reachable(0, w.length)
                && w.sgl.checksum(0, w.length) != w.postCrc) {
            qp.device.dma.checker().sendBufferChanged(w.opcode + " wr_id " + w.wrId + " on QP 0x"
                    + Integer.toHexString(qp.qpn) + " (" + w.length + " bytes)", w.postedAt);
            w.postedAt = null; // once per request
        }
        return true;
    }

    private void route(Packet p, SendWqe w) {
        if (qp.type == QpType.UD) {
            AhAttributes a = w.ah.attrs;
            p.setRoute(w.ah.peer, qp.device.gid(a.sgidIndex()), a.dgid());
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
