// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.rdma4j.common.Psn;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WrOpcode;

/**
 * Matches acknowledgements and responses to send WQEs and completes them (rxe_comp.c): ACK
 * coalescing, RDMA READ response scatter, atomic results, RNR and sequence NAKs, retry counting and
 * go-back-N. RC only. Called by the QP's owner only (its executor).
 *
 * <p>An explicit state machine as rxe_completer is: {@link #run} enters the {@link CompState}s one by one, each
 * step returning the next, and tells the QP's {@link StateTrace} of each.
 */
final class Completer {
    private final SoftQp qp;
    private final SendQueue sq;
    /** Next PSN expected in a response (rxe comp.psn). */
    int psn;
    int retryCnt;
    int rnrRetry;

    /**
     * Where go-back-N recovery stands (docs/roce.md, "Loss recovery"). rxe keeps one flag for this,
     * comp.started_retry; {@link #resendFrom} is what lets a sequence NAK start the next resend at once
     * instead of leaving it to the retransmit timer.
     */
    enum Recovery {
        /** No resend under way: a sequence NAK, an implied NAK or the retransmit timer starts one. */
        IDLE,
        /**
         * A resend from {@link #resendFrom} is under way (rxe started_retry set). A response that makes
         * progress ends it; a sequence NAK past {@code resendFrom} starts the next one at once.
         */
        RESENDING
    }

    /** Why a retry episode starts; each is counted (COMPLETER_RETRY_ERR plus RETRY_TIMEOUTS or RETRY_NAKS). */
    private enum Cause {
        /** The retransmit timer expired with no response since it was armed. */
        TIMEOUT,
        /** A PSN sequence-error NAK: the first for its gap, as far as we know. */
        SEQ_NAK,
        /** The responder's NAK again, for an AckReq packet of the current resend: its start was lost. */
        REPEATED_NAK,
        /** A response that reveals a lost READ response or atomic acknowledgement (rxe check_psn). */
        IMPLIED_NAK
    }

    /**
     * What resends have shown about the responder: whether it holds the requests that follow a gap (ours
     * does, rxe drops them). A resend waits after {@link Requester#RESEND_BUDGET} packets unless the
     * responder drops: then go-back-N (sending everything again at once) is what works.
     */
    enum Responder {
        /** Not seen yet: resends wait after their budget. */
        UNKNOWN,
        /** An answer to a resend acknowledged more than the resend sent. */
        HOLDS,
        /** Answers to resends acknowledged only what they sent, twice, although more had been sent before. */
        DROPS
    }

    Recovery recovery = Recovery.IDLE;
    Responder peer = Responder.UNKNOWN;
    private int dropsSeen;
    /** Answers to budgeted resends that showed holding (see {@link #onResponse}): weighed against dropsSeen. */
    private int holdsSeen;
    /** PSN the current resend started at (comp.psn when it began); meaningful while RESENDING. */
    int resendFrom;
    /**
     * The current resend starts where the responder said it expects the next request: it began with a
     * sequence NAK. Only then does an answer to it show what the responder holds; after a timeout or an
     * implied NAK the responder may be further on than comp.psn, and acknowledges a duplicate with the last
     * PSN it has (rxe duplicate_request), which says nothing about what followed a gap.
     */
    private boolean resendFromNak;
    /** PSN of the last sequence NAK. */
    private int nakPsn;

    // What the states of one run of the loop ({@link #run}) hand on to the next: rxe's locals wqe and
    // wqe->status. Fields, so that a response costs no allocation.
    /** The WQE the states work on (a SendQueue slot). */
    private int wqe;
    /** Why ERROR_RETRY was entered. */
    private Cause cause;
    /** The status ERROR completes the WQE with. */
    private WcStatus status;
    /** Whether the response ends its WQE: UPDATE_COMP goes on to COMP_ACK. */
    private boolean ends;
    /** Whether the sequence NAK of CHECK_ACK moved comp.psn (for ERROR_RETRY). */
    private boolean nakMoved;
    /** Window, round trip and loss probe against a responder that drops what follows a gap (peer DROPS only). */
    final LossWindow lossWindow = new LossWindow();

    /** An atomic's original value on its way to the requester's SGEs. */
    private final MemorySegment orig = Arena.ofAuto().allocate(8, 8);
    private final Sgl origSgl = new Sgl(1);

    Completer(SoftQp qp) {
        this.qp = qp;
        this.sq = qp.sq;
        origSgl.set(orig, 0, 8);
    }

    void reset() {
        psn = 0;
        peer = Responder.UNKNOWN;
        dropsSeen = 0;
        holdsSeen = 0;
        lossWindow.reset();
        resetRetryCounters();
    }

    /** {@return the loss window's state, for test messages} */
    String window() {
        return lossWindow.toString();
    }

    /** rxe reset_retry_counters: a response made progress, so the retry budget is whole again. */
    private void resetRetryCounters() {
        retryCnt = qp.retryCnt;
        rnrRetry = qp.rnrRetry;
        recovery = Recovery.IDLE;
    }

