// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.EnumSet;

import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.ConformanceTestBase;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.testkit.NotOnIwarp;
import org.rdma4j.testkit.QpConfig;
import org.rdma4j.testkit.QpPair;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * The bad input on a libibverbs device: a closed or heap segment, a request whose gather entry
 * points outside its region, inline data at an address nobody registered, a post to a destroyed QP, a CQ
 * polled after close, an address handle destroyed before the post, a CQ destroyed with unacknowledged
 * events. Each gets an exception, a refused post or an error completion; none may crash the JVM, hang,
 * or let the provider read memory it was not given.
 */
class IbvBadInputTest extends ConformanceTestBase {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return IbvTestFabric.create(clock);
    }

    @Override
    protected Duration quietWindow() {
        return IbvTestFabric.QUIET;
    }

    @Test
    void heapClosedAndEmptySegmentsAreRefused() {
        ProtectionDomain pd = track(ctxA.allocPd());
        EnumSet<AccessFlag> rw = EnumSet.of(AccessFlag.LOCAL_WRITE);
        assertVerbsError(Errno.EINVAL, () -> pd.regMr(MemorySegment.ofArray(new byte[4096]), rw));
        Arena closed = Arena.ofConfined();
        MemorySegment gone = closed.allocate(4096, 4096);
        closed.close();
        VerbsException e = assertVerbsError(Errno.EINVAL, () -> pd.regMr(gone, rw));
        assertTrue(e.getMessage().contains("closed"), e.getMessage());
        assertVerbsError(Errno.EINVAL, () -> pd.regMr(alloc(64).asSlice(0, 0), rw));
    }

    @Test
    void aGatherEntryOutsideItsRegionCompletesWithAnError() {
        QpPair p = players().rc(QpConfig.rc());
        MemoryRegion mr = reg(p.local().pd(), alloc(4096), AccessFlag.LOCAL_WRITE);
        MemoryRegion dst = regAll(p.remote().pd(), 4096);
        SendWorkRequest wr = new SendWorkRequest().wrId(9).opcode(WrOpcode.RDMA_WRITE).sendFlags(SendFlags.SIGNALED)
                .singleSge(mr.address() + 4000, 4096, mr.lkey()).remoteAddr(dst.address()).rkey(dst.rkey());
        postSend(p.local().qp(), wr);
        WorkCompletion wc = pollOne(p.local().sendCq());
        assertEquals(9, wc.wrId());
        // rxe: the requester's copy_data finds the range outside the MR (lookup/range check fails with
        // -EINVAL or -EFAULT): LOC_QP_OP_ERR or LOC_PROT_ERR (rxe_req.c rxe_requester)
        assertTrue(wc.status() == WcStatus.LOC_PROT_ERR || wc.status() == WcStatus.LOC_QP_OP_ERR, wc.toString());
    }

    @Test
    void inlineDataOnlyFromMemoryTheProviderMayRead() {
        QpPair p = players().rc(QpConfig.rc().maxInlineData(64));
        MemoryRegion dst = regAll(p.remote().pd(), 4096);
        SendWorkRequest wr = new SendWorkRequest().wrId(1).opcode(WrOpcode.RDMA_WRITE)
                .sendFlags(SendFlags.SIGNALED | SendFlags.INLINE).remoteAddr(dst.address()).rkey(dst.rkey());
        // an address in no region: the provider would memcpy from it inside the call
        wr.singleSge(0x10, 16, 0);
        assertPostSendRefused(p.local().qp(), wr, Errno.EINVAL);
        // a heap segment is staged in native memory; the bytes arrive
        byte[] text = "inline from heap".getBytes();
        wr.numSge(1).sge(0).inline(MemorySegment.ofArray(text));
        postSend(p.local().qp(), wr);
        assertWc(pollOne(p.local().sendCq()), WcStatus.SUCCESS, 1);
        assertBytes(text, dst.segment(), 0, "inline WRITE from a heap segment");
        // a native segment whose arena is closed
        Arena closed = Arena.ofConfined();
        MemorySegment gone = closed.allocate(16);
        closed.close();
        wr.sge(0).inline(gone);
        assertPostSendRefused(p.local().qp(), wr, Errno.EINVAL);
    }

    @Test
    void postsToADestroyedQpAreRefusedAndItsCqCannotBePolledAfterClose() throws Exception {
        QpPair p = players().rc(QpConfig.rc());
        MemoryRegion mr = regAll(p.local().pd(), 64);
        QueuePair qp = p.local().qp();
        release(qp);
        assertPostSendRefused(qp, sendWr(1, WrOpcode.SEND, mr, 0, 8), Errno.EINVAL);
        org.rdma4j.verbs.RecvWorkRequest rwr = recvWr(2, mr, 0, 8);
        assertFalse(qp.postRecv(rwr));
        assertEquals(Errno.EINVAL, rwr.postError());
        assertVerbsError(Errno.EINVAL, qp::query);
        CompletionQueue cq = p.local().sendCq();
        release(cq);
        assertVerbsError(Errno.EINVAL, () -> cq.poll(new WorkCompletion()));
        assertVerbsError(Errno.EINVAL, () -> cq.reqNotify(false));
        cq.close(); // idempotent
    }

    @NotOnIwarp("iWARP has RC QPs only: no UD QPs and no address handles (siw_create_ah does not exist)")
    @Test
    void aUdPostWithADestroyedAddressHandleIsRefused() throws Exception {
        QpPair p = players().ud(QpConfig.ud());
        MemoryRegion mr = regAll(p.local().pd(), 64);
        AddressHandle ah = track(p.local().pd().createAh(new org.rdma4j.verbs.AhAttributes()
                .dgid(p.remote().gid()).sgidIndex(0).portNum(1)));
        release(ah);
        SendWorkRequest wr = sendWr(1, WrOpcode.SEND, mr, 0, 8).ah(ah).remoteQpn(p.remote().qpNum())
                .remoteQkey(QpConfig.DEFAULT_QKEY);
        assertPostSendRefused(p.local().qp(), wr, Errno.EINVAL);
    }

    @Test
    void aCqWithUnacknowledgedEventsIsDestroyedWithoutHanging() throws Exception {
        // a receive completion on an armed CQ raises an event on its channel: a SEND over a connected pair
        // (rxe, siw through the CM). A completion flushed by moving a QP to ERR would not do on every
        // device: a request posted to a user-space QP already in ERR is never completed by rxe 6.1 (a
        // receive) or siw 6.1 (a send: siw_post_send's doorbell flushes only the kernel's empty WR list)
        QpPair p = players().rc(QpConfig.rc().recvChannel(true));
        MemoryRegion src = regAll(p.local().pd(), 64);
        MemoryRegion dst = regAll(p.remote().pd(), 64);
        CompletionQueue cq = p.remote().recvCq();
        CompletionChannel ch = p.remote().recvChannel();
        cq.reqNotify(false);
        postRecv(p.remote().qp(), 4, dst, 0, 64);
        postSend(p.local().qp(), sendWr(5, WrOpcode.SEND, src, 0, 8));
        assertWc(pollOne(p.local().sendCq()), WcStatus.SUCCESS, 5);
        assertEquals(cq, ch.getCqEvent(POLL_TIMEOUT), "the CQ's event");
        // neither acknowledged nor drained: ibv_destroy_cq would wait for ever without the provider's help
        release(p.remote().qp());
        long t0 = System.nanoTime();
        release(cq);
        assertTrue(System.nanoTime() - t0 < 5_000_000_000L, "destroy returned");
        assertThrows(VerbsException.class, () -> cq.poll(new WorkCompletion()));
    }
}
