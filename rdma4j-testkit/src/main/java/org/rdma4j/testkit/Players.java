// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit;

import java.util.EnumSet;
import java.util.Set;

import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttrMask;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.SharedReceiveQueue;
import org.rdma4j.verbs.cm.CmId;

/**
 * Builds connected QPs on the fabric's two devices, after rdma-core's {@code tests/base.py} players
 * ({@code RCResources}, {@code UDResources}) and ibv_rc_pingpong's {@code pp_connect_ctx}. Every
 * object it creates is registered with the test's tracker and closed after the test.
 *
 * <p>The attribute sets are exactly the required ones of verbs-dma.md 4.3 (kernel
 * {@code qp_state_table}): nothing optional is added, so a device that demands more fails here.
 */
public final class Players {
    private final ConformanceTestBase base;

    Players(ConformanceTestBase base) {
        this.base = base;
    }

    /**
     * Creates PD (unless given), CQs, channels, SRQ and a QP in RESET on {@code ctx}.
     *
     * @param ctx the context
     * @param cfg parameters
     * @return the endpoint
     */
    public Endpoint endpoint(Context ctx, QpConfig cfg) {
        return endpoint(ctx, cfg, null);
    }

    private Endpoint endpoint(Context ctx, QpConfig cfg, CmId cmId) {
        ProtectionDomain pd = cfg.srq() != null ? cfg.srq().pd() : cfg.pd();
        if (pd == null) {
            pd = base.track(ctx.allocPd());
        }
        CompletionChannel sendChannel = cfg.sendChannel() ? base.track(ctx.createCompChannel()) : null;
        CompletionChannel recvChannel = cfg.recvChannel() ? base.track(ctx.createCompChannel()) : null;
        CompletionQueue sendCq = base.track(ctx.createCq(cfg.sendCqSize(), sendChannel, 0));
        CompletionQueue recvCq = base.track(ctx.createCq(cfg.recvCqSize(), recvChannel, 0));
        SharedReceiveQueue srq = cfg.srq();
        if (srq == null && cfg.createSrq()) {
            srq = base.track(pd.createSrq(cfg.srqMaxWr(), cfg.maxRecvSge()));
        }
        QpInitAttributes init = new QpInitAttributes()
                .type(cfg.type())
                .sendCq(sendCq)
                .recvCq(recvCq)
                .srq(srq)
                .sqSigAll(cfg.sqSigAll())
                .cap(new QpCapabilities(cfg.maxSendWr(), srq != null ? 0 : cfg.maxRecvWr(), cfg.maxSendSge(),
                        srq != null ? 0 : cfg.maxRecvSge(), cfg.maxInlineData()));
        QueuePair qp = base.track(cmId != null ? cmId.createQp(pd, init) : pd.createQp(init));
        return new Endpoint(ctx, pd, sendCq, recvCq, sendChannel, recvChannel, srq, qp, cfg);
    }

    /**
     * {@return a connected RC pair in RTS}
     *
     * @param cfg parameters of both sides
     */
    public QpPair rc(QpConfig cfg) {
        return connected(cfg.copy().type(QpType.RC), cfg.copy().type(QpType.RC).sqPsn(cfg.sqPsn() + 0x1000));
    }

    /**
     * {@return a connected UC pair in RTS}
     *
     * @param cfg parameters of both sides
     */
    public QpPair uc(QpConfig cfg) {
        return connected(cfg.copy().type(QpType.UC), cfg.copy().type(QpType.UC).sqPsn(cfg.sqPsn() + 0x1000));
    }

    /**
     * {@return the two QPs connected to each other, in RTS}
     *
     * @param local  parameters of the side on device 0
     * @param remote parameters of the side on device 1 (same type)
     */
    public QpPair connected(QpConfig local, QpConfig remote) {
        if (local.type() != remote.type() || local.type() == QpType.UD) {
            throw new IllegalArgumentException("connected pair needs two RC or two UC configs, got "
                    + local.type() + " and " + remote.type());
        }
        if (base.fabric.cm() != null && local.type() == QpType.RC) {
            return connectedThroughCm(local, remote);
        }
        Endpoint a = endpoint(base.ctxA, local);
        Endpoint b = endpoint(base.ctxB, remote);
        connect(a, b);
        connect(b, a);
        return new QpPair(a, b);
    }

