// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.AsyncEventType;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.QpAttrMask;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * The QP state machine of verbs-dma.md 4.3 (kernel {@code qp_state_table} / {@code ib_modify_qp_is_ok},
 * rdma-core ibv_modify_qp.3), posting versus state (rxe_post_send/rxe_post_recv) and flushing.
 */
public abstract class AbstractQpStateTest extends ConformanceTestBase {
    /** Constructor for subclasses. */
    protected AbstractQpStateTest() {
    }

    private static final int DUMMY_PEER_QPN = 0x42;
    private static final int DUMMY_PEER_PSN = 0x777;

    private Endpoint single(QpType type) {
        return players().endpoint(ctxA, new QpConfig().type(type));
    }

    private QpAttributes rtr(Endpoint e, Set<QpAttrMask> omit) {
        return Players.rtrAttrs(e.config(), ctxB.queryGid(1, 0), DUMMY_PEER_QPN, DUMMY_PEER_PSN, omit);
    }

    /** Moves a fresh endpoint along RESET→INIT→RTR→RTS(→SQD|ERR) until it is in {@code target}. */
    private void moveTo(Endpoint e, QpState target) {
        QpConfig cfg = e.config();
        if (target == QpState.RESET) {
            return;
        }
        e.qp().modify(Players.initAttrs(cfg, Set.of()));
        if (target == QpState.INIT) {
            return;
        }
        e.qp().modify(rtr(e, Set.of()));
        if (target == QpState.RTR) {
            return;
        }
        e.qp().modify(Players.rtsAttrs(cfg, Set.of()));
        if (target == QpState.RTS) {
            return;
        }
        e.qp().modify(new QpAttributes().state(target));
        assertEquals(target, e.qp().state(), "moved to " + target);
    }

    // ------------------------------------------------------------------ valid path

    /**
     * Should start in RESET when created.
     *
     * @param type the QP type
     */
    @ParameterizedTest
    @EnumSource(QpType.class)
    public void shouldStartInResetWhenCreated(QpType type) {
        Endpoint e = single(type);
        assertEquals(QpState.RESET, e.qp().state());
        assertEquals(QpState.RESET, e.qp().query().state());
        assertEquals(type, e.qp().type());
        assertSame(e.pd(), e.qp().pd());
        assertTrue(e.qp().qpNum() > 1 && e.qp().qpNum() <= 0xFF_FFFF, "qp_num 0x" + Integer.toHexString(e.qpNum())
                + " (0 and 1 are the special QPs)");
        assertTrue(e.qp().cap().maxSendWr() >= 64, "granted max_send_wr " + e.qp().cap());
        assertTrue(e.qp().cap().maxInlineData() >= 64, "granted max_inline_data " + e.qp().cap());
    }

    /**
     * Should reach RTS when only required attributes are given.
     *
     * @param type the QP type
     */
    @ParameterizedTest
    @EnumSource(QpType.class)
    public void shouldReachRtsWhenOnlyRequiredAttributesAreGiven(QpType type) {
        Endpoint e = single(type);
        e.qp().modify(Players.initAttrs(e.config(), Set.of()));
        assertEquals(QpState.INIT, e.qp().state());
        e.qp().modify(rtr(e, Set.of()));
        assertEquals(QpState.RTR, e.qp().state());
        e.qp().modify(Players.rtsAttrs(e.config(), Set.of()));
        assertEquals(QpState.RTS, e.qp().state());
        assertEquals(QpState.RTS, e.qp().query().state());
    }

    /** {@return (type, target state, omitted required attribute) for every required attribute} */
    public static Stream<Arguments> missingRequiredAttribute() {
        List<Arguments> cases = new ArrayList<>();
        for (QpType type : QpType.values()) {
            for (QpState to : new QpState[] {QpState.INIT, QpState.RTR, QpState.RTS}) {
                for (QpAttrMask m : Players.required(type, to)) {
                    cases.add(Arguments.of(type, to, m));
                }
            }
        }
        return cases.stream();
    }