    /**
     * @return the oldest uncompleted WQE if go-back-N rewound it (a SEND or WRITE in RETRY or REWOUND,
     *         with the PSNs of its earlier pass), else SendQueue.NONE
     */
    private int rewound() {
        if (sq.isEmpty()) {
            return SendQueue.NONE;
        }
        int w = sq.compSlot();
        int st = sq.state(w);
        return (st == SendQueue.RETRY || st == SendQueue.REWOUND) && !sq.opcode(w).isReadOrAtomic()
                ? w : SendQueue.NONE;
    }

    /** {@return the slot of the oldest WQE the requester has started and not completed, or SendQueue.NONE} */
    int outstanding() {
        if (sq.isEmpty()) {
            return SendQueue.NONE;
        }
        int w = sq.compSlot();
        int st = sq.state(w);
        return st == SendQueue.PROCESSING || st == SendQueue.PENDING ? w : SendQueue.NONE;
    }

    void onResponse(Packet p) {
        QpState s = qp.state;
        if (s != QpState.RTS && s != QpState.SQD && s != QpState.SQE) {
            // rxe_completer checks the QP's state before its loop too (and drains the packets then).
            qp.count(SoftCounter.DROP_BAD_STATE);
            return;
        }
        boolean resending = recovery == Recovery.RESENDING;
        int from = resendFrom;
        run(p);
        // What the answer to a budgeted resend shows about the responder; only a resend that began at the
        // responder's own NAK says anything, and a go-back-N one (peer DROPS) sent more than its budget.
        if (resending && resendFromNak && peer != Responder.DROPS && recovery == Recovery.IDLE
                && (p.opcode & 0x1F) == Opcodes.ACKNOWLEDGE && Requester.RESEND_BUDGET > 0) {
            int budgetEnd = Psn.add(from, Requester.RESEND_BUDGET - 1);
            if (Psn.compare(p.psn, budgetEnd) > 0) {
                // The ACK that ended a resend acknowledges more than the resend sent: the responder held
                // what followed the gap. What was sent before the rewind is held or on its way: go on
                // after it. (A dropping responder answers so too when the NAK was spurious, the packet it named
                // only late: netem's reorder or duplication. So this is evidence, weighed against the other kind.)
                holdsSeen++;
                if (2 * dropsSeen < holdsSeen) {
                    peer = Responder.HOLDS;
                    if (Psn.compare(qp.requester.highWater, qp.requester.psn) > 0 && outstanding() != SendQueue.NONE) {
                        skipTo(qp.requester.highWater);
                    }
                }
            } else if (p.psn == from && Psn.compare(qp.requester.highWater, Psn.add(budgetEnd, 1)) > 0
                    && ++dropsSeen >= 2 && 2 * dropsSeen >= holdsSeen) {
                // More had been sent past the budget before the rewind, and the responder acknowledged the resend's
                // first packet only (rxe acknowledges it as it arrives, in sequence): it dropped the rest. From now
                // on resends are go-back-N. One that holds answers the first packet with how far its held requests
                // reach, so exactly that packet only when the one after it was lost too; one that drops, at every
                // real loss: at least a third of the answers (and twice) must say it drops. (An answer in between
                // shows a second gap inside the budget, and says nothing. Once DROPS, resends are no longer
                // budgeted, so the decision stays.)
                peer = Responder.DROPS;
            }
        }
        if (peer == Responder.DROPS) {
            long now = qp.fabric.clock.nanoTime();
            lossWindow.response(psn, now);
            armProbe(now);
        }
        // rxe's UPDATE_COMP and complete_wqe wake the requester if it waits for a PSN (req.wait_psn); ours runs
        // after every response, once the completer is done with it.
        qp.requester.run();
    }

    /**
     * {@return whether the requester times round trips here (against a dropping peer it does in its own way)} Only on
     * a path that segments at an MTU (a wire): so that the first losses against a dropping peer find an estimate,
     * a repeated NAK that comes too early is known (sequenceNak), and the in-process path reads no clock for it.
     */
    boolean timesRoundTrips() {
        return peer != Responder.DROPS && qp.payloadMax() != Integer.MAX_VALUE;
    }

    /**
     * Arms the loss probe's check if work is outstanding and none is armed (peer DROPS): a responder that drops
     * what follows a gap answers nothing once its one NAK for the gap is lost, or once the resend lost its first
     * packet (rxe check_psn: sent_psn_nak stays set), so silence is the only sign.
     */
    void armProbe(long nowNs) {
        long pto = lossWindow.pto(qp.timeout);
        if (pto > 0 && qp.probeDeadline == 0 && outstanding() != SendQueue.NONE) {
            qp.armProbe((lossWindow.lastActivityNs - nowNs > 0 ? lossWindow.lastActivityNs : nowNs) + pto);
        }
    }