    /**
     * An RC pair connected by the fabric's CM (iWARP, {@link CmConnector}): side A's QP is the test's own on
     * {@code ctxA}; side B's QP is made by the passive CM ID on the CM's context for the device, which is
     * {@code ctxB} when the fabric's {@link Fabric#openContext} gives it (then B's PD and SRQ may be the
     * test's). What the pair connects with is the configs' RDMA READ depth; the IB attributes (PSNs,
     * timeouts, retry counts, path MTU) do not exist on iWARP.
     */
    private QpPair connectedThroughCm(QpConfig local, QpConfig remote) {
        ProtectionDomain pdB = remote.srq() != null ? remote.srq().pd() : remote.pd();
        if (pdB != null && pdB.context() != base.ctxB) {
            org.junit.jupiter.api.Assumptions.abort("on iWARP side B's QP is made on the CM's context: a PD or SRQ"
                    + " of another context cannot be used there");
        }
        Endpoint a = endpoint(base.ctxA, local);
        int depth = Math.max(1, Math.min(local.maxRdAtomic(), remote.maxRdAtomic()));
        Endpoint[] b = new Endpoint[1];
        CmConnector.connect(base.fabric, a.qp(), depth, passive -> {
            if (pdB != null && passive.context() != pdB.context()) {
                throw new IllegalStateException("the fabric's context 1 is not the CM's context for "
                        + base.fabric.device(1).name() + ": its PD cannot serve the passive CM ID's QP");
            }
            b[0] = endpoint(passive.context(), remote, passive);
            return b[0].qp();
        }, base::track);
        return new QpPair(a, b[0]);
    }

    /**
     * Brings {@code self}'s QP through RESET→INIT→RTR→RTS towards {@code peer} (only the required
     * attributes of each transition).
     *
     * @param self the endpoint to move
     * @param peer the endpoint it talks to
     */
    public static void connect(Endpoint self, Endpoint peer) {
        QpConfig cfg = self.config();
        self.qp().modify(initAttrs(cfg, Set.of()));
        self.qp().modify(rtrAttrs(cfg, peer.gid(), peer.qpNum(), peer.config().sqPsn(), Set.of()));
        self.qp().modify(rtsAttrs(cfg, Set.of()));
    }

    /**
     * {@return two UD QPs in RTS; build address handles with {@link #ah}}
     *
     * @param cfg parameters for both sides (UD)
     */
    public QpPair ud(QpConfig cfg) {
        Endpoint a = endpoint(base.ctxA, cfg.copy().type(QpType.UD));
        Endpoint b = endpoint(base.ctxB, cfg.copy().type(QpType.UD).sqPsn(cfg.sqPsn() + 0x1000));
        for (Endpoint e : new Endpoint[] {a, b}) {
            e.qp().modify(initAttrs(e.config(), Set.of()));
            e.qp().modify(rtrAttrs(e.config(), Gid.ZERO, 0, 0, Set.of()));
            e.qp().modify(rtsAttrs(e.config(), Set.of()));
        }
        return new QpPair(a, b);
    }

    /**
     * {@return a tracked address handle towards {@code to}}
     *
     * @param from the sender (its PD owns the AH)
     * @param to   the destination
     */
    public AddressHandle ah(Endpoint from, Endpoint to) {
        return base.track(from.pd().createAh(av(to.gid())));
    }

    /**
     * {@return the address vector the players use: global, sgid_index 0, port 1, hop limit 64}
     *
     * @param dgid destination GID
     */
    public static AhAttributes av(Gid dgid) {
        return new AhAttributes().dgid(dgid).sgidIndex(0).portNum(1).hopLimit(64).global(true);
    }