    /**
     * Should reject with EINVAL and keep state when required attribute is missing.
     *
     * @param type the QP type
     * @param to the state it is moved to
     * @param missing the required attribute left out
     */
    @ParameterizedTest(name = "{0} -> {1} without {2}")
    @MethodSource("missingRequiredAttribute")
    public void shouldRejectWithEinvalAndKeepStateWhenRequiredAttributeIsMissing(QpType type, QpState to,
                                                                                 QpAttrMask missing) {
        Endpoint e = single(type);
        QpState from = switch (to) {
            case INIT -> QpState.RESET;
            case RTR -> QpState.INIT;
            default -> QpState.RTR;
        };
        moveTo(e, from);
        QpAttributes attrs = switch (to) {
            case INIT -> Players.initAttrs(e.config(), Set.of(missing));
            case RTR -> rtr(e, Set.of(missing));
            default -> Players.rtsAttrs(e.config(), Set.of(missing));
        };
        assertVerbsError(Errno.EINVAL, () -> e.qp().modify(attrs));
        assertEquals(from, e.qp().state(), "state after a refused modify");
        assertEquals(from, e.qp().query().state(), "queried state after a refused modify");
    }

    /** Should apply nothing when modify is refused. */
    @Test
    public void shouldApplyNothingWhenModifyIsRefused() {
        Endpoint e = single(QpType.RC);
        moveTo(e, QpState.INIT);
        int before = e.qp().query().destQpNum();
        // ibv_modify_qp.3: "If any of the modify attributes or the modify mask are invalid, none of
        // the attributes will be modified (including the QP state)."
        QpAttributes attrs = rtr(e, Set.of(QpAttrMask.MIN_RNR_TIMER)).destQpNum(0x5555);
        assertVerbsError(Errno.EINVAL, () -> e.qp().modify(attrs));
        assertEquals(QpState.INIT, e.qp().state());
        assertEquals(before, e.qp().query().destQpNum(), "dest_qp_num changed by a refused modify");
    }

    /** {@return (type, target state, attribute outside req|opt of that transition)} */
    public static Stream<Arguments> attributeNotAllowed() {
        return Stream.of(
                Arguments.of(QpType.RC, QpState.INIT, QpAttrMask.QKEY),
                Arguments.of(QpType.RC, QpState.INIT, QpAttrMask.PATH_MTU),
                Arguments.of(QpType.UC, QpState.INIT, QpAttrMask.SQ_PSN),
                Arguments.of(QpType.UD, QpState.INIT, QpAttrMask.ACCESS_FLAGS),
                Arguments.of(QpType.RC, QpState.RTR, QpAttrMask.SQ_PSN),
                Arguments.of(QpType.RC, QpState.RTR, QpAttrMask.TIMEOUT),
                Arguments.of(QpType.UD, QpState.RTR, QpAttrMask.AV),
                Arguments.of(QpType.UD, QpState.RTR, QpAttrMask.DEST_QPN),
                Arguments.of(QpType.RC, QpState.RTS, QpAttrMask.DEST_QPN),
                Arguments.of(QpType.RC, QpState.RTS, QpAttrMask.PATH_MTU),
                Arguments.of(QpType.UC, QpState.RTS, QpAttrMask.TIMEOUT),
                Arguments.of(QpType.UC, QpState.RTS, QpAttrMask.MAX_QP_RD_ATOMIC),
                Arguments.of(QpType.UD, QpState.RTS, QpAttrMask.RNR_RETRY));
    }

