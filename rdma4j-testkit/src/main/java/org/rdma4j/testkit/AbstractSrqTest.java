// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.AsyncEventType;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.SharedReceiveQueue;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * Shared receive queues: two RC QPs on device 1 draw from one SRQ; the limit event is one-shot
 * (verbs-dma.md 4.7, rxe get_srq_wqe).
 */
public abstract class AbstractSrqTest extends ConformanceTestBase {
    /** Constructor for subclasses. */
    protected AbstractSrqTest() {
    }

    private static final int SRQ_DEPTH = 16;

    /** Two RC pairs whose device-1 sides share {@link #srq}. */
    private record Rig(SharedReceiveQueue srq, QpPair p1, QpPair p2, MemoryRegion srqMr, MemoryRegion src1,
                       MemoryRegion src2) {
    }

    private Rig rig() {
        ProtectionDomain pdB = track(ctxB.allocPd());
        SharedReceiveQueue srq = track(pdB.createSrq(SRQ_DEPTH, 1));
        QpPair p1 = players().connected(QpConfig.rc().rnrRetry(0), QpConfig.rc().srq(srq).sqPsn(0x3000));
        QpPair p2 = players().connected(QpConfig.rc().rnrRetry(0).sqPsn(0x5000), QpConfig.rc().srq(srq)
                .sqPsn(0x6000));
        MemoryRegion srqMr = regAll(pdB, 64L * 64);
        return new Rig(srq, p1, p2, srqMr, regAll(p1.local().pd(), 256), regAll(p2.local().pd(), 256));
    }

    private void postSrq(Rig r, int n, long firstId) {
        for (int i = 0; i < n; i++) {
            long id = firstId + i;
            postSrqRecv(r.srq(), id, r.srqMr(), 64 * (id % 64), 64);
        }
    }

    /** Sends one message over a pair and returns the receive completion. */
    private WorkCompletion sendOne(QpPair p, MemoryRegion src, long wrId) {
        postSend(p.local().qp(), sendWr(wrId, WrOpcode.SEND, src, 0, 16));
        assertWc(pollOne(p.local().sendCq()), WcStatus.SUCCESS, wrId);
        return pollOne(p.remote().recvCq());
    }

    /** Should serve two QPs from one SRQ in post order. */
    @Test
    public void shouldServeTwoQpsFromOneSrqInPostOrder() {
        Rig r = rig();
        assertSame(r.p1().remote().srq(), r.srq(), "QP 1 uses the SRQ");
        assertTrue(r.srq().maxWr() >= SRQ_DEPTH, "max_wr " + r.srq().maxWr());
        postSrq(r, 4, 1);
        WorkCompletion a = sendOne(r.p1(), r.src1(), 101);
        WorkCompletion b = sendOne(r.p2(), r.src2(), 201);
        WorkCompletion c = sendOne(r.p1(), r.src1(), 102);
        WorkCompletion d = sendOne(r.p2(), r.src2(), 202);
        assertWc(a, WcStatus.SUCCESS, 1);
        assertWc(b, WcStatus.SUCCESS, 2);
        assertWc(c, WcStatus.SUCCESS, 3);
        assertWc(d, WcStatus.SUCCESS, 4);
        assertEquals(r.p1().remote().qpNum(), a.qpNum(), "qp_num of the first receive");
        assertEquals(r.p2().remote().qpNum(), b.qpNum(), "qp_num of the second receive");
        assertEquals(16, d.byteLen());
    }

    /** Should fail with RNR_RETRY_EXC_ERR when SRQ is empty. */
    @NotOnIwarp("no RNR NAK, RNR timer or transport retry over TCP: a SEND without a posted receive or to a gone peer completes once TCP has it (seen in the VM on siw0)")
    @Test
    public void shouldFailWithRnrRetryExcErrWhenSrqIsEmpty() {
        Rig r = rig();
        postSend(r.p1().local().qp(), sendWr(1, WrOpcode.SEND, r.src1(), 0, 16));
        // rnr_retry 0: the first RNR NAK ends it (rxe_comp.c, roce-wire.md 4.3)
        assertWc(pollOne(r.p1().local().sendCq()), WcStatus.RNR_RETRY_EXC_ERR, 1);
        assertNoCompletion(r.p1().remote().recvCq());
    }