    /**
     * {@return the attributes verbs-dma.md 4.3 requires on that transition (besides STATE)}
     *
     * @param type QP type
     * @param to   target state of the transition from its predecessor on the normal path
     *             (INIT from RESET, RTR from INIT, RTS from RTR)
     */
    public static Set<QpAttrMask> required(QpType type, QpState to) {
        return switch (to) {
            case INIT -> type == QpType.UD
                    ? EnumSet.of(QpAttrMask.PKEY_INDEX, QpAttrMask.PORT, QpAttrMask.QKEY)
                    : EnumSet.of(QpAttrMask.PKEY_INDEX, QpAttrMask.PORT, QpAttrMask.ACCESS_FLAGS);
            case RTR -> switch (type) {
                case UD -> EnumSet.noneOf(QpAttrMask.class);
                case UC -> EnumSet.of(QpAttrMask.AV, QpAttrMask.PATH_MTU, QpAttrMask.DEST_QPN, QpAttrMask.RQ_PSN);
                case RC -> EnumSet.of(QpAttrMask.AV, QpAttrMask.PATH_MTU, QpAttrMask.DEST_QPN, QpAttrMask.RQ_PSN,
                        QpAttrMask.MAX_DEST_RD_ATOMIC, QpAttrMask.MIN_RNR_TIMER);
            };
            case RTS -> type == QpType.RC
                    ? EnumSet.of(QpAttrMask.TIMEOUT, QpAttrMask.RETRY_CNT, QpAttrMask.RNR_RETRY, QpAttrMask.SQ_PSN,
                            QpAttrMask.MAX_QP_RD_ATOMIC)
                    : EnumSet.of(QpAttrMask.SQ_PSN);
            default -> throw new IllegalArgumentException("no normal-path transition into " + to);
        };
    }

    /**
     * {@return RESET→INIT attributes}
     *
     * @param cfg  parameters
     * @param omit required attributes to leave out (to test that they are required)
     */
    public static QpAttributes initAttrs(QpConfig cfg, Set<QpAttrMask> omit) {
        QpAttributes a = new QpAttributes().state(QpState.INIT);
        for (QpAttrMask m : required(cfg.type(), QpState.INIT)) {
            if (!omit.contains(m)) {
                switch (m) {
                    case PKEY_INDEX -> a.pkeyIndex(0);
                    case PORT -> a.port(1);
                    case QKEY -> a.qkey(cfg.qkey());
                    case ACCESS_FLAGS -> a.accessFlags(cfg.accessFlags());
                    default -> throw new IllegalStateException(m.name());
                }
            }
        }
        return a;
    }

    /**
     * {@return INIT→RTR attributes}
     *
     * @param cfg      parameters
     * @param peerGid  the peer's GID (ignored for UD)
     * @param destQpn  the peer's QP number (ignored for UD)
     * @param rqPsn    the peer's send PSN (ignored for UD)
     * @param omit     required attributes to leave out
     */
    public static QpAttributes rtrAttrs(QpConfig cfg, Gid peerGid, int destQpn, int rqPsn, Set<QpAttrMask> omit) {
        QpAttributes a = new QpAttributes().state(QpState.RTR);
        for (QpAttrMask m : required(cfg.type(), QpState.RTR)) {
            if (!omit.contains(m)) {
                switch (m) {
                    case AV -> a.av(av(peerGid));
                    case PATH_MTU -> a.pathMtu(cfg.pathMtu());
                    case DEST_QPN -> a.destQpNum(destQpn);
                    case RQ_PSN -> a.rqPsn(rqPsn);
                    case MAX_DEST_RD_ATOMIC -> a.maxDestRdAtomic(cfg.maxDestRdAtomic());
                    case MIN_RNR_TIMER -> a.minRnrTimer(cfg.minRnrTimer());
                    default -> throw new IllegalStateException(m.name());
                }
            }
        }
        return a;
    }

    /**
     * {@return RTR→RTS attributes}
     *
     * @param cfg  parameters
     * @param omit required attributes to leave out
     */
    public static QpAttributes rtsAttrs(QpConfig cfg, Set<QpAttrMask> omit) {
        QpAttributes a = new QpAttributes().state(QpState.RTS);
        for (QpAttrMask m : required(cfg.type(), QpState.RTS)) {
            if (!omit.contains(m)) {
                switch (m) {
                    case TIMEOUT -> a.timeout(cfg.timeout());
                    case RETRY_CNT -> a.retryCnt(cfg.retryCnt());
                    case RNR_RETRY -> a.rnrRetry(cfg.rnrRetry());
                    case SQ_PSN -> a.sqPsn(cfg.sqPsn());
                    case MAX_QP_RD_ATOMIC -> a.maxRdAtomic(cfg.maxRdAtomic());
                    default -> throw new IllegalStateException(m.name());
                }
            }
        }
        return a;
    }
}
