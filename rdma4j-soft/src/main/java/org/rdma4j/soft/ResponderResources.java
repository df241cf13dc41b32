// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.common.Psn;
import org.rdma4j.dma.DmaPiece;
import org.rdma4j.dma.DmaSpace;
import org.rdma4j.verbs.QpState;

/**
 * The responder resources for RDMA READ and atomics (rxe struct resp_res, max_dest_rd_atomic of them): the READ
 * reply in progress, sent in bursts ({@link RespState#READ_REPLY}, resumed by {@link #continueReply} in later duty
 * cycles of the QP: docs/engine.md, "Pacing"), and the replay of a duplicate READ or atomic (rxe
 * duplicate_request). Called by the QP's owner only.
 */
final class ResponderResources {
    private final Responder resp;
    private final SoftQp qp;
    private final Sgl one;
    private final DmaPiece piece = new DmaPiece();

    // Responder resources for RDMA READ and atomics (rxe resp_res), replayed for duplicates.
    private Resource[] res = new Resource[0];
    private int resNext;

    /** A responder resource (rxe struct resp_res): a READ or an atomic executed, kept to answer its duplicates. */
    static final class Resource {
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
    boolean replying;
    private boolean replyResumed;
    private Resource replyRes;
    private SoftMr replyMr;
    private int replyRkey;
    private long replyVa;
    private long replyLeft;
    private int replyPsn;
    private boolean replyFirst;

    ResponderResources(Responder resp, SoftQp qp) {
        this.resp = resp;
        this.qp = qp;
        this.one = new Sgl(1, qp.device.dma);
    }

    void reset() {
        endReply();
        for (Resource r : res) {
            r.type = 0;
        }
    }

    void resize(int n) {
        int size = Bytes.ceilPow2(n);
        if (size != res.length) {
            res = new Resource[size];
            for (int i = 0; i < size; i++) {
                res[i] = new Resource();
            }
            resNext = 0;
        }
    }

    /** {@return the next resource (rxe rxe_prepare_res), taken for a READ of {@code npkts} responses} */
    Resource read(int psn, int npkts, long va, int rkey, int len) {
        Resource r = res[resNext];
        resNext = (resNext + 1) & (res.length - 1);
        r.type = Resource.READ;
        r.firstPsn = psn;
        r.lastPsn = Psn.add(psn, npkts - 1);
        r.va = va;
        r.rkey = rkey;
        r.length = len;
        r.epoch = qp.pacer.epoch();
        return r;
    }

    /** Takes the next resource (rxe rxe_prepare_res) for an atomic executed, with its original value. */
    void atomic(int psn, long orig) {
        Resource r = res[resNext];
        resNext = (resNext + 1) & (res.length - 1);
        r.type = Resource.ATOMIC;
        r.firstPsn = psn;
        r.lastPsn = psn;
        r.orig = orig;
    }

    /**
     * A duplicate READ that resource {@code r} answered (rxe duplicate_request): its responses again, from the PSN
     * asked for; or, while that READ's reply is still being sent, the reply moved ({@link #reReadDuringReply}).
     *
     * @return {@link RespState#READ_REPLY} for a replay to send, {@link RespState#CLEANUP} when there is none
     */
    RespState replayRead(Packet p, Resource r) {
        long end = r.va + (r.length & 0xFFFF_FFFFL);
        long len = p.dmaLen & 0xFFFF_FFFFL;
        if (p.va < r.va || p.va + len > end || p.rkey != r.rkey) {
            return RespState.CLEANUP; // not a subset of the original request: drop
        }
        SoftMr mr = qp.device.lookupMr(r.rkey);
        if (mr == null || !mr.contains(p.va, len)) {
            return RespState.CLEANUP;
        }
        if (replying && r == replyRes) {
            reReadDuringReply(p, len);
            return RespState.CLEANUP;
        }
        // A re-read: the requester lost responses we sent (or gave up waiting for them). The pacer widens
        // the gap between this QP's bursts, once for what it sent at the current gap (docs/engine.md, "Pacing").
        if (lostSince(r, p.psn)) {
            qp.count(SoftCounter.PACE_SLOWDOWNS);
        }
        r.epoch = qp.pacer.epoch();
        // rxe duplicate_request: replay from the requested PSN; past the first PSN the numbering
        // and the opcodes continue the original sequence (MIDDLE/LAST).
        start(r, mr, r.rkey, p.va, (int) len, p.psn, p.psn == r.firstPsn);
        return RespState.READ_REPLY;
    }

    /**
     * Sets up the responses of an RDMA READ from {@code firstPsn} on (rxe read_reply): the first burst leaves in
     * the responder's {@link RespState#READ_REPLY} ({@link #sendBurst}), the rest from {@link #continueReply} in later
     * duty cycles of the QP.
     *
     * @param fromStart the responses start the READ's response sequence (FIRST or ONLY); false for a
     *                  replay that resumes in the middle (MIDDLE ... LAST, rxe read_reply in
     *                  rdatm_res_state_replay), which is what a requester that already holds the
     *                  first part expects (rxe check_ack accepts only MIDDLE/LAST then)
     */
    void start(Resource r, SoftMr mr, int rkey, long va, int len, int firstPsn, boolean fromStart) {
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
     *     asks again for part of it), which {@link #replayRead} folds into the reply instead of answering after it}
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
        // rxe: the next run of rxe_responder goes from get_req to RESPST_READ_REPLY while qp->resp.res is set
        StateTrace t = qp.trace;
        if (t != null) {
            t.enter(qp, "resp", RespState.READ_REPLY, replyPsn);
        }
        sendBurst();
    }

    /** Sends the next burst of the READ being answered ({@link #continueReply}); the responder's READ_REPLY. */
    void sendBurst() {
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
        boolean paced = max != Integer.MAX_VALUE && !resp.held.draining;
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
            Packet o = resp.acks.response(first && last ? Opcodes.READ_RESPONSE_ONLY : first ? Opcodes.READ_RESPONSE_FIRST
                    : last ? Opcodes.READ_RESPONSE_LAST : Opcodes.READ_RESPONSE_MIDDLE, replyPsn);
            o.syndrome = Aeth.ACK_UNLIMITED;
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

    void endReply() {
        replying = false;
        replyMr = null;
        replyRes = null;
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

    /** {@return the resource whose PSNs hold {@code pktPsn} (rxe find_resource), or null} */
    Resource find(int pktPsn) {
        for (Resource r : res) {
            if (r.type != 0 && Psn.compare(pktPsn, r.firstPsn) >= 0 && Psn.compare(pktPsn, r.lastPsn) <= 0) {
                return r;
            }
        }
        return null;
    }
}