    /**
     * Should reject with EINVAL when attribute is not allowed on transition.
     *
     * @param type the QP type
     * @param to the state it is moved to
     * @param extra the attribute the transition does not allow
     */
    @ParameterizedTest(name = "{0} -> {1} with {2}")
    @MethodSource("attributeNotAllowed")
    public void shouldRejectWithEinvalWhenAttributeIsNotAllowedOnTransition(QpType type, QpState to,
                                                                            QpAttrMask extra) {
        Endpoint e = single(type);
        QpState from = switch (to) {
            case INIT -> QpState.RESET;
            case RTR -> QpState.INIT;
            default -> QpState.RTR;
        };
        moveTo(e, from);
        QpAttributes attrs = switch (to) {
            case INIT -> Players.initAttrs(e.config(), Set.of());
            case RTR -> rtr(e, Set.of());
            default -> Players.rtsAttrs(e.config(), Set.of());
        };
        switch (extra) {
            case QKEY -> attrs.qkey(0x1234);
            case PATH_MTU -> attrs.pathMtu(Mtu.MTU_1024);
            case SQ_PSN -> attrs.sqPsn(1);
            case ACCESS_FLAGS -> attrs.accessFlags(AccessFlag.of(AccessFlag.REMOTE_WRITE));
            case TIMEOUT -> attrs.timeout(14);
            case AV -> attrs.av(Players.av(ctxB.queryGid(1, 0)));
            case DEST_QPN -> attrs.destQpNum(DUMMY_PEER_QPN);
            case MAX_QP_RD_ATOMIC -> attrs.maxRdAtomic(1);
            case RNR_RETRY -> attrs.rnrRetry(7);
            default -> throw new IllegalArgumentException(extra.name());
        }
        assertVerbsError(Errno.EINVAL, () -> e.qp().modify(attrs));
        assertEquals(from, e.qp().state(), "state after a refused modify");
    }

    /** {@return (type, from, to) transitions the kernel's qp_state_table rejects} */
    public static Stream<Arguments> invalidTransition() {
        List<Arguments> cases = new ArrayList<>();
        for (QpType type : QpType.values()) {
            // RESET row allows only RESET and INIT: Linux rejects RESET->ERR (verbs-dma.md 4.3)
            cases.add(Arguments.of(type, QpState.RESET, QpState.RTR));
            cases.add(Arguments.of(type, QpState.RESET, QpState.RTS));
            cases.add(Arguments.of(type, QpState.RESET, QpState.SQD));
            cases.add(Arguments.of(type, QpState.RESET, QpState.ERR));
            cases.add(Arguments.of(type, QpState.INIT, QpState.RTS));
            cases.add(Arguments.of(type, QpState.INIT, QpState.SQD));
            cases.add(Arguments.of(type, QpState.RTR, QpState.INIT));
            cases.add(Arguments.of(type, QpState.RTR, QpState.SQD));
            cases.add(Arguments.of(type, QpState.RTS, QpState.INIT));
            cases.add(Arguments.of(type, QpState.RTS, QpState.RTR));
            // SQE is entered by the device only, never by modify
            cases.add(Arguments.of(type, QpState.RTS, QpState.SQE));
            cases.add(Arguments.of(type, QpState.ERR, QpState.INIT));
            cases.add(Arguments.of(type, QpState.ERR, QpState.RTS));
        }
        return cases.stream();
    }

    /**
     * Should reject with EINVAL when transition is invalid.
     *
     * @param type the QP type
     * @param from the state the QP starts in
     * @param to the state it is moved to
     */
    @ParameterizedTest(name = "{0}: {1} -> {2}")
    @MethodSource("invalidTransition")
    public void shouldRejectWithEinvalWhenTransitionIsInvalid(QpType type, QpState from, QpState to) {
        Endpoint e = single(type);
        moveTo(e, from);
        assertVerbsError(Errno.EINVAL, () -> e.qp().modify(new QpAttributes().state(to)));
        assertEquals(from, e.qp().state(), "state after a refused " + from + "->" + to);
    }

