// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.time.Duration;
import java.util.EnumSet;

import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.ConformanceTestBase;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.testkit.IbTimers;
import org.rdma4j.testkit.QpConfig;
import org.rdma4j.testkit.QpPair;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.AsyncEventType;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.PortState;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WrOpcode;

/**
 * What the conformance suites take for granted of {@link SoftRemoteTestFabric}: device B really is in
 * another process, its timers run on the forwarded clock, errors cross with their errno and message,
 * objects come back as the same proxies, and buffers are one memory in both processes.
 */
class SoftRemoteHarnessTest extends ConformanceTestBase {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftRemoteTestFabric(clock);
    }

    @Test
    void deviceBLivesInAnotherProcessOn127002() {
        long child = ((SoftRemoteTestFabric) fabric).remotePid();
        assertNotEquals(ProcessHandle.current().pid(), child, "device B's process");
        assertTrue(ProcessHandle.of(child).map(ProcessHandle::isAlive).orElse(false), "child " + child + " alive");
        assertEquals(Gid.ofInetAddress(InetAddress.ofLiteral("127.0.0.2")), ctxB.queryGid(1, 0), "B's GID 0");
        assertEquals(Gid.ofInetAddress(InetAddress.ofLiteral("127.0.0.1")), ctxA.queryGid(1, 0), "A's GID 0");
        assertTrue(fabric.device(1).getClass() != SoftDevice.class, "device 1 is a proxy, not a local SoftDevice");
    }

    @Test
    void bRetransmitsOnTheForwardedClockUntilRetryExcErr() {
        // B is the requester: only B's retransmit timer can produce this completion, and it runs in the
        // child, on the clock this test moves.
        QpPair p = players().rc(QpConfig.rc().retryCnt(2).timeout(10));
        MemoryRegion bmr = regAll(p.remote().pd(), 256);
        p.local().qp().modify(new QpAttributes().state(QpState.RESET));
        postSend(p.remote().qp(), sendWr(1, WrOpcode.SEND, bmr, 0, 32));
        assertNoCompletion(p.remote().sendCq());
        long step = IbTimers.ackTimeoutNs(10) * 3 / 2;
        Advanced a = advanceUntil(p.remote().sendCq(), 1, step, 4 * (2 + 2) + 10);
        assertWc(a.completions().getFirst(), WcStatus.RETRY_EXC_ERR, 1);
        assertTrue(a.steps() >= 3, "RETRY_EXC_ERR after " + a.steps() + " timeouts with retry_cnt=2");
    }

    @Test
    void bWaitsOnItsRnrTimerOnTheForwardedClock() {
        QpPair p = players().rc(QpConfig.rc().rnrRetry(1).minRnrTimer(12));
        MemoryRegion bmr = regAll(p.remote().pd(), 256);
        postSend(p.remote().qp(), sendWr(1, WrOpcode.SEND, bmr, 0, 32));
        assertNoCompletion(p.remote().sendCq());
        Advanced a = advanceUntil(p.remote().sendCq(), 1, IbTimers.rnrTimerNs(12) * 3 / 2, 20);
        assertWc(a.completions().getFirst(), WcStatus.RNR_RETRY_EXC_ERR, 1);
    }

    @Test
    void errorsCrossWithTheirErrnoAndMessage() {
        ProtectionDomain pdA = track(ctxA.allocPd());
        ProtectionDomain pdB = track(ctxB.allocPd());
        MemorySegment heap = MemorySegment.ofArray(new byte[64]);
        VerbsException local = assertVerbsError(Errno.EINVAL, () -> pdA.regMr(heap, AccessFlag.of(AccessFlag.LOCAL_WRITE)));
        VerbsException remote = assertVerbsError(Errno.EINVAL, () -> pdB.regMr(heap, AccessFlag.of(AccessFlag.LOCAL_WRITE)));
        assertEquals(local.getMessage(), remote.getMessage(), "message of the same refusal on A and on B");
        VerbsException l2 = assertVerbsError(Errno.EINVAL, () -> pdA.createSrq(0, 1));
        VerbsException r2 = assertVerbsError(Errno.EINVAL, () -> pdB.createSrq(0, 1));
        assertEquals(l2.getMessage(), r2.getMessage(), "message of max_wr=0 on A and on B");
        // the connection stays in step after errors
        assertEquals(ctxB.queryGid(1, 0), ctxB.queryGid(1, 0));
    }

    @Test
    void objectsComeBackAsTheSameProxies() {
        QpPair p = players().rc(QpConfig.rc().recvChannel(true));
        CompletionChannel ch = p.remote().recvChannel();
        CompletionQueue cq = p.remote().recvCq();
        assertSame(ch, cq.channel(), "cq.channel()");
        assertSame(p.remote().pd(), p.remote().qp().pd(), "qp.pd()");
        MemoryRegion amr = regAll(p.local().pd(), 256);
        MemoryRegion bmr = regAll(p.remote().pd(), 256);
        postRecv(p.remote().qp(), 3, bmr, 0, 256);
        cq.reqNotify(false);
        assertEquals(null, ch.getCqEvent(Duration.ZERO), "no CQ event before a completion");
        postSend(p.local().qp(), sendWr(1, WrOpcode.SEND, amr, 0, 16));
        // a wait longer than one slice of the proxy's wait, answered by the child's channel
        assertSame(cq, ch.getCqEvent(POLL_TIMEOUT), "the CQ event names the test's CQ proxy");
        cq.ackEvents(1);
        assertWc(pollOne(cq), WcStatus.SUCCESS, 3);
    }

    @Test
    void portStateOfBChangesInTheChildAndRaisesItsEvents() {
        fabric.setPortState(1, 1, false);
        AsyncEvent down = awaitAsyncEvent(ctxB, AsyncEventType.PORT_ERR);
        assertEquals(1, down.portNum(), "port of " + down);
        assertEquals(PortState.DOWN, ctxB.queryPort(1).state(), "B's port 1 after going down");
        assertEquals(PortState.ACTIVE, ctxA.queryPort(1).state(), "A's port is another device's");
        fabric.setPortState(1, 1, true);
        awaitAsyncEvent(ctxB, AsyncEventType.PORT_ACTIVE);
        assertEquals(PortState.ACTIVE, ctxB.queryPort(1).state(), "B's port 1 back up");
    }

    @Test
    void buffersAreOneMemoryInBothProcesses() {
        QpPair p = players().rc(QpConfig.rc());
        MemoryRegion amr = regAll(p.local().pd(), 4096);
        MemoryRegion bmr = regAll(p.remote().pd(), 4096);
        assertEquals(bmr.segment().address(), bmr.address(), "B's region is registered at the test's address");
        byte[] data = pattern(4096, 5);
        write(bmr.segment(), 0, data);
        // A reads B's memory over the wire: what the test wrote here is what the child's device sent
        postSend(p.local().qp(), rdmaWr(1, WrOpcode.RDMA_READ, amr, bmr, 4096));
        assertWc(pollOne(p.local().sendCq()), WcStatus.SUCCESS, 1);
        assertBytes(data, amr.segment(), 0, "A's copy of B's buffer");
        // B writes into A from another offset; the test sees B's work in A's memory
        byte[] more = pattern(512, 9);
        write(bmr.segment(), 1024, more);
        postSend(p.remote().qp(), new SendWorkRequest().wrId(2).opcode(WrOpcode.RDMA_WRITE).sendFlags(SendFlags.SIGNALED)
                .singleSge(bmr.address() + 1024, 512, bmr.lkey()).remoteAddr(amr.address()).rkey(amr.rkey()));
        assertWc(pollOne(p.remote().sendCq()), WcStatus.SUCCESS, 2);
        assertBytes(more, amr.segment(), 0, "B's RDMA WRITE into A");
    }

    @Test
    void memoryOutsideTheSharedArenaIsRefusedClearlyOnB() {
        ProtectionDomain pdB = track(ctxB.allocPd());
        try (Arena own = Arena.ofConfined()) {
            MemorySegment seg = own.allocate(64);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> pdB.regMr(seg, EnumSet.of(AccessFlag.LOCAL_WRITE)));
            assertTrue(e.getMessage().contains("buffer arena"), e.getMessage());
        }
    }
}