    /**
     * The loss probe's check (peer DROPS): after a silence of {@link LossWindow#pto} with packets outstanding, the
     * requester goes back to comp.psn and sends that one packet again, asking for an ACK (rxe acknowledges a
     * duplicate with the PSN before the one it expects, duplicate_request, and an in-sequence request with its
     * own), and sends on only when that answer shows where the responder is: everything it had is acknowledged
     * and go-back-N goes on from there. A probe is not a retry (retry_cnt is not touched: rxe_comp.c counts only
     * the retransmit timer's and NAKs' retries); after {@link LossWindow#MAX_PROBES} unanswered ones the retransmit
     * timer decides as before, so a peer that is gone fails RETRY_EXC_ERR after the same time as with rxe.
     *
     * @return whether the requester has something to send now
     */
    boolean probeCheck(long nowNs) {
        if (peer != Responder.DROPS || outstanding() == SendQueue.NONE) {
            return false; // disarmed: the next send or response arms it again
        }
        long pto = lossWindow.pto(qp.timeout);
        if (pto == 0) {
            return false;
        }
        long due = lossWindow.lastActivityNs + pto;
        if (nowNs - due < 0) {
            qp.armProbe(due);
            return false;
        }
        if (lossWindow.probesUnanswered >= LossWindow.MAX_PROBES) {
            return false; // the retransmit timer's turn
        }
        lossWindow.probesUnanswered++;
        lossWindow.lastActivityNs = nowNs;
        qp.count(SoftCounter.LOSS_PROBES);
        goBackN();
        lossWindow.probing = true;
        qp.armProbe(nowNs + lossWindow.pto(qp.timeout));
        return true;
    }

    /** The retransmit timer expired with work outstanding (QpTimers.onTimers, rxe retransmit_timer). */
    void timeout() {
        run(null);
        qp.requester.run();
    }

    // ------------------------------------------------------------------ the state machine (rxe_completer)

    /**
     * rxe_completer's loop: from {@link CompState#GET_ACK}, each step returns the next state, and null where rxe
     * leaves the loop from inside a state ({@code goto done} or {@code goto exit}); {@link CompState#DONE} leaves
     * it too. The QP's {@link StateTrace}, if any, hears of each state entered.
     *
     * <p>rxe's completer is a task that dequeues the responses queued for it and runs again until it finds none;
     * here it runs once per response ({@link #onResponse}) and once per retransmit-timer expiry ({@link #timeout},
     * with no response). The timers are run by the timer agent (QpTimers.onTimers), which also does what rxe's EXIT
     * state does with the timer: it pushes the timer down the road when responses arrived since it was armed.
     *
     * @param p the response, or null for a retransmit timeout
     */
    private void run(Packet p) {
        StateTrace t = qp.trace; // one plain field read per run; null unless traced
        int tracePsn = p == null ? -1 : p.psn;
        CompState state = CompState.GET_ACK;
        if (t == null) {
            // Untraced, the path of a response that completes WQEs is called step by step, each step only if the
            // one before returned it: the same steps and transitions as the loop below (which takes over at any
            // other state), compiled as straight-line code; the switch per state cost about 5 ns per message
            // (CpuTimeRates write8, docs/benchmarks.md, "Session 9").
            state = getAck(p);
            while (state == CompState.GET_WQE) {
                state = getWqe(p);
                if (state == CompState.CHECK_PSN) {
                    state = checkPsn(p);
                }
                if (state == CompState.CHECK_ACK) {
                    state = checkAck(p);
                }
                if (state == CompState.WRITE_SEND) {
                    state = writeSend(p);
                } else if (state == CompState.READ) {
                    state = read(p);
                }
                if (state == CompState.UPDATE_COMP) {
                    state = updateComp(p);
                }
                if (state == CompState.COMP_ACK) {
                    state = completeAck();
                }
            }
            if (state == CompState.DONE) {
                return;
            }
        }
        do {
            if (t != null) {
                t.enter(qp, "comp", state, tracePsn);
            }
            state = switch (state) {
                case GET_ACK -> getAck(p);
                case GET_WQE -> getWqe(p);
                case CHECK_PSN -> checkPsn(p);
                case CHECK_ACK -> checkAck(p);
                case READ -> read(p);
                case ATOMIC -> atomic(p);
                case WRITE_SEND -> writeSend(p);
                case UPDATE_COMP -> updateComp(p);
                case COMP_ACK -> completeAck();
                case COMP_WQE -> completeWqe();
                case ERROR_RETRY -> errorRetry();
                case RNR_RETRY -> rnrRetry(p);
                case ERROR -> error();
                case EXIT -> exit();
                case DONE -> null;
            };
        } while (state != null);
    }

