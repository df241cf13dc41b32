// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit.model;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.DeviceAttributes;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;

/**
 * Brings queue pairs from RESET to RTS with exactly the attributes verbs-dma.md 4.3 requires for each
 * transition and QP type (ibv_modify_qp.3 tables).
 */
final class Wiring {
    /** The Q_Key every UD QP of these tests uses. */
    static final int QKEY = 0x1111_1111;
    /** Port number. */
    static final int PORT = 1;
    /** GID index. */
    static final int GID_INDEX = 0;

    private Wiring() {
    }

    /** {@return the remote access flags an RC or UC QP grants as responder} */
    static Set<AccessFlag> qpAccess(QpType type) {
        return type == QpType.RC
                ? Set.of(AccessFlag.REMOTE_WRITE, AccessFlag.REMOTE_READ, AccessFlag.REMOTE_ATOMIC)
                : Set.of(AccessFlag.REMOTE_WRITE);
    }

    /** {@return RDMA READ/atomic depth to ask for: what both devices allow, at most 16, at least 1} */
    static int rdAtomic(Context a, Context b) {
        DeviceAttributes da = a.queryDevice();
        DeviceAttributes db = b.queryDevice();
        int n = Math.min(16, Math.min(Math.min(da.maxQpRdAtom(), da.maxQpInitRdAtom()),
                Math.min(db.maxQpRdAtom(), db.maxQpInitRdAtom())));
        return Math.max(1, n);
    }

    /**
     * Connects {@code qp} (on {@code ctx}) to {@code peer} (on {@code peerCtx}), one direction: RESET →
     * INIT → RTR → RTS. Call it twice, swapping the arguments, to connect a pair.
     *
     * @param qp      an RC or UC QP in RESET
     * @param peer    the remote QP
     * @param peerCtx the remote context (for its GID)
     * @param mtu     path MTU
     * @param sqPsn   this QP's first send PSN
     * @param rqPsn   the peer's first send PSN
     * @param rdAtom  RDMA READ/atomic depth (RC)
     */
    static void connect(QueuePair qp, QueuePair peer, Context peerCtx, Mtu mtu, int sqPsn, int rqPsn, int rdAtom) {
        QpType type = qp.type();
        if (type != QpType.RC && type != QpType.UC) {
            throw new IllegalArgumentException("connect() is for RC and UC, got " + type);
        }
        qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(PORT).accessFlags(qpAccess(type)));
        QpAttributes rtr = new QpAttributes().state(QpState.RTR)
                .av(new AhAttributes().dgid(peerCtx.queryGid(PORT, GID_INDEX)).sgidIndex(GID_INDEX).portNum(PORT))
                .pathMtu(mtu).destQpNum(peer.qpNum()).rqPsn(rqPsn);
        if (type == QpType.RC) {
            rtr.maxDestRdAtomic(rdAtom).minRnrTimer(12);
        }
        qp.modify(rtr);
        QpAttributes rts = new QpAttributes().state(QpState.RTS).sqPsn(sqPsn);
        if (type == QpType.RC) {
            rts.timeout(14).retryCnt(7).rnrRetry(7).maxRdAtomic(rdAtom);
        }
        qp.modify(rts);
    }

    /**
     * Brings a UD QP to RTS.
     *
     * @param qp    a UD QP in RESET
     * @param sqPsn first send PSN
     */
    static void activateUd(QueuePair qp, int sqPsn) {
        qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(PORT).qkey(QKEY));
        qp.modify(new QpAttributes().state(QpState.RTR));
        qp.modify(new QpAttributes().state(QpState.RTS).sqPsn(sqPsn));
    }

    /** {@return the address vector that reaches {@code peerCtx}'s port 1} */
    static AhAttributes addressOf(Context peerCtx) {
        return new AhAttributes().dgid(peerCtx.queryGid(PORT, GID_INDEX)).sgidIndex(GID_INDEX).portNum(PORT);
    }

    /**
     * Takes and acknowledges every asynchronous event queued on {@code ctx} (objects cannot be
     * destroyed while they have unacknowledged events).
     *
     * @return the events taken
     */
    static List<AsyncEvent> drainAsyncEvents(Context ctx) {
        List<AsyncEvent> events = new ArrayList<>();
        for (int i = 0; i < 10_000; i++) {
            AsyncEvent ev = ctx.getAsyncEvent(Duration.ZERO);
            if (ev == null) {
                break;
            }
            events.add(ev);
            ctx.ackAsyncEvent(ev);
        }
        return events;
    }
}