    /**
     * Should allow ERR and then RESET and reuse from every active state.
     *
     * @param from the state the QP starts in
     */
    @ParameterizedTest
    @EnumSource(value = QpState.class, names = {"INIT", "RTR", "RTS", "SQD"})
    public void shouldAllowErrAndThenResetAndReuseFromEveryActiveState(QpState from) {
        for (QpType type : QpType.values()) {
            Endpoint e = single(type);
            moveTo(e, from);
            e.qp().modify(new QpAttributes().state(QpState.ERR));
            assertEquals(QpState.ERR, e.qp().state(), type + " " + from + "->ERR");
            e.qp().modify(new QpAttributes().state(QpState.RESET));
            assertEquals(QpState.RESET, e.qp().state(), type + " ERR->RESET");
            moveTo(e, QpState.RTS);
            assertEquals(QpState.RTS, e.qp().state(), type + " reused after RESET");
        }
    }

    /**
     * Should allow RESET from any state.
     *
     * @param from the state the QP starts in
     */
    @ParameterizedTest
    @EnumSource(value = QpState.class, names = {"RESET", "INIT", "RTR", "RTS"})
    public void shouldAllowResetFromAnyState(QpState from) {
        Endpoint e = single(QpType.RC);
        moveTo(e, from);
        e.qp().modify(new QpAttributes().state(QpState.RESET));
        assertEquals(QpState.RESET, e.qp().state());
    }

    /** Should allow RTS to RTS with optional attributes only. */
    @Test
    public void shouldAllowRtsToRtsWithOptionalAttributesOnly() {
        Endpoint e = single(QpType.RC);
        moveTo(e, QpState.RTS);
        e.qp().modify(new QpAttributes().state(QpState.RTS));
        e.qp().modify(new QpAttributes().state(QpState.RTS).curState(QpState.RTS).minRnrTimer(14)
                .accessFlags(AccessFlag.of(AccessFlag.REMOTE_READ)));
        assertEquals(QpState.RTS, e.qp().state());
        QpAttributes q = e.qp().query();
        assertEquals(14, q.minRnrTimer(), "min_rnr_timer after RTS->RTS");
        assertEquals(AccessFlag.of(AccessFlag.REMOTE_READ), q.accessFlagSet(), "access after RTS->RTS");
    }

    /** Should reject cur_qp_state outside RTR RTS SQD SQE. */
    @Test
    public void shouldRejectCurStateOutsideRtrRtsSqdSqe() {
        Endpoint e = single(QpType.RC);
        // IB_QP_CUR_STATE is optional only on transitions out of RTR/RTS/SQD/SQE (verbs-dma.md 4.3)
        QpAttributes attrs = Players.initAttrs(e.config(), Set.of()).curState(QpState.RESET);
        assertVerbsError(Errno.EINVAL, () -> e.qp().modify(attrs));
        assertEquals(QpState.RESET, e.qp().state());
    }

    /** Should enter SQD from RTS. */
    @Test
    public void shouldEnterSqdFromRts() {
        Endpoint e = single(QpType.RC);
        moveTo(e, QpState.RTS);
        e.qp().modify(new QpAttributes().state(QpState.SQD));
        assertEquals(QpState.SQD, e.qp().state());
    }

