// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.rdma4j.common.NanoClock;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * The timer agent on the system clock (every conformance test uses a manual clock): RNR and
 * retransmit timers must fire by themselves. Waits are bounded by a wall-clock deadline.
 */
class SoftSystemClockTimersTest {
    private static final long DEADLINE_NS = 10_000_000_000L;

    private SoftFabric fabric;
    private Context ca;
    private Context cb;
    private ProtectionDomain pa;
    private ProtectionDomain pb;
    private Arena arena;
    private MemoryRegion ma;
    private MemoryRegion mb;
    private CompletionQueue qa;
    private CompletionQueue qb;
    private QueuePair a;
    private QueuePair b;

    @BeforeEach
    void setUp() {
        fabric = new SoftFabric(NanoClock.SYSTEM);
        ca = fabric.addDevice("t0").open();
        cb = fabric.addDevice("t1").open();
        pa = ca.allocPd();
        pb = cb.allocPd();
        arena = Arena.ofShared();
        var acc = EnumSet.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE);
        ma = pa.regMr(arena.allocate(4096), acc);
        mb = pb.regMr(arena.allocate(4096), acc);
        qa = ca.createCq(16, null, 0);
        qb = cb.createCq(16, null, 0);
        QpInitAttributes init = new QpInitAttributes().type(QpType.RC).cap(new QpCapabilities(16, 16, 1, 1, 0));
        a = pa.createQp(init.sendCq(qa).recvCq(qa));
        b = pb.createQp(init.sendCq(qb).recvCq(qb));
    }

    @AfterEach
    void tearDown() {
        a.close();
        b.close();
        qa.close();
        qb.close();
        ma.close();
        mb.close();
        pa.close();
        pb.close();
        ca.close();
        cb.close();
        arena.close();
        fabric.close();
    }

    private static void connect(QueuePair q, QueuePair peer, Context peerCtx, int timeout, int retry, int rnrRetry) {
        q.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1)
                .accessFlags(EnumSet.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE)));
        q.modify(new QpAttributes().state(QpState.RTR).av(new AhAttributes().dgid(peerCtx.queryGid(1, 0)))
                .pathMtu(Mtu.MTU_1024).destQpNum(peer.qpNum()).rqPsn(0).maxDestRdAtomic(1).minRnrTimer(1));
        q.modify(new QpAttributes().state(QpState.RTS).timeout(timeout).retryCnt(retry).rnrRetry(rnrRetry)
                .sqPsn(0).maxRdAtomic(1));
    }

    private static WorkCompletion awaitCompletion(CompletionQueue cq) {
        WorkCompletion wc = new WorkCompletion();
        long end = System.nanoTime() + DEADLINE_NS;
        for (long i = 0; i < Long.MAX_VALUE && System.nanoTime() < end; i++) {
            if (cq.poll(wc)) {
                return wc;
            }
            Thread.onSpinWait();
        }
        return fail("no completion within " + DEADLINE_NS / 1_000_000 + " ms");
    }

    private SendWorkRequest send() {
        return new SendWorkRequest(1).wrId(7).opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                .singleSge(ma.address(), 16, ma.lkey());
    }

    @Test
    void shouldRetryAfterRnrNakUntilAReceiveIsPosted() {
        connect(a, b, cb, 14, 7, 7);
        connect(b, a, ca, 14, 7, 7);
        assertTrue(a.postSend(send()));
        // The SEND met no receive: RNR NAK (timer code 1 = 10 us), retried forever (rnr_retry 7).
        WorkCompletion none = new WorkCompletion();
        assertTrue(!qa.poll(none), "no completion while the responder has no receive");
        assertTrue(b.postRecv(new RecvWorkRequest(1).wrId(9).singleSge(mb.address(), 64, mb.lkey())));
        WorkCompletion recv = awaitCompletion(qb);
        assertEquals(WcStatus.SUCCESS, recv.status());
        assertEquals(16, recv.byteLen());
        WorkCompletion sent = awaitCompletion(qa);
        assertEquals(WcStatus.SUCCESS, sent.status());
        assertEquals(7, sent.wrId());
        assertTrue(fabric.devices().get(0).counter(SoftCounter.RCV_RNR_ERR) >= 1, "RNR NAK counted");
    }

    @Test
    void shouldGiveUpWithRetryExceededWhenThePeerIsGone() {
        connect(a, b, cb, 1, 2, 7); // 8.192 us local ACK timeout, 2 retries
        b.modify(new QpAttributes().state(QpState.RESET)); // the peer drops everything
        assertTrue(a.postSend(send()));
        WorkCompletion wc = awaitCompletion(qa);
        assertEquals(WcStatus.RETRY_EXC_ERR, wc.status());
        assertEquals(QpState.ERR, a.state());
        assertEquals(2, fabric.devices().get(0).counter(SoftCounter.COMPLETER_RETRY_ERR), "two retries, then give up");
    }
}