    /** GET_ACK: rxe dequeues the next response and clears comp.timeout_retry. */
    private CompState getAck(Packet p) {
        if (p != null) {
            // rxe behaviour (rxe_completer): every response packet that reaches the completer clears
            // comp.timeout_retry and the completer re-arms the retransmit timer on its way out, whether the
            // packet made progress or was a duplicate. So a peer that is still answering (for instance
            // replaying a long READ response because a request was resent) postpones the retry. Retrying
            // anyway makes rxe restart that READ response from the top each time: with 8 MiB reads under
            // a slow link the retries outran the replies and the READ never completed.
            qp.progressMade();
            if (peer != Responder.DROPS && lossWindow.sampling()) {
                // Before the response is processed: a go-back-N it starts ends the sample in progress (Karn), and
                // the response itself still times it. A NAK acknowledges what precedes its PSN, anything else its
                // PSN too.
                boolean nak = (p.opcode & 0x1F) == Opcodes.ACKNOWLEDGE && (p.syndrome & Aeth.TYPE_MASK) != Aeth.TYPE_ACK;
                lossWindow.sample(nak ? p.psn : Psn.add(p.psn, 1), qp.fabric.clock.nanoTime());
            }
        }
        return CompState.GET_WQE;
    }

    /**
     * GET_WQE (rxe get_wqe): the oldest WQE the requester has started. Without a response, EXIT, as rxe. rxe's
     * DONE and ERROR WQE states are not reached: ours completes a WQE when it completes it, and a requester
     * error completes its WQE itself.
     */
    private CompState getWqe(Packet p) {
        if (p == null) {
            return CompState.EXIT;
        }
        int w = outstanding();
        if (w == SendQueue.NONE) {
            // Not in rxe, whose go-back-N keeps a resent WQE PENDING: an ACK for a SEND/WRITE that go-back-N
            // rewound (RETRY or REWOUND). The responder holds what it acknowledges: complete the WQE if the ACK
            // covers it (COMP_WQE, then the next), else move comp.psn (UPDATE_COMP) and the resend skips what is
            // acknowledged.
            int r = rewound();
            if (r != SendQueue.NONE && (p.opcode & 0x1F) == Opcodes.ACKNOWLEDGE
                    && (p.syndrome & Aeth.TYPE_MASK) == Aeth.TYPE_ACK && Psn.compare(p.psn, psn) >= 0) {
                wqe = r;
                if (Psn.compare(p.psn, sq.lastPsn(r)) >= 0) {
                    return CompState.COMP_WQE;
                }
                ends = false;
                return CompState.UPDATE_COMP;
            }
            return CompState.DONE; // nothing outstanding: a stray or duplicate response
        }
        wqe = w;
        return CompState.CHECK_PSN;
    }

    /** CHECK_PSN (rxe check_psn), with the differences noted where they are. */
    private CompState checkPsn(Packet p) {
        int w = wqe;
        boolean readOrAtomic = sq.opcode(w).isReadOrAtomic();
        int diff = Psn.compare(p.psn, sq.lastPsn(w));
        if (diff > 0) {
            if (readOrAtomic) {
                if (sq.state(w) == SendQueue.PENDING) {
                    // A response beyond a read/atomic means its own response was lost.
                    cause = Cause.IMPLIED_NAK;
                    return CompState.ERROR_RETRY;
                }
                return CompState.DONE;
            }
            // A coalesced ACK covers this SEND/WRITE: complete it and look at the next. rxe completes
            // only a PENDING WQE here (check_psn); one that a resend is sending again is complete as
            // well: the responder has all of it (it held what followed a gap), and the resend waits
            // for this answer before it goes on (Requester.RESEND_BUDGET).
            return CompState.COMP_WQE;
        }
        diff = Psn.compare(p.psn, psn);
        if (diff < 0) {
            if (p.psn != sq.lastPsn(w) || !p.is(Opcodes.M_END)) {
                return CompState.DONE; // duplicate response
            }
            // A retried response that ends the WQE: rxe goes to COMP_ACK; we check it first (CHECK_ACK), so that
            // an ACK cannot complete a READ and a NAK is not taken for an ACK.
        } else if (diff > 0 && readOrAtomic) {
            // A response past comp.psn inside a READ: the ones between were lost (a responder sends a
            // READ's responses in order). rxe check_psn drops it (DONE) and leaves the loss to the retransmit
            // timer; we drop it too and ask again for the rest of the READ at once, as an implied NAK
            // (one per episode, like the one beyond a read: docs/roce.md, "Loss recovery").
            cause = Cause.IMPLIED_NAK;
            return CompState.ERROR_RETRY;
        }
        return CompState.CHECK_ACK;
    }

