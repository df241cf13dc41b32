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
 * requests that arrive past a gap until it fills ({@link HeldRequests}; docs/roce.md, "Loss recovery").
 *
 * <p>A request goes through the states of {@link RespState} in one loop ({@link #run}), as rxe_responder() goes
 * through rxe's resp_states: each step returns the next state, error states included, and the QP's
 * {@link StateTrace} sees each state entered. Error classes follow IBA 9.9.2 as rxe implements them. The READ and
 * atomic resources and the READ reply's bursts are {@link ResponderResources}. Called by the QP's owner only (its
 * executor).
 */
final class Responder {
    private static final int UNLIMITED = Aeth.ACK_UNLIMITED;
    /** 8-aligned 64-bit atomics on registered (native) memory. */
    private static final java.lang.invoke.VarHandle ATOMIC = ValueLayout.JAVA_LONG.varHandle();
    /** GRH area at the start of UD receive buffers (ibv_post_recv.3). */
    static final int GRH_BYTES = 40;

    private final SoftQp qp;
    private final Sgl one;
    private final DmaPiece piece = new DmaPiece();
    private final MemorySegment grh;
    /** Requests held past a gap, and the gap's NAK. */
    final HeldRequests held;
    /** The READ and atomic resources, and the READ reply in progress. */
    final ResponderResources resources;
    /** ACKs, NAKs and atomic ACKs, and the ACK coalescer. */
    final ResponderAcks acks;

    /** Next expected PSN (rxe resp.psn). */
    int psn;
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
    int ackPsn;
    /** rxe resp.msn. */
    int msn;
    private int lastOpcode = -1;
    private boolean dropMsg;
    /** The NAK an error class sends in ACKNOWLEDGE, else UNLIMITED (rxe resp.aeth_syndrome). */
    private int syndrome = UNLIMITED;
    /** The status COMPLETE gives the receive WQE (rxe resp.status). */
    private WcStatus status = WcStatus.SUCCESS;
    /** The request's error class moves the QP to ERR once it is done with (rxe resp.goto_error). */
    private boolean gotoError;
    /** The original value the atomic ACK returns: of the atomic executed, or cached for a duplicate. */
    private long atomicOrig;

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

    Responder(SoftQp qp) {
        this.qp = qp;
        this.recvSgl = new Sgl(Math.max(1, qp.cap.maxRecvSge()) + 1, qp.device.dma);
        this.one = new Sgl(1, qp.device.dma);
        this.grh = Arena.ofAuto().allocate(GRH_BYTES, 8);
        this.held = new HeldRequests(this, qp);
        this.resources = new ResponderResources(this, qp);
        this.acks = new ResponderAcks(this, qp);
    }

    void reset() {
        held.reset();
        acks.clear();
        psn = 0;
        ackPsn = 0;
        msn = 0;
        lastOpcode = -1;
        dropMsg = false;
        haveWqe = false;
        writeMrSet = false;
        writeMrRef = null;
        resources.reset();
    }

    /** {@return the QP this responder serves} */
    SoftQp qp() {
        return qp;
    }

    void dropCurrentWqe() {
        haveWqe = false;
        wqeResolved = false;
    }

    // ------------------------------------------------------------------ entry and the state loop

    /** A request packet for this QP (rxe rxe_resp_queue_pkt, then rxe_responder for it). */
    void onRequest(Packet p) {
        QpState s = qp.state;
        if (s == QpState.RESET || s == QpState.INIT || s == QpState.ERR) {
            qp.count(SoftCounter.DROP_BAD_STATE); // rxe check_type_state / rxe_receiver
            return;
        }
        // rxe check_keys: the DETH Q_Key must match the QP's; for QPN 1 (GSI) it must be GSI_QKEY.
        if (qp.type == QpType.UD && p.qkey != (qp.qpn == SoftGsi.GSI_QPN ? GsiAccess.GSI_QKEY : qp.qkey)) {
            qp.count(SoftCounter.DROP_QKEY_VIOLATION);
            return;
        }
        try {
            run(p, false);
        } catch (Throwable t) {
            held.draining = false;
            throw t;
        }
        if (held.draining) {
            held.filled(); // p filled a gap: the held requests after it run in turn
        }
    }

    /**
     * One request through the states, from GET_REQ to DONE (rxe_responder's loop for one packet). rdma4j departs
     * from rxe's transitions where its steps say so; in short: a request ahead of ePSN is held; a held request
     * whose turn came enters at GET_REQ and goes on at CHK_OP_SEQ (its PSN was checked when it arrived); UD goes
     * from CHK_PSN to CHK_RESOURCE and from there to EXECUTE; a READ's first burst leaves in READ_REPLY and the rest
     * later from {@link ResponderResources#continueReply}, not by this loop; the ACK a request asks for may be
     * deferred ({@link ResponderAcks#ackRequested}).
     *
     * @param wasHeld whether {@code p} was held out of sequence ({@link HeldRequests}) and is now at ePSN
     */
    void run(Packet p, boolean wasHeld) {
        syndrome = UNLIMITED; // rxe_responder sets aeth_syndrome per run; resp.status and goto_error likewise
        status = WcStatus.SUCCESS;
        gotoError = false;
        StateTrace t = qp.trace;
        RespState state = RespState.GET_REQ;
        if (t == null) {
            // Untraced, the path of a request that passes every check is called step by step, each step only if
            // the one before returned it: the same steps and transitions as the loop below (which takes over at
            // any other state), compiled as straight-line code. Dispatching every state through the switch cost
            // about 11 ns per message on one thread (CpuTimeRates write8, docs/benchmarks.md, "Session 9").
            state = wasHeld ? RespState.CHK_OP_SEQ : checkPsn(p);
            if (state == RespState.CHK_OP_SEQ) {
                state = checkOpSeq(p);
            }
            if (state == RespState.CHK_OP_VALID) {
                state = checkOpValid(p);
            }
            if (state == RespState.CHK_RESOURCE) {
                state = checkResource(p);
            }
            if (state == RespState.CHK_LENGTH) {
                state = checkLength(p);
            }
            if (state == RespState.CHK_RKEY) {
                state = checkRkey(p);
            }
            if (state == RespState.EXECUTE) {
                state = qp.type == QpType.UD ? executeUd(p) : execute(p);
            }
            if (state == RespState.COMPLETE) {
                state = qp.type == QpType.UD ? completeUd(p) : complete(p);
            }
            if (state == RespState.ACKNOWLEDGE) {
                state = acknowledge(p);
            }
            if (state == RespState.CLEANUP) {
                state = RespState.DONE;
            }
            if (state == RespState.DONE && !gotoError) {
                return;
            }
        }
        for (;;) {
            if (t != null) {
                t.enter(qp, "resp", state, p.psn);
            }
            switch (state) {
                case GET_REQ -> state = wasHeld ? RespState.CHK_OP_SEQ : RespState.CHK_PSN;
                case CHK_PSN -> state = checkPsn(p);
                case CHK_OP_SEQ -> state = checkOpSeq(p);
                case CHK_OP_VALID -> state = checkOpValid(p);
                case CHK_RESOURCE -> state = checkResource(p);
                case CHK_LENGTH -> state = checkLength(p);
                case CHK_RKEY -> state = checkRkey(p);
                case EXECUTE -> state = qp.type == QpType.UD ? executeUd(p) : execute(p);
                case READ_REPLY -> state = readReply(p);
                case ATOMIC_REPLY -> state = atomicReply(p);
                case COMPLETE -> state = qp.type == QpType.UD ? completeUd(p) : complete(p);
                case ACKNOWLEDGE -> state = acknowledge(p);
                case CLEANUP -> state = RespState.DONE; // rxe cleanup frees the skb and resp.mr: nothing to free here
                case DUPLICATE_REQUEST -> state = duplicate(p);
                case ERR_PSN_OUT_OF_SEQ -> {
                    held.outOfSequence(p); // class B: held, and NAKed as HeldRequests decides
                    state = RespState.CLEANUP;
                }
                case ERR_TOO_MANY_RDMA_ATM_REQ, ERR_MISSING_OPCODE_FIRST, ERR_MISSING_OPCODE_LAST_C,
                     ERR_UNSUPPORTED_OPCODE, ERR_MISALIGNED_ATOMIC ->
                        state = classAc(Aeth.NAK_INVALID_REQ, WcStatus.REM_INV_REQ_ERR); // RC only, class C
                case ERR_MISSING_OPCODE_LAST_D1E -> {
                    // UC: the previous message is abandoned; this packet may start a new one. (rxe with an SRQ
                    // completes the WQE, class E: not done here.)
                    abandonMessage();
                    dropMsg = true;
                    qp.count(SoftCounter.DROP_MESSAGE);
                    state = RespState.CLEANUP;
                }
                case ERR_RNR -> state = rnr(p);
                case ERR_RKEY_VIOLATION -> state = qp.type == QpType.RC
                        ? classAc(Aeth.NAK_REM_ACC_ERR, WcStatus.REM_ACCESS_ERR) : dropMessage();
                // rxe completes the receive WQE with REM_INV_REQ_ERR here, where IBA (and most hardware) reports
                // LOC_LEN_ERR at the responder; we match rxe. UC (rxe with an SRQ: class E) drops the message.
                case ERR_LENGTH -> state = qp.type == QpType.RC
                        ? classAc(Aeth.NAK_INVALID_REQ, WcStatus.REM_INV_REQ_ERR) : dropMessage();
                case ERR_MALFORMED_WQE -> state = classAc(Aeth.NAK_REM_OP_ERR, WcStatus.LOC_QP_OP_ERR); // class A
                case ERR_CQ_OVERFLOW -> state = RespState.ERROR; // class G
                case ERROR -> {
                    if (gotoError) {
                        gotoError = false;
                        qp.moveToError(); // rxe rxe_qp_error
                    } else {
                        qp.overflowed(); // from ERR_CQ_OVERFLOW: to ERR unless already there
                    }
                    return;
                }
                case DONE -> {
                    if (!gotoError) {
                        return;
                    }
                    state = RespState.ERROR;
                }
            }
        }
    }

    // ------------------------------------------------------------------ checks

    /**
     * rxe check_psn. RC: ahead of ePSN to ERR_PSN_OUT_OF_SEQ for every request (rxe: only the first of a gap, the
     * later ones to CLEANUP; here {@link HeldRequests#outOfSequence} holds each and decides on the NAK), behind it
     * to DUPLICATE_REQUEST. UC: after a gap, drop until the next FIRST/ONLY, advancing ePSN past each dropped
     * packet. UD: no PSN, and nothing for CHK_OP_SEQ and CHK_OP_VALID to check (a UD message is one SEND
     * packet): on to CHK_RESOURCE, where rxe passes through both.
     */
    private RespState checkPsn(Packet p) {
        if (qp.type == QpType.UD) {
            return RespState.CHK_RESOURCE;
        }
        int diff = Psn.compare(p.psn, psn);
        if (qp.type == QpType.RC) {
            if (diff > 0) {
                return RespState.ERR_PSN_OUT_OF_SEQ;
            }
            if (diff < 0) {
                qp.count(SoftCounter.DUPLICATE_REQUEST);
                held.duplicate(p);
                return RespState.DUPLICATE_REQUEST;
            }
            held.inSequence(p);
            return RespState.CHK_OP_SEQ;
        }
        if (dropMsg || diff != 0) {
            if (!p.is(Opcodes.M_START)) {
                dropMsg = true;
                psn = Psn.add(p.psn, 1);
                qp.count(SoftCounter.DROP_MESSAGE);
                return RespState.CLEANUP;
            }
            dropMsg = false;
            abandonMessage();
        }
        return RespState.CHK_OP_SEQ;
    }

    /** rxe check_op_seq; a UC MIDDLE/LAST without a FIRST is marked dropped and goes on (rxe: to CLEANUP). */
    private RespState checkOpSeq(Packet p) {
        int op = p.opcode & 0x1F;
        int last = lastOpcode < 0 ? -1 : lastOpcode & 0x1F;
        boolean inSend = last == Opcodes.SEND_FIRST || last == Opcodes.SEND_MIDDLE;
        boolean inWrite = last == Opcodes.WRITE_FIRST || last == Opcodes.WRITE_MIDDLE;
        boolean contSend = op == Opcodes.SEND_MIDDLE || op == Opcodes.SEND_LAST || op == Opcodes.SEND_LAST_IMM;
        boolean contWrite = op == Opcodes.WRITE_MIDDLE || op == Opcodes.WRITE_LAST || op == Opcodes.WRITE_LAST_IMM;
        boolean rc = qp.type == QpType.RC;
        if (inSend) {
            return contSend ? RespState.CHK_OP_VALID
                    : rc ? RespState.ERR_MISSING_OPCODE_LAST_C : RespState.ERR_MISSING_OPCODE_LAST_D1E;
        }
        if (inWrite) {
            return contWrite ? RespState.CHK_OP_VALID
                    : rc ? RespState.ERR_MISSING_OPCODE_LAST_C : RespState.ERR_MISSING_OPCODE_LAST_D1E;
        }
        if (contSend || contWrite) {
            if (rc) {
                return RespState.ERR_MISSING_OPCODE_FIRST;
            }
            dropMsg = true; // UC: a middle/last without a first is dropped
        }
        return RespState.CHK_OP_VALID;
    }

    /**
     * rxe check_op_valid (check_qp_attr_access on RC). A UC packet marked dropped (here or in CHK_OP_SEQ) goes to
     * CLEANUP with ePSN past it.
     */
    private RespState checkOpValid(Packet p) {
        int a = qp.accessFlags;
        if (qp.type == QpType.RC) {
            // rxe check_qp_attr_access: the QP must enable the remote operation.
            if ((p.is(Opcodes.M_READ) && (a & AccessFlag.REMOTE_READ.bit()) == 0)
                    || (p.is(Opcodes.M_WRITE) && (a & AccessFlag.REMOTE_WRITE.bit()) == 0)
                    || (p.is(Opcodes.M_ATOMIC) && (a & AccessFlag.REMOTE_ATOMIC.bit()) == 0)) {
                return RespState.ERR_UNSUPPORTED_OPCODE;
            }
        } else if (p.is(Opcodes.M_WRITE) && (a & AccessFlag.REMOTE_WRITE.bit()) == 0) {
            dropMsg = true; // UC write not enabled: silently dropped
            qp.count(SoftCounter.DROP_MESSAGE);
        }
        if (dropMsg) {
            psn = Psn.add(p.psn, 1);
            return RespState.CLEANUP;
        }
        return RespState.CHK_RESOURCE;
    }

    /** rxe check_resource (the flush of an ERR QP's receive queue is SoftQp's). UD goes on to EXECUTE. */
    private RespState checkResource(Packet p) {
        if (qp.type == QpType.UD) {
            return fetchWqe() ? RespState.EXECUTE : RespState.ERR_RNR;
        }
        if (p.is(Opcodes.M_READ | Opcodes.M_ATOMIC)) {
            // rxe: it is the requester's job not to exceed max_dest_rd_atomic; 0 means none at all.
            return qp.maxDestRdAtomic > 0 ? RespState.CHK_LENGTH : RespState.ERR_TOO_MANY_RDMA_ATM_REQ;
        }
        if (p.is(Opcodes.M_RWR) && !haveWqe) {
            return fetchWqe() ? RespState.CHK_LENGTH : RespState.ERR_RNR;
        }
        return RespState.CHK_LENGTH;
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

    /** rxe check_length; on to CHK_RKEY, as rxe. */
    private RespState checkLength(Packet p) {
        // IBA C9-94: RDMA length at most 2^31.
        if (p.is(Opcodes.M_RETH) && (p.dmaLen & 0xFFFF_FFFFL) > SoftDevice.MAX_MSG_SZ) {
            return RespState.ERR_LENGTH;
        }
        int max = qp.payloadMax();
        if (p.is(Opcodes.M_PAYLOAD) && max != Integer.MAX_VALUE) {
            boolean start = p.is(Opcodes.M_START);
            boolean end = p.is(Opcodes.M_END);
            if (start && end ? p.payloadLen > max
                    : start || p.is(Opcodes.M_MIDDLE) ? p.payloadLen != max
                    : p.payloadLen == 0 || p.payloadLen > max) {
                return RespState.ERR_LENGTH;
            }
        }
        return RespState.CHK_RKEY;
    }

    /** rxe check_rkey: EXECUTE at once for an operation without an R_Key (a SEND), as rxe. */
    private RespState checkRkey(Packet p) {
        if (!p.is(Opcodes.M_WRITE | Opcodes.M_READ | Opcodes.M_ATOMIC)) {
            return RespState.EXECUTE;
        }
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
                    return p.is(Opcodes.M_WRITE) && p.payloadLen > 0 ? RespState.ERR_LENGTH : RespState.EXECUTE;
                }
            } else if (writeMrSet || writeResid == 0) {
                return p.payloadLen <= writeResid ? RespState.EXECUTE : RespState.ERR_LENGTH;
            }
            need = p.is(Opcodes.M_READ) ? AccessFlag.REMOTE_READ.bit() : AccessFlag.REMOTE_WRITE.bit();
        }
        SoftMr mr = qp.device.lookupMr(p.is(Opcodes.M_ATOMIC) || p.is(Opcodes.M_RETH) ? p.rkey : -1);
        // rxe lookup_mr (key, PD, access) and mr_check_range.
        if (mr == null || mr.pd != qp.pd || !mr.allows(need) || !mr.contains(writeVa, writeResid)) {
            writeMr(null);
            return RespState.ERR_RKEY_VIOLATION;
        }
        if (p.is(Opcodes.M_WRITE) && p.payloadLen > writeResid) {
            return RespState.ERR_LENGTH;
        }
        writeMr(mr);
        return RespState.EXECUTE;
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

    // ------------------------------------------------------------------ execute

    /**
     * rxe execute: places a SEND's or WRITE's data, then COMPLETE for an operation that consumes a receive WQE,
     * else ACKNOWLEDGE on RC and CLEANUP on UC, as rxe. A READ goes on to READ_REPLY and an atomic to ATOMIC_REPLY,
     * which do what rxe's execute does for them (the MSN).
     */
    private RespState execute(Packet p) {
        if (p.is(Opcodes.M_SEND)) {
            if (!wqeResolved) {
                return RespState.ERR_MALFORMED_WQE;
            }
            if (recvOffset + p.payloadLen > recvTotal) {
                // rxe send_data_in: copy_data fails with -EINVAL when the data exceeds what the WQE has left
                // (length > dma.resid), and -EINVAL means a malformed WQE: class A, the receive completes
                // with LOC_QP_OP_ERR, an RC requester gets NAK Remote Operational Error (REM_OP_ERR), and the
                // QP goes to ERR -- on RC, UC and UD alike (kernel 6.1; seen in the VM: interop/rxe-probes).
                return RespState.ERR_MALFORMED_WQE;
            }
            if (!copyIn(p, recvSgl, recvOffset)) {
                return RespState.ERR_MALFORMED_WQE;
            }
            recvOffset += p.payloadLen;
        } else if (p.is(Opcodes.M_WRITE)) {
            if (p.payloadLen > 0) {
                one.clear();
                SoftMr mr = writeMr(); // (null, as before, if no region was resolved: never a stale one)
                if (mr == null || !one.addMr(mr, writeVa - mr.address, p.payloadLen, DmaSpace.WRITE, piece)
                        || !copyIn(p, one, 0)) {
                    return RespState.ERR_RKEY_VIOLATION;
                }
            }
            writeVa += p.payloadLen;
            writeResid -= p.payloadLen;
        } else if (p.is(Opcodes.M_READ)) {
            return RespState.READ_REPLY;
        } else if (p.is(Opcodes.M_ATOMIC)) {
            return RespState.ATOMIC_REPLY;
        }
        if (p.is(Opcodes.M_END)) {
            msn++;
        }
        psn = Psn.add(p.psn, 1);
        ackPsn = psn;
        lastOpcode = p.opcode;
        if (p.is(Opcodes.M_COMP)) {
            return RespState.COMPLETE; // which ends the message once the completion is posted
        }
        if (p.is(Opcodes.M_END)) {
            endMessage();
        }
        return qp.type == QpType.RC ? RespState.ACKNOWLEDGE : RespState.CLEANUP;
    }

    /** The message executed ends: the next packet starts a new one (rxe leaves resp.opcode at the LAST opcode). */
    private void endMessage() {
        lastOpcode = -1;
        writeMr(null);
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

    /**
     * rxe read_reply: the first burst of a READ's responses (or of a duplicate's replay, which DUPLICATE_REQUEST set
     * up: behind ePSN), then DONE while responses are left, as rxe, else CLEANUP. The rest are not sent from this
     * loop, as rxe's next runs do from get_req, but from the QP's later duty cycles
     * ({@link ResponderResources#continueReply}). The MSN advances here, once the region has been read-checked
     * (rxe: in execute).
     */
    private RespState readReply(Packet p) {
        if (Psn.compare(p.psn, psn) < 0) {
            resources.sendBurst(); // a duplicate's replay (rxe res->replay)
            return resources.replying ? RespState.DONE : RespState.CLEANUP;
        }
        int len = p.dmaLen;
        if (len != 0) {
            // The device reads the region as it answers: a fault (an IOMMU unmap, memory whose arena was
            // closed under the registration) is an R_Key violation (rxe read_reply: a failed copy).
            one.clear();
            long l = len & 0xFFFF_FFFFL;
            SoftMr mr = writeMr();
            if (!one.addMr(mr, p.va - mr.address, l, DmaSpace.READ, piece)
                    || one.port != null && !one.access(0, l, DmaSpace.READ)) {
                return RespState.ERR_RKEY_VIOLATION;
            }
            if (!one.reachable(0, l)) {
                one.unreachable("RDMA READ of " + l + " bytes at 0x" + Long.toHexString(p.va) + " on " + qp.describe());
                return RespState.ERR_RKEY_VIOLATION;
            }
        }
        int npkts = len == 0 ? 1 : (int) ((len + (long) qp.payloadMax() - 1) / qp.payloadMax());
        ResponderResources.Resource r = resources.read(p.psn, npkts, p.va, p.rkey, len);
        // C9-148: a READ advances the MSN when it executes.
        msn++;
        psn = Psn.add(p.psn, npkts);
        // ackPsn stays (rxe read_reply advances resp.psn only, not resp.ack_psn): see ackPsn
        lastOpcode = -1;
        SoftMr mr = writeMr();
        writeMr(null);
        resources.start(r, mr, p.rkey, p.va, len, p.psn, true);
        resources.sendBurst();
        return resources.replying ? RespState.DONE : RespState.CLEANUP;
    }

    /**
     * rxe atomic_reply: executes the atomic, or (a duplicate: behind ePSN) takes the original value that
     * DUPLICATE_REQUEST found cached, never executing it again; the atomic ACK leaves in ACKNOWLEDGE, as rxe.
     */
    private RespState atomicReply(Packet p) {
        if (Psn.compare(p.psn, psn) < 0) {
            return RespState.ACKNOWLEDGE; // rxe res->replay
        }
        if ((p.va & 7) != 0) {
            return RespState.ERR_MISALIGNED_ATOMIC;
        }
        SoftMr mr = writeMr();
        writeMr(null);
        long off = p.va - mr.address;
        MemorySegment target = mr.segment;
        if (!mr.direct || one.port != null) {
            one.clear();
            if (!one.addMr(mr, off, 8, DmaSpace.READ | DmaSpace.WRITE, piece) || !one.access(0, 8, DmaSpace.WRITE)) {
                return RespState.ERR_RKEY_VIOLATION;
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
            return RespState.ERR_RKEY_VIOLATION;
        } catch (IndexOutOfBoundsException | IllegalArgumentException e) {
            return RespState.ERR_RKEY_VIOLATION;
        }
        resources.atomic(p.psn, orig);
        msn++;
        psn = Psn.add(p.psn, 1);
        // ackPsn stays, unlike rxe atomic_reply (which sets resp.ack_psn): see ackPsn
        lastOpcode = -1;
        atomicOrig = orig;
        return RespState.ACKNOWLEDGE;
    }

    /** {@return false if the completion was lost to a full CQ (ERR_CQ_OVERFLOW)} */
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

    /**
     * rxe do_complete: the receive WQE completes with the request's status. On success a full CQ goes to
     * ERR_CQ_OVERFLOW: the QP goes to ERR and the request is not acknowledged, so the requester never sees SUCCESS
     * for a message whose completion was lost; it retries into an ERR QP and ends with RETRY_EXC_ERR (seen in the
     * VM: interop/rxe-probes, case cqovf). An error's completion is posted whatever the CQ says (the QP goes to ERR
     * anyway), where rxe would go to ERR_CQ_OVERFLOW.
     */
    private RespState complete(Packet p) {
        if (status == WcStatus.SUCCESS) {
            if (!completeRecv(p)) {
                return RespState.ERR_CQ_OVERFLOW;
            }
        } else if (haveWqe) {
            long id = wqeId;
            consumeWqe();
            qp.recvCq.post(id, status, WcOpcode.RECV, 0, 0, qp.qpn, 0, 0, false);
        }
        endMessage();
        return qp.type == QpType.RC ? RespState.ACKNOWLEDGE : RespState.CLEANUP;
    }

    /**
     * rxe acknowledge: the error class's NAK, an atomic's ACK, or the plain ACK a request asked for (AckReq), which
     * may leave later ({@link ResponderAcks#ackRequested}).
     */
    private RespState acknowledge(Packet p) {
        if (syndrome != UNLIMITED) {
            acks.sendAck(syndrome, p.psn);
        } else if (p.is(Opcodes.M_ATOMIC)) {
            acks.sendAtomicAck(atomicOrig, p.psn);
        } else if (p.ackReq) {
            acks.ackRequested(p.psn);
        }
        return RespState.CLEANUP;
    }

    // ------------------------------------------------------------------ UD

    /**
     * rxe execute for UD: the GRH area, then the payload. A receive WQE too small for both is a malformed WQE: rxe
     * 6.1 execute -> send_data_in -> copy_data -EINVAL (length > resid) -> RESPST_ERR_MALFORMED_WQE, class A: the
     * WQE completes with LOC_QP_OP_ERR and the QP goes to ERR, with or without an SRQ (seen in the VM:
     * interop/rxe-probes, sendlong-UD). Kernels with commit 05301cb42a55 ("RDMA/rxe: Fix responder length checking
     * for UD request packets", 2024) check the length first (rxe_resp_check_length) and drop the message instead.
     */
    private RespState executeUd(Packet p) {
        if (!wqeResolved || GRH_BYTES + (long) p.payloadLen > recvTotal) {
            return RespState.ERR_MALFORMED_WQE;
        }
        Grh.write(grh, p);
        one.set(grh, 0, GRH_BYTES);
        try {
            Sgl.transfer(one, 0, recvSgl, 0, GRH_BYTES);
        } catch (IllegalStateException | IndexOutOfBoundsException e) {
            return RespState.ERR_MALFORMED_WQE;
        }
        return copyIn(p, recvSgl, GRH_BYTES) ? RespState.COMPLETE : RespState.ERR_MALFORMED_WQE;
    }

    /** rxe do_complete for UD; a full CQ goes to ERR_CQ_OVERFLOW, an error class on to ERROR after DONE. */
    private RespState completeUd(Packet p) {
        long id = wqeId;
        consumeWqe();
        int flags = WcFlags.GRH | (p.is(Opcodes.M_IMM) ? WcFlags.WITH_IMM : 0);
        boolean ok = status == WcStatus.SUCCESS;
        if (!qp.recvCq.post(id, status, WcOpcode.RECV, ok ? GRH_BYTES + p.payloadLen : 0,
                ok && p.is(Opcodes.M_IMM) ? p.imm : 0, qp.qpn, ok ? p.srcQpn : 0, ok ? flags : 0, p.solicited)) {
            return RespState.ERR_CQ_OVERFLOW;
        }
        return RespState.CLEANUP;
    }

    // ------------------------------------------------------------------ duplicates (rxe duplicate_request)

    /**
     * rxe duplicate_request: a SEND or WRITE is acknowledged again, a READ replayed (READ_REPLY), an atomic's cached
     * result sent again (ATOMIC_REPLY, never executed again); one without its resource is dropped (class D).
     */
    private RespState duplicate(Packet p) {
        if (p.is(Opcodes.M_SEND) || p.is(Opcodes.M_WRITE)) {
            // C9-105: acknowledge again with the last PSN processed. rxe sends one ACK per duplicate; the
            // duplicates of one receive batch on a wire (a resend of packets we hold) get one, as requests do
            // (ackRequested; IBA 9.7.5.1.1 lets a responder coalesce).
            acks.ackRequested(Psn.add(ackPsn, -1));
            return RespState.CLEANUP;
        }
        ResponderResources.Resource r = resources.find(p.psn);
        if (r == null) {
            return RespState.CLEANUP; // class D: drop
        }
        if (p.is(Opcodes.M_READ) && r.type == ResponderResources.Resource.READ) {
            return resources.replayRead(p, r);
        }
        if (p.is(Opcodes.M_ATOMIC) && r.type == ResponderResources.Resource.ATOMIC) {
            atomicOrig = r.orig;
            return RespState.ATOMIC_REPLY;
        }
        return RespState.CLEANUP;
    }

    // ------------------------------------------------------------------ errors

    /**
     * Classes A and C (rxe do_class_ac_error): the NAK for ACKNOWLEDGE (RC), the status for COMPLETE (which completes
     * the receive WQE if one is held), and ERR for the QP once DONE.
     */
    private RespState classAc(int nak, WcStatus st) {
        syndrome = nak;
        status = st;
        gotoError = true;
        return RespState.COMPLETE;
    }

    /** Class B on RC (RNR NAK, no completion), class D on UC and UD (the message is dropped). */
    private RespState rnr(Packet p) {
        if (qp.type == QpType.RC) {
            qp.count(SoftCounter.SND_RNR);
            acks.sendAck(Aeth.TYPE_RNR_NAK | (qp.minRnrTimer & 0x1F), p.psn);
        } else {
            dropMsg = true;
            qp.count(SoftCounter.DROP_MESSAGE);
        }
        return RespState.CLEANUP;
    }

    /** UC: the message is dropped (class D/E, without rxe's completion of an SRQ's WQE). */
    private RespState dropMessage() {
        dropMsg = true;
        qp.count(SoftCounter.DROP_MESSAGE);
        abandonMessage();
        return RespState.CLEANUP;
    }

    /** Forgets a partly received UC message: its receive WQE starts over (rxe class D1). */
    private void abandonMessage() {
        recvOffset = 0;
        lastOpcode = -1;
        writeMr(null);
    }
}