    /** Should return what was set when RC QP is queried. */
    @Test
    public void shouldReturnWhatWasSetWhenRcQpIsQueried() {
        QpConfig cfg = QpConfig.rc().timeout(17).retryCnt(5).rnrRetry(3).minRnrTimer(9).maxRdAtomic(2)
                .maxDestRdAtomic(4).pathMtu(Mtu.MTU_512).accessFlags(AccessFlag.of(AccessFlag.REMOTE_WRITE,
                        AccessFlag.REMOTE_READ)).sqPsn(0xABCDE);
        QpPair p = players().rc(cfg);
        QpAttributes q = p.local().qp().query();
        assertEquals(QpState.RTS, q.state(), "state");
        assertEquals(Mtu.MTU_512, q.pathMtu(), "path_mtu");
        assertEquals(p.remote().qpNum(), q.destQpNum(), "dest_qp_num");
        assertEquals(p.remote().config().sqPsn(), q.rqPsn(), "rq_psn = peer's sq_psn");
        assertEquals(0xABCDE, q.sqPsn(), "sq_psn");
        assertEquals(17, q.timeout(), "timeout");
        assertEquals(5, q.retryCnt(), "retry_cnt");
        assertEquals(3, q.rnrRetry(), "rnr_retry");
        assertEquals(9, q.minRnrTimer(), "min_rnr_timer");
        // powers of two on purpose: rxe rounds max_rd_atomic up to one (rxe_qp_from_attr)
        assertEquals(2, q.maxRdAtomic(), "max_rd_atomic");
        assertEquals(4, q.maxDestRdAtomic(), "max_dest_rd_atomic");
        assertEquals(AccessFlag.of(AccessFlag.REMOTE_WRITE, AccessFlag.REMOTE_READ), q.accessFlagSet(), "access");
        assertEquals(1, q.port(), "port");
        assertEquals(0, q.pkeyIndex(), "pkey_index");
        assertNotNull(q.av(), "av");
        assertEquals(p.remote().gid(), q.av().dgid(), "av.dgid");
        assertEquals(0, q.av().sgidIndex(), "av.sgid_index");
        assertNotNull(q.cap(), "cap");
        assertEquals(p.local().qp().cap(), q.cap(), "cap");
    }

    /** Should return Q_Key when UD QP is queried. */
    @Test
    public void shouldAcceptOutOfRangeValuesRxeAcceptsAndReportWhatRxeKeeps() {
        // rxe_qp_chk_attr checks neither max_dest_rd_atomic, min_rnr_timer, retry_cnt nor rnr_retry, and
        // rxe_qp_from_attr keeps them as given except the rd_atomic depths, rounded up to a power of two in
        // a u8 (129 -> 256 -> 0) (seen in the VM with kernel 6.1: interop/rxe-probes, case modify)
        QpConfig cfg = QpConfig.rc().retryCnt(8).rnrRetry(8).minRnrTimer(32).maxRdAtomic(3).maxDestRdAtomic(3);
        QpAttributes q = players().rc(cfg).local().qp().query();
        assertEquals(8, q.retryCnt(), "retry_cnt");
        assertEquals(8, q.rnrRetry(), "rnr_retry");
        assertEquals(32, q.minRnrTimer(), "min_rnr_timer");
        assertEquals(4, q.maxRdAtomic(), "max_rd_atomic 3, rounded");
        assertEquals(4, q.maxDestRdAtomic(), "max_dest_rd_atomic 3, rounded");
        QpAttributes wide = players().rc(QpConfig.rc().retryCnt(255).rnrRetry(255).minRnrTimer(255)
                .maxDestRdAtomic(255)).local().qp().query();
        assertEquals(255, wide.minRnrTimer(), "min_rnr_timer");
        assertEquals(0, wide.maxDestRdAtomic(), "max_dest_rd_atomic 255 -> 256 in a u8");
    }

    /** Should reject values rxe rejects. */
    @Test
    public void shouldRejectValuesRxeRejects() {
        Endpoint e = single(QpType.RC);
        moveTo(e, QpState.RTR);
        // rxe_qp_chk_attr: timeout > 31, max_rd_atomic > max_qp_rd_atom (seen in the VM: interop/rxe-probes,
        // case modify); and values a u8 of struct ibv_qp_attr cannot hold
        for (QpAttributes bad : List.of(Players.rtsAttrs(e.config(), Set.of()).timeout(32),
                Players.rtsAttrs(e.config(), Set.of()).maxRdAtomic(129),
                Players.rtsAttrs(e.config(), Set.of()).retryCnt(256),
                Players.rtsAttrs(e.config(), Set.of()).rnrRetry(-1))) {
            VerbsException ex = assertVerbsError(Errno.EINVAL, () -> e.qp().modify(bad));
            assertNotNull(ex.getMessage(), "message");
            assertEquals(QpState.RTR, e.qp().state());
        }
    }