    /**
     * CHECK_ACK (rxe check_ack): the response's opcode against the WQE and comp's sequence, and its syndrome. rxe
     * fails a READ response or atomic acknowledge whose AETH is not an ACK (ERROR); we take its NAK as a NAK, as
     * for an ACKNOWLEDGE. An IBA Bad Response is BAD_RESP_ERR here (rxe: the WQE's status as it was).
     */
    private CompState checkAck(Packet p) {
        int w = wqe;
        return switch (p.opcode & 0x1F) {
            case Opcodes.READ_RESPONSE_FIRST, Opcodes.READ_RESPONSE_MIDDLE, Opcodes.READ_RESPONSE_LAST,
                 Opcodes.READ_RESPONSE_ONLY -> {
                if (sq.opcode(w) != WrOpcode.RDMA_READ) {
                    yield fail(WcStatus.BAD_RESP_ERR);
                }
                if (p.is(Opcodes.M_AETH) && (p.syndrome & Aeth.TYPE_MASK) != Aeth.TYPE_ACK) {
                    yield nak(p);
                }
                // rxe check_ack opcode sequence: a READ starts with FIRST or ONLY; once data has arrived
                // only MIDDLE or LAST may follow (a retried READ asks for the rest at the next PSN, and
                // the responder replays from there with MIDDLE/LAST), unless the whole READ restarts at
                // its first PSN. rxe rejects anything else (COMPST_ERROR); IBA calls an unexpected
                // response opcode a Bad Response error.
                boolean start = p.is(Opcodes.M_START);
                if (sq.received(w) == 0 ? !start : start && p.psn != sq.firstPsn(w)) {
                    yield fail(WcStatus.BAD_RESP_ERR);
                }
                yield CompState.READ;
            }
            case Opcodes.ATOMIC_ACKNOWLEDGE -> {
                if (!sq.opcode(w).isAtomic()) {
                    yield fail(WcStatus.BAD_RESP_ERR);
                }
                if ((p.syndrome & Aeth.TYPE_MASK) != Aeth.TYPE_ACK) {
                    yield nak(p);
                }
                yield CompState.ATOMIC;
            }
            case Opcodes.ACKNOWLEDGE -> {
                if ((p.syndrome & Aeth.TYPE_MASK) != Aeth.TYPE_ACK) {
                    yield nak(p);
                }
                // An ACK cannot complete a read or atomic: rxe goes to WRITE_SEND for any WQE, we are DONE.
                yield sq.opcode(w).isReadOrAtomic() ? CompState.DONE : CompState.WRITE_SEND;
            }
            default -> {
                qp.count(SoftCounter.DROP_MALFORMED);
                yield CompState.DONE;
            }
        };
    }

    /** The NAK part of CHECK_ACK (rxe check_ack, IB_OPCODE_RC_ACKNOWLEDGE): RNR_RETRY, ERROR_RETRY or ERROR. */
    private CompState nak(Packet p) {
        int syn = p.syndrome;
        return switch (syn & Aeth.TYPE_MASK) {
            case Aeth.TYPE_RNR_NAK -> {
                qp.count(SoftCounter.RCV_RNR_ERR);
                yield CompState.RNR_RETRY;
            }
            case Aeth.TYPE_NAK -> switch (syn) {
                case Aeth.NAK_PSN_SEQ_ERROR -> sequenceNak(p.psn);
                case Aeth.NAK_INVALID_REQ -> fail(WcStatus.REM_INV_REQ_ERR);
                case Aeth.NAK_REM_ACC_ERR -> fail(WcStatus.REM_ACCESS_ERR);
                default -> fail(WcStatus.REM_OP_ERR); // rxe maps REM_OP_ERR and unknown codes here
            };
            default -> {
                qp.count(SoftCounter.DROP_MALFORMED); // rxe: ERROR
                yield CompState.DONE;
            }
        };
    }

    /**
     * A PSN sequence-error NAK for the WQE. The NAK acknowledges everything before its PSN (IBA 9.7.5.1.2;
     * rxe check_ack sets comp.psn and counts rcvd_seq_err only then). Earlier WQEs were completed by
     * COMP_WQE; the NAK's PSN lies in this one, and go-back-N resumes it there. Whether the NAK starts a resend
     * is ERROR_RETRY's to decide ({@link #sequenceNakRetries}).
     */
    private CompState sequenceNak(int nakPsn) {
        this.nakPsn = nakPsn;
        nakMoved = false;
        if (Psn.compare(nakPsn, psn) > 0 && !sq.opcode(wqe).isReadOrAtomic()) {
            qp.count(SoftCounter.RCV_SEQ_ERR);
            psn = nakPsn;
            nakMoved = true;
        }
        cause = Cause.SEQ_NAK;
        return CompState.ERROR_RETRY;
    }

    /** READ (rxe do_read): the response's payload into the WQE's SGEs. */
    private CompState read(Packet p) {
        int w = wqe;
        if (p.is(Opcodes.M_START)) {
            sq.setReceived(w, 0);
        }
        long room = sq.length(w) - sq.received(w);
        if (p.payloadLen > room) {
            return fail(WcStatus.BAD_RESP_ERR);
        }
        try {
            if (p.payloadLen > 0) {
                Sgl.transfer(p.payload, p.payloadOff, sq.sgl(w), sq.received(w), p.payloadLen);
            }
        } catch (IllegalStateException | IndexOutOfBoundsException e) {
            return fail(WcStatus.LOC_PROT_ERR); // rxe do_read: copy failure
        }
        sq.setReceived(w, sq.received(w) + p.payloadLen);
        // rxe: COMP_ACK when the READ's last response is in, else UPDATE_COMP; here UPDATE_COMP first, see there.
        ends = p.is(Opcodes.M_END);
        return CompState.UPDATE_COMP;
    }