    /** Should fire limit event once when count drops below limit and require rearming. */
    @Test
    public void shouldFireLimitEventOnceWhenCountDropsBelowLimitAndRequireRearming() {
        Rig r = rig();
        postSrq(r, 8, 1);
        r.srq().armLimit(4);
        assertEquals(4, r.srq().limit(), "armed limit");
        for (int i = 0; i < 4; i++) {
            sendOne(r.p1(), r.src1(), 100 + i);
        }
        // 4 left: not below the limit yet (strict "<", rxe get_srq_wqe)
        assertNoAsyncEvent(ctxB, AsyncEventType.SRQ_LIMIT_REACHED);
        sendOne(r.p2(), r.src2(), 200);
        AsyncEvent ev = awaitAsyncEvent(ctxB, AsyncEventType.SRQ_LIMIT_REACHED);
        assertSame(r.srq(), ev.srq(), "SRQ of " + ev);
        assertEquals(0, r.srq().limit(), "one-shot: the limit is disarmed when it fires");
        sendOne(r.p1(), r.src1(), 104);
        assertNoAsyncEvent(ctxB, AsyncEventType.SRQ_LIMIT_REACHED);

        // 2 left; refill to 8 and re-arm at 6: it fires again when the count drops to 5
        postSrq(r, 6, 20);
        r.srq().armLimit(6);
        sendOne(r.p2(), r.src2(), 201);
        sendOne(r.p2(), r.src2(), 202);
        assertNoAsyncEvent(ctxB, AsyncEventType.SRQ_LIMIT_REACHED);
        sendOne(r.p1(), r.src1(), 105);
        assertSame(r.srq(), awaitAsyncEvent(ctxB, AsyncEventType.SRQ_LIMIT_REACHED).srq(), "re-armed event");
    }

    /** Should reject limit above max_wr. */
    @Test
    public void shouldRejectLimitAboveMaxWr() {
        Rig r = rig();
        assertVerbsError(Errno.EINVAL, () -> r.srq().armLimit(r.srq().maxWr() + 1));
        assertEquals(0, r.srq().limit(), "limit after a refused arm");
    }

    /**
     * Should fail SRQ close with EBUSY while QPs are attached.
     *
     * @throws Exception when the device fails the test unexpectedly
     */
    @Test
    public void shouldFailSrqCloseWithEbusyWhileQpsAreAttached() throws Exception {
        Rig r = rig();
        assertVerbsError(Errno.EBUSY, r.srq()::close);
        release(r.p1().remote().qp());
        assertVerbsError(Errno.EBUSY, r.srq()::close);
        release(r.p2().remote().qp());
        release(r.srq());
    }

    /** Should raise LAST_WQE_REACHED and keep shared receives when one QP fails. */
    @Test
    public void shouldRaiseLastWqeReachedAndKeepSharedReceivesWhenOneQpFails() {
        Rig r = rig();
        postSrq(r, 3, 1);
        r.p1().remote().qp().modify(new QpAttributes().state(QpState.ERR));
        // rxe flush_recv_queue: a QP on an SRQ does not flush the shared queue; it raises
        // IB_EVENT_QP_LAST_WQE_REACHED instead (verbs-dma.md 4.7)
        AsyncEvent ev = awaitAsyncEvent(ctxB, AsyncEventType.QP_LAST_WQE_REACHED);
        assertSame(r.p1().remote().qp(), ev.qp(), "QP of " + ev);
        assertNoCompletion(r.p1().remote().recvCq());
        assertWc(sendOne(r.p2(), r.src2(), 7), WcStatus.SUCCESS, 1);
    }
}