    /** Should return Q_Key when UD QP is queried. */
    @Test
    public void shouldReturnQkeyWhenUdQpIsQueried() {
        QpPair p = players().ud(QpConfig.ud().qkey(0x1234_5678));
        QpAttributes q = p.local().qp().query();
        assertEquals(QpState.RTS, q.state());
        assertEquals(0x1234_5678, q.qkey(), "qkey");
        assertEquals(p.local().config().sqPsn(), q.sqPsn(), "sq_psn");
    }

    // ------------------------------------------------------------------ posting versus state

    /**
     * Should refuse post send with EINVAL when state is below RTS.
     *
     * @param state the QP state
     */
    @ParameterizedTest
    @EnumSource(value = QpState.class, names = {"RESET", "INIT", "RTR"})
    public void shouldRefusePostSendWithEinvalWhenStateIsBelowRts(QpState state) {
        for (QpType type : QpType.values()) {
            Endpoint e = single(type);
            moveTo(e, state);
            MemoryRegion mr = regAll(e.pd(), 64);
            SendWorkRequest wr = sendWr(1, WrOpcode.SEND, mr, 0, 16);
            if (type == QpType.UD) {
                AddressHandle ah = track(e.pd().createAh(Players.av(ctxB.queryGid(1, 0))));
                wr.ah(ah).remoteQpn(DUMMY_PEER_QPN).remoteQkey(QpConfig.DEFAULT_QKEY);
            }
            // rxe_post_send: state < RTS => -EINVAL with bad_wr set
            assertPostSendRefused(e.qp(), wr, Errno.EINVAL);
            // ... and the refusal says why and what to do
            String why = wr.postErrorMessage();
            assertNotNull(why, "postErrorMessage");
            assertTrue(why.contains(state.name()) && why.contains("RTS") && why.contains("modify"),
                    "the message names the state and the way to RTS: " + why);
            assertNoCompletion(e.sendCq());
        }
    }

    /** Should refuse post receive with EINVAL in RESET and accept it in INIT. */
    @Test
    public void shouldRefusePostRecvWithEinvalInResetAndAcceptItInInit() {
        Endpoint e = single(QpType.RC);
        MemoryRegion mr = regAll(e.pd(), 64);
        RecvWorkRequest wr = recvWr(1, mr, 0, 64);
        // rxe_post_recv: state < INIT => -EINVAL
        assertTrue(!e.qp().postRecv(wr), "postRecv accepted in RESET");
        assertEquals(Errno.EINVAL, wr.postError(), "postError");
        assertTrue(wr.postErrorMessage().contains("RESET") && wr.postErrorMessage().contains("INIT"),
                "the message names the state and what to do: " + wr.postErrorMessage());
        moveTo(e, QpState.INIT);
        postRecv(e.qp(), wr);
        assertNull(wr.postErrorMessage(), "an accepted post clears the message");
        assertNoCompletion(e.recvCq());
    }

    /** Should complete with WR_FLUSH_ERR when posting in ERR. */
    @Test
    public void shouldCompleteWithWrFlushErrWhenPostingInErr() {
        Endpoint e = single(QpType.RC);
        moveTo(e, QpState.ERR);
        MemoryRegion mr = regAll(e.pd(), 64);
        postRecv(e.qp(), 11, mr, 0, 64);
        assertWc(pollOne(e.recvCq()), WcStatus.WR_FLUSH_ERR, 11);
        postSend(e.qp(), sendWr(12, WrOpcode.SEND, mr, 0, 16));
        WorkCompletion wc = pollOne(e.sendCq());
        assertWc(wc, WcStatus.WR_FLUSH_ERR, 12);
        assertEquals(e.qpNum(), wc.qpNum(), "qp_num is valid on error completions");
    }