    /** ATOMIC (rxe do_atomic): the original value into the WQE's SGEs. */
    private CompState atomic(Packet p) {
        try {
            // The original value, in host order, into the first 8 bytes of the local SGEs, which may
            // be longer or split (rxe do_atomic: copy_data of 8 bytes).
            orig.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, p.origValue);
            Sgl.transfer(origSgl, 0, sq.sgl(wqe), 0, 8);
        } catch (IllegalStateException | IndexOutOfBoundsException e) {
            return fail(WcStatus.LOC_PROT_ERR);
        }
        ends = true; // rxe: COMP_ACK; here UPDATE_COMP first, see there
        return CompState.UPDATE_COMP;
    }

    /**
     * WRITE_SEND: the ACK ends the WQE if it acknowledges its last PSN: the responder has executed the whole
     * message. rxe completes only a PENDING WQE here; a WQE that go-back-N is sending again is complete as well
     * (else a later retry would resume it past its last PSN).
     */
    private CompState writeSend(Packet p) {
        ends = p.psn == sq.lastPsn(wqe);
        return CompState.UPDATE_COMP;
    }

    /**
     * UPDATE_COMP: comp.psn past the response, the retry budget whole again ({@link #progress}); then COMP_ACK if
     * the response ends its WQE, else DONE. rxe's order is the other way round (READ, ATOMIC or WRITE_SEND go to
     * COMP_ACK, which goes on to UPDATE_COMP): ours keeps the order its effects always had, since progress() may
     * rewind the requester before the WQE completes and complete() may move the requester after it.
     */
    private CompState updateComp(Packet p) {
        psn = Psn.add(p.psn, 1);
        progress();
        return ends ? CompState.COMP_ACK : CompState.DONE;
    }

    /** COMP_ACK (rxe complete_ack): the WQE the response ends; comp.psn is already past it, so DONE. */
    private CompState completeAck() {
        complete(wqe);
        return CompState.DONE;
    }

    /** COMP_WQE (rxe complete_wqe): a WQE that a later PSN acknowledged; then the next (GET_WQE). */
    private CompState completeWqe() {
        complete(wqe);
        return CompState.GET_WQE;
    }

    /**
     * EXIT: entered without a response only, that is from the retransmit timer (rdma4j runs the completer for
     * nothing else): rxe's comp.timeout_retry is set and a WQE is there, so ERROR_RETRY. rxe's re-arming of the
     * timer here is the timer agent's (see {@link #run}).
     */
    private CompState exit() {
        cause = Cause.TIMEOUT;
        return CompState.ERROR_RETRY;
    }

    /**
     * ERROR_RETRY (rxe COMPST_ERROR_RETRY): count a retry (7 = forever, as rxe does) and start a resend from
     * comp.psn, or fail the WQE (ERROR). rxe's comp.started_retry ignores every NAK and implied NAK while a retry
     * is under way; ours ignores implied NAKs so, and decides for sequence NAKs by the rules of docs/roce.md,
     * "Loss recovery" ({@link #sequenceNakRetries}). rxe tells the requester to retry (req.need_retry); ours
     * rewinds it here (go-back-N) and it sends when the completer is done.
     */
    private CompState errorRetry() {
        if (cause == Cause.SEQ_NAK && !sequenceNakRetries()) {
            return null; // rxe: goto done
        }
        int w = outstanding();
        if (w == SendQueue.NONE) {
            return null; // rxe: nothing to retry, goto exit
        }
        // rxe behaviour (rxe_completer, comp.started_retry): once a retry has started, implied NAKs start
        // no other until progress or a timeout. With many reads outstanding, every response of a later
        // read is an implied NAK of the one with a gap; retrying on each re-sent all the reads again and
        // rxe replayed every one of them, so 50 outstanding 64 KiB reads under 2% loss never completed.
        // (Sequence NAKs get this far only when sequenceNakRetries decided that they start a resend.)
        if (recovery == Recovery.RESENDING && cause == Cause.IMPLIED_NAK) {
            return null; // rxe: goto done
        }
        if (retryCnt > 0) {
            // rxe treats retry_cnt 7 as infinite too, although IBA gives that meaning to rnr_retry only.
            if (retryCnt != 7) {
                retryCnt--;
            }
            qp.count(SoftCounter.COMPLETER_RETRY_ERR);
            qp.count(cause == Cause.TIMEOUT ? SoftCounter.RETRY_TIMEOUTS : SoftCounter.RETRY_NAKS);
            SoftEvents.retransmit(qp, psn, cause.name(), retryCnt);
            recovery = Recovery.RESENDING;
            resendFrom = psn;
            resendFromNak = (cause == Cause.SEQ_NAK || cause == Cause.REPEATED_NAK) && psn == nakPsn;
            if (peer == Responder.DROPS) {
                lossWindow.retry(cause == Cause.TIMEOUT, Psn.compare(qp.requester.highWater, psn),
                        qp.fabric.clock.nanoTime());
            } else if (timesRoundTrips()) {
                lossWindow.resendStarted(qp.fabric.clock.nanoTime()); // for a repeated NAK that comes too early
            }
            goBackN();
            qp.retransDeadline = 0;
            qp.armRetransmit();
            return null; // rxe: goto done
        }
        qp.count(SoftCounter.RETRY_EXCEEDED_ERR);
        wqe = w;
        return fail(WcStatus.RETRY_EXC_ERR);
    }

    /**
     * Whether a sequence NAK starts a resend (docs/roce.md, "Loss recovery"): with no resend under way it does,
     * as in rxe. During a resend, rxe ignores every NAK until a response makes progress or the timer fires, so a
     * second loss inside one resend of a long message waited for the retransmit timer. Here a NAK whose PSN is
     * past the resend's start shows that the resend got that far and was lost again: that is progress (the retry
     * budget is reset, as any progress resets it) and the next resend starts at once. A NAK at the resend's start
     * is the responder's answer to an AckReq packet of the resend itself ({@link Responder} repeats its NAK only
     * for those): the resend's first packet was lost too, so the next resend starts at once, and counts as a
     * retry without progress (cause REPEATED_NAK).
     */
    private boolean sequenceNakRetries() {
        if (peer == Responder.DROPS && lossWindow.beforeRewind(qp.fabric.clock.nanoTime())) {
            // A NAK that left the responder before the go-back-N under way reached it (less than a round trip
            // since it began): about a packet that go-back-N sends again anyway, or has already (a reordered
            // packet rxe dropped, or a second loss among what it threw away). Restarting from here would send
            // again what is on its way (rxe acknowledges each such duplicate). It still acknowledges what came
            // before it; a resend behind its PSN skips ahead.
            qp.count(SoftCounter.SEQ_NAKS_COVERED);
            if (nakMoved) {
                progress();
            }
            return false;
        }
        if (recovery == Recovery.RESENDING) {
            if (Psn.compare(psn, resendFrom) > 0) {
                resetRetryCounters();
            } else if (lossWindow.beforeRewind(qp.fabric.clock.nanoTime())) {
                // The NAK at the resend's own start, but less than a round trip after the resend began: it left the
                // responder before the resend's packets reached it, so it cannot say that the resend lost its first
                // packet. It is a copy the network duplicated, or the responder's answer to an earlier pass or to a
                // reordered or duplicated packet sent before the rewind. Restarting the resend for it, and counting
                // a retry without progress each time, exhausted retry_cnt 6 within one round trip on a path that
                // had lost nothing for good (ib_write_bw between two processes under netem's loss, duplicate and
                // delay 1ms reorder 5 %; SoftNetemReorderTest.aStreamOfWritesUnderAllFour...). The resend goes on;
                // if its first packet was lost, the repeat for its own AckReq packet comes after the round trip, or
                // the timer. (Against a responder that drops, the rule above already ignored this NAK.)
                qp.count(SoftCounter.SEQ_NAKS_EARLY);
                return false;
            } else {
                cause = Cause.REPEATED_NAK;
            }
        }
        return true;
    }

    /**
     * RNR_RETRY (rxe COMPST_RNR_RETRY): count an RNR retry (7 = forever, IBA 9.7.5.2.8) and wait the delay the
     * NAK asks for, or fail the WQE (ERROR). rxe sets req.need_retry and the RNR timer, and the requester goes
     * back when it fires; ours rewinds the requester at once (go-back-N from the NAK's PSN) and the timer
     * (QpTimers.onTimers) sends again.
     */
    private CompState rnrRetry(Packet p) {
        int syn = p.syndrome;
        if (rnrRetry > 0) {
            if (rnrRetry != 7) {
                rnrRetry--;
            }
            psn = p.psn;
            SoftEvents.rnrNak(qp, p.psn, Aeth.rnrDelayNs(syn), rnrRetry);
            resendFromNak = false; // a responder that is not ready holds nothing
            goBackN();
            qp.armRnr(Aeth.rnrDelayNs(syn));
            return null; // rxe: goto exit
        }
        qp.count(SoftCounter.RNR_RETRY_EXCEEDED_ERR);
        return fail(WcStatus.RNR_RETRY_EXC_ERR);
    }

    /** {@return ERROR, with the status it completes the WQE with} */
    private CompState fail(WcStatus s) {
        status = s;
        return CompState.ERROR;
    }

    /** ERROR (rxe COMPST_ERROR): complete the WQE with its error status and move the QP to ERR. */
    private CompState error() {
        qp.completeSend(wqe, status);
        qp.moveToError();
        return null; // rxe: goto exit
    }

    private void progress() {
        resetRetryCounters();
        qp.progressMade();
        if (Psn.compare(psn, qp.requester.psn) > 0 && outstanding() != SendQueue.NONE) {
            // A resend is behind what the responder has now acknowledged (it held the packets that
            // followed the gap): go on from there instead of sending them again.
            goBackN();
        }
    }

    private void complete(int w) {
        psn = Psn.add(sq.lastPsn(w), 1);
        qp.completeSend(w, WcStatus.SUCCESS);
        if (sq.reqBehindComp()) {
            // The requester was sending w again (go-back-N) when the rest of its responses arrived: it
            // continues with the next WQE, at the PSN after w.
            sq.rewindReq();
            qp.requester.psn = psn;
        }
        resetRetryCounters();
        // The retransmit timer is left armed: when it fires with nothing outstanding it disarms itself,
        // which keeps clock reads and timer wake-ups off the per-message path.
        qp.progressMade();
        qp.maybeSqDrained();
    }

    /**
     * Go-back-N (rxe req_retry): the requester restarts at the oldest uncompleted WQE and PSN. Packets
     * of that WQE already acknowledged are skipped; a partly answered RDMA READ is re-issued for the
     * rest; later WQEs are sent again whole.
     */
    void goBackN() {
        if (sq.reqAtComp() && outstanding() == SendQueue.NONE) {
            return; // nothing sent, or already rewound and not yet resent
        }
        qp.requester.psn = psn;
        lossWindow.rewound(); // Karn: a timed packet may be sent again
        if (recovery == Recovery.RESENDING) {
            resendFrom = psn; // the resend's budget counts from where it starts now (an RNR NAK moves it)
        }
        for (long i = sq.comp(); i != sq.head(); i++) {
            int w = sq.slot(i);
            if (sq.state(w) == SendQueue.POSTED) {
                break;
            }
            if (i == sq.comp()) {
                if (sq.opcode(w) == WrOpcode.RDMA_READ) {
                    // rxe req_retry: a partly answered READ asks again for the rest only.
                    sq.setSent(w, sq.received(w));
                } else if (sq.opcode(w).isAtomic()) {
                    sq.setSent(w, 0);
                } else {
                    // rxe retry_first_write_send: skip the packets comp.psn says have arrived; at least
                    // the last packet goes again (it carries the completion and the immediate data).
                    long max = qp.payloadMax();
                    long length = sq.length(w);
                    long npkts = length == 0 ? 1 : (length + max - 1) / max;
                    long acked = Math.min(Math.max(0, Psn.compare(psn, sq.firstPsn(w))), npkts - 1);
                    sq.setSent(w, acked * max);
                }
                sq.setState(w, SendQueue.RETRY);
            } else {
                sq.setState(w, SendQueue.REWOUND);
                if (sq.tookCredit(w)) {
                    sq.setTookCredit(w, false);
                    qp.requester.rdAtomicAvail++;
                }
            }
        }
        sq.rewindReq();
    }

    /**
     * Puts the requester back at PSN {@code to}, past comp.psn but not past the highest PSN it ever sent:
     * the WQEs before {@code to} were sent whole before a rewind and wait for their acknowledgements
     * again, the one that holds {@code to} goes on from there. For a responder that holds what follows a
     * gap (docs/roce.md, "Loss recovery"), so that what it holds or what is still on its way is not sent
     * again.
     */
    private void skipTo(int to) {
        long i = sq.comp();
        for (; i != sq.head(); i++) {
            int w = sq.slot(i);
            int st = sq.state(w);
            if (st != SendQueue.REWOUND && st != SendQueue.RETRY && st != SendQueue.PROCESSING
                    && st != SendQueue.PENDING) {
                break; // never started: nothing past here was sent
            }
            if (st == SendQueue.RETRY && sq.opcode(w) == WrOpcode.RDMA_READ) {
                return; // a partly answered READ asks for its rest first
            }
            if (Psn.compare(to, sq.lastPsn(w)) > 0) {
                if (sq.opcode(w).isReadOrAtomic() && !sq.tookCredit(w)) {
                    if (qp.requester.rdAtomicAvail <= 0) {
                        to = sq.firstPsn(w); // no credit to wait for it with: it goes again from here
                        sq.setState(w, SendQueue.REWOUND);
                        break;
                    }
                    qp.requester.rdAtomicAvail--;
                    sq.setTookCredit(w, true);
                }
                sq.setState(w, SendQueue.PENDING);
                continue;
            }
            if (sq.opcode(w).isReadOrAtomic()) {
                // a read or atomic is one request: it goes again whole
                if (sq.tookCredit(w)) {
                    sq.setTookCredit(w, false);
                    qp.requester.rdAtomicAvail++;
                }
                sq.setState(w, SendQueue.REWOUND);
                to = sq.firstPsn(w);
                break;
            }
            sq.setSent(w, (long) Psn.compare(to, sq.firstPsn(w)) * qp.payloadMax());
            sq.setState(w, SendQueue.PROCESSING);
            break;
        }
        sq.moveReq(i);
        qp.requester.psn = to;
        lossWindow.rewound();
    }
}