    /** Should flush outstanding receives in order when moved to ERR. */
    @Test
    public void shouldFlushOutstandingReceivesInOrderWhenMovedToErr() {
        Endpoint e = single(QpType.RC);
        moveTo(e, QpState.RTS);
        MemoryRegion mr = regAll(e.pd(), 256);
        for (int i = 0; i < 3; i++) {
            postRecv(e.qp(), 100 + i, mr, 64L * i, 64);
        }
        assertNoCompletion(e.recvCq());
        e.qp().modify(new QpAttributes().state(QpState.ERR));
        List<WorkCompletion> wcs = pollUntil(e.recvCq(), 3);
        for (int i = 0; i < 3; i++) {
            assertWc(wcs.get(i), WcStatus.WR_FLUSH_ERR, 100 + i);
        }
        assertNoCompletion(e.sendCq());
    }

    /** Should flush outstanding sends in order when moved to ERR. */
    @Test
    public void shouldFlushOutstandingSendsInOrderWhenMovedToErr() {
        // rnr_retry 7 and no receive at the peer: the SENDs stay outstanding forever (RNR NAK loop)
        QpPair p = players().rc(QpConfig.rc().rnrRetry(7));
        MemoryRegion mr = regAll(p.local().pd(), 256);
        for (int i = 0; i < 3; i++) {
            postSend(p.local().qp(), sendWr(200 + i, WrOpcode.SEND, mr, 64L * i, 64));
        }
        assertNoCompletion(p.local().sendCq());
        p.local().qp().modify(new QpAttributes().state(QpState.ERR));
        List<WorkCompletion> wcs = pollUntil(p.local().sendCq(), 3);
        for (int i = 0; i < 3; i++) {
            assertWc(wcs.get(i), WcStatus.WR_FLUSH_ERR, 200 + i);
        }
        assertNoCompletion(p.remote().recvCq());
    }

    /** Should report transport error by completion without async event. */
    @Test
    public void shouldReportTransportErrorByCompletionWithoutAsyncEvent() {
        // An error that a completion reports raises no affiliated async event: rxe_qp_error only moves
        // the QP to ERR, and IBA 11.6.2 reports such errors through the completion status. QP_FATAL is
        // kept for errors no completion can carry (a completion lost to a full CQ).
        QpPair p = players().rc(QpConfig.rc());
        MemoryRegion src = regAll(p.local().pd(), 64);
        MemoryRegion dst = regAll(p.remote().pd(), 64);
        postSend(p.local().qp(), rdmaWr(1, WrOpcode.RDMA_WRITE, src, dst, 64).rkey(dst.rkey() ^ 0x5A5A00));
        assertWc(pollOne(p.local().sendCq()), WcStatus.REM_ACCESS_ERR, 1);
        assertEquals(QpState.ERR, p.local().qp().state());
        assertNoAsyncEvent(ctxA, AsyncEventType.QP_FATAL);
    }

    /** Should not raise QP fatal when application moves QP to ERR. */
    @Test
    public void shouldNotRaiseQpFatalWhenApplicationMovesQpToErr() {
        Endpoint e = single(QpType.RC);
        moveTo(e, QpState.RTS);
        e.qp().modify(new QpAttributes().state(QpState.ERR));
        assertNoAsyncEvent(ctxA, AsyncEventType.QP_FATAL);
    }

    /** Should accept unused GID in AV but keep it. */
    @Test
    public void shouldAcceptUnusedGidInAvButKeepIt() {
        // RTR with an AV towards any GID is a local operation: nothing is sent until data is posted.
        Endpoint e = single(QpType.RC);
        e.qp().modify(Players.initAttrs(e.config(), Set.of()));
        Gid gid = new Gid(0xFE80_0000_0000_0000L, 0x0000_0000_0000_1234L);
        e.qp().modify(Players.rtrAttrs(e.config(), gid, DUMMY_PEER_QPN, 0, EnumSet.noneOf(QpAttrMask.class)));
        assertEquals(gid, e.qp().query().av().dgid());
    }
}
