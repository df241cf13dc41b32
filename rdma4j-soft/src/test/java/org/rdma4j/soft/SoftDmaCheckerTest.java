// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;

import org.junit.jupiter.api.Test;
import org.rdma4j.dma.DmaConfig;
import org.rdma4j.dma.DmaMode;
import org.rdma4j.dma.DmaReport;
import org.rdma4j.dma.DmaReport.Kind;
import org.rdma4j.testkit.IbTimers;
import org.rdma4j.testkit.QpConfig;
import org.rdma4j.testkit.QpPair;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Dma;
import org.rdma4j.verbs.DmaDirection;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WrOpcode;

/**
 * Every report of the DMA checker fires on the misuse it names, with the stack of the mapping (where
 * there is one) and of the misuse, and correct code triggers none. The device is virtual: nothing
 * faults, so only the checker can tell (which is why Linux's dma-debug misses these on rxe).
 */
class SoftDmaCheckerTest extends DmaTestBase {
    @Override
    DmaConfig dmaConfig() {
        return DmaConfig.virtual().withMode(DmaMode.VIRTUAL).withChecker(true);
    }

    private QpPair rc() {
        return players().rc(QpConfig.rc().rnrRetry(7).minRnrTimer(12));
    }

    private static void assertStacks(DmaReport r, boolean mapping) {
        assertNotNull(r.misusedAt(), "misuse stack");
        if (mapping) {
            assertNotNull(r.mappedAt(), "mapping stack");
            assertTrue(r.toString().contains("mapping:") && r.toString().contains("misuse:"), r.toString());
        }
        assertTrue(r.toString().contains(SoftDmaCheckerTest.class.getSimpleName()), "a stack names the test: " + r);
    }

    @Test
    void correctCodeIsSilent() {
        QpPair p = rc();
        MemoryRegion rmr = regAll(p.remote().pd(), 1 << 16);
        Dma dma = ctxA.dma();
        assertTrue(!dma.usesVirtDma(), "with the checker on, mapping calls go through it");
        MemorySegment buf = alloc(1500);
        for (int i = 0; i < 50; i++) {
            postRecv(p.remote().qp(), i, rmr, 0, 2048);
            long a = mapChecked(dma, buf, DmaDirection.TO_DEVICE);
            postSend(p.local().qp(), dmaSend(i, WrOpcode.SEND, p.local(), a, 1500, buf));
            assertEquals(WcStatus.SUCCESS, pollOne(p.local().sendCq()).status());
            dma.unmap(a, 1500, DmaDirection.TO_DEVICE);
            assertEquals(WcStatus.SUCCESS, pollOne(p.remote().recvCq()).status());
            write(buf, 0, pattern(16, i)); // after the completion: allowed
        }
        expectNoReports(0);
        expectNoReports(1);
    }

    @Test
    void deviceAccessOutsideAnyMapping() {
        QpPair p = rc();
        MemoryRegion rmr = regAll(p.remote().pd(), 256);
        postRecv(p.remote().qp(), 1, rmr, 0, 256);
        postRecv(p.remote().qp(), 2, rmr, 0, 256);
        MemorySegment buf = alloc(64);
        // never mapped: a virtual device copies it anyway, the checker reports
        postSend(p.local().qp(), dmaSend(1, WrOpcode.SEND, p.local(), buf.address(), 64, buf));
        assertEquals(WcStatus.SUCCESS, pollOne(p.local().sendCq()).status());
        DmaReport r = report(0, Kind.ACCESS_OUTSIDE_MAPPING);
        assertStacks(r, false);
        assertTrue(r.message().contains("no mapping"), r.message());
        expectReports(0, Kind.ACCESS_OUTSIDE_MAPPING);
        // mapped, then unmapped before use: the report names the unmap
        long a = mapChecked(ctxA.dma(), buf, DmaDirection.TO_DEVICE);
        ctxA.dma().unmap(a, 64, DmaDirection.TO_DEVICE);
        postSend(p.local().qp(), dmaSend(2, WrOpcode.SEND, p.local(), a, 64, buf));
        assertEquals(WcStatus.SUCCESS, pollOne(p.local().sendCq()).status());
        r = report(0, Kind.ACCESS_OUTSIDE_MAPPING);
        assertStacks(r, true);
        assertTrue(r.message().contains("unmapped at"), r.message());
        expectReports(0, Kind.ACCESS_OUTSIDE_MAPPING);
    }

    @Test
    void deviceAccessInTheWrongDirection() {
        QpPair p = rc();
        MemoryRegion lmr = regAll(p.local().pd(), 256);
        MemorySegment buf = alloc(256);
        long a = mapChecked(ctxB.dma(), buf, DmaDirection.TO_DEVICE);
        postRecv(p.remote().qp(), dmaRecv(1, p.remote(), a, 256, buf)); // the device will write it
        postSend(p.local().qp(), sendWr(1, WrOpcode.SEND, lmr, 0, 100));
        assertEquals(WcStatus.SUCCESS, pollOne(p.remote().recvCq()).status());
        assertStacks(report(1, Kind.WRONG_DIRECTION), true);
        ctxB.dma().unmap(a, 256, DmaDirection.TO_DEVICE);
        expectReports(1, Kind.WRONG_DIRECTION);
    }

    @Test
    void unmapOfSomethingNeverMapped() {
        MemorySegment buf = alloc(64);
        ctxA.dma().unmap(buf.address(), 64, DmaDirection.TO_DEVICE);
        assertStacks(report(0, Kind.UNMAP_NOT_MAPPED), false);
        expectReports(0, Kind.UNMAP_NOT_MAPPED);
    }

    @Test
    void doubleUnmap() {
        MemorySegment buf = alloc(64);
        long a = mapChecked(ctxA.dma(), buf, DmaDirection.TO_DEVICE);
        ctxA.dma().unmap(a, 64, DmaDirection.TO_DEVICE);
        expectNoReports(0);
        ctxA.dma().unmap(a, 64, DmaDirection.TO_DEVICE);
        assertStacks(report(0, Kind.DOUBLE_UNMAP), true);
        expectReports(0, Kind.DOUBLE_UNMAP);
    }

    @Test
    void unmapWithAnotherSizeOrDirection() {
        Dma dma = ctxA.dma();
        long a = mapChecked(dma, alloc(256), DmaDirection.TO_DEVICE);
        dma.unmap(a, 128, DmaDirection.TO_DEVICE);
        DmaReport r = report(0, Kind.UNMAP_MISMATCH);
        assertStacks(r, true);
        assertTrue(r.message().contains("size 128"), r.message());
        expectReports(0, Kind.UNMAP_MISMATCH);
        long b = mapChecked(dma, alloc(256), DmaDirection.TO_DEVICE);
        dma.unmap(b, 256, DmaDirection.FROM_DEVICE);
        assertTrue(report(0, Kind.UNMAP_MISMATCH).message().contains("FROM_DEVICE"));
        expectReports(0, Kind.UNMAP_MISMATCH);
    }

    @Test
    void syncOfUnmappedMemoryOrInTheWrongDirection() {
        Dma dma = ctxA.dma();
        MemorySegment buf = alloc(256);
        dma.syncForCpu(buf.address(), 256, DmaDirection.FROM_DEVICE);
        assertStacks(report(0, Kind.SYNC_NOT_MAPPED), false);
        expectReports(0, Kind.SYNC_NOT_MAPPED);
        long a = mapChecked(dma, buf, DmaDirection.TO_DEVICE);
        dma.syncForCpu(a, 256, DmaDirection.FROM_DEVICE);
        assertStacks(report(0, Kind.SYNC_WRONG_DIRECTION), true);
        expectReports(0, Kind.SYNC_WRONG_DIRECTION);
        dma.syncForCpu(a + 64, 128, DmaDirection.TO_DEVICE); // part of the mapping, its direction: fine
        dma.syncForDevice(a + 64, 128, DmaDirection.TO_DEVICE);
        dma.unmap(a, 256, DmaDirection.TO_DEVICE);
        dma.syncForDevice(a, 256, DmaDirection.TO_DEVICE); // after the unmap
        expectReports(0, Kind.SYNC_NOT_MAPPED);
    }

    @Test
    void aSyncOfOneSlotOfAPoolGivesTheCpuThatSlotOnly() {
        // One FROM_DEVICE mapping holding two receive slots, synced slot by slot (dma_sync_single_range_for_cpu):
        // the CPU owning slot 0 must not make the device's write into slot 1 a misuse, and slot 0 handed back
        // without its sync for the device still is one.
        QpPair p = rc();
        MemoryRegion lmr = regAll(p.local().pd(), 256);
        Dma dmaB = ctxB.dma();
        MemorySegment pool = alloc(512);
        long a = mapChecked(dmaB, pool, DmaDirection.FROM_DEVICE);
        postRecv(p.remote().qp(), dmaRecv(1, p.remote(), a, 256, pool.asSlice(0, 256)));
        postSend(p.local().qp(), sendWr(1, WrOpcode.SEND, lmr, 0, 100));
        assertEquals(WcStatus.SUCCESS, pollOne(p.remote().recvCq()).status());
        dmaB.syncForCpu(a, 256, DmaDirection.FROM_DEVICE); // slot 0 is the CPU's
        postRecv(p.remote().qp(), dmaRecv(2, p.remote(), a + 256, 256, pool.asSlice(256, 256)));
        postSend(p.local().qp(), sendWr(2, WrOpcode.SEND, lmr, 0, 100));
        assertEquals(WcStatus.SUCCESS, pollOne(p.remote().recvCq()).status());
        expectNoReports(1); // the device wrote slot 1, which the CPU never took
        postRecv(p.remote().qp(), dmaRecv(3, p.remote(), a, 256, pool.asSlice(0, 256))); // slot 0, not synced back
        postSend(p.local().qp(), sendWr(3, WrOpcode.SEND, lmr, 0, 100));
        assertEquals(WcStatus.SUCCESS, pollOne(p.remote().recvCq()).status());
        expectReports(1, Kind.ACCESS_CPU_OWNED);
        dmaB.syncForCpu(a, 512, DmaDirection.FROM_DEVICE); // the whole pool, then the device gets slot 1 back
        dmaB.syncForDevice(a + 256, 256, DmaDirection.FROM_DEVICE);
        postRecv(p.remote().qp(), dmaRecv(4, p.remote(), a + 256, 256, pool.asSlice(256, 256)));
        postSend(p.local().qp(), sendWr(4, WrOpcode.SEND, lmr, 0, 100));
        assertEquals(WcStatus.SUCCESS, pollOne(p.remote().recvCq()).status());
        expectNoReports(1);
        dmaB.unmap(a, 512, DmaDirection.FROM_DEVICE);
        pollUntil(p.local().sendCq(), 4);
    }

    @Test
    void deviceAccessToABufferTheCpuHasNotSyncedBack() {
        QpPair p = rc();
        MemoryRegion lmr = regAll(p.local().pd(), 256);
        Dma dmaB = ctxB.dma();
        MemorySegment buf = alloc(256);
        long a = mapChecked(dmaB, buf, DmaDirection.FROM_DEVICE);
        postRecv(p.remote().qp(), dmaRecv(1, p.remote(), a, 256, buf));
        postSend(p.local().qp(), sendWr(1, WrOpcode.SEND, lmr, 0, 100));
        assertEquals(WcStatus.SUCCESS, pollOne(p.remote().recvCq()).status());
        dmaB.syncForCpu(a, 256, DmaDirection.FROM_DEVICE); // the CPU owns it now ...
        postRecv(p.remote().qp(), dmaRecv(2, p.remote(), a, 256, buf)); // ... and hands it back without syncForDevice
        postSend(p.local().qp(), sendWr(2, WrOpcode.SEND, lmr, 0, 100));
        assertEquals(WcStatus.SUCCESS, pollOne(p.remote().recvCq()).status());
        assertStacks(report(1, Kind.ACCESS_CPU_OWNED), true);
        dmaB.unmap(a, 256, DmaDirection.FROM_DEVICE);
        pollUntil(p.local().sendCq(), 2);
        expectReports(1, Kind.ACCESS_CPU_OWNED);
    }

    @Test
    void mappingErrorNotCheckedBeforeUse() {
        QpPair p = rc();
        MemoryRegion rmr = regAll(p.remote().pd(), 256);
        postRecv(p.remote().qp(), 1, rmr, 0, 256);
        Dma dma = ctxA.dma();
        MemorySegment buf = alloc(64);
        long a = dma.map(buf, DmaDirection.TO_DEVICE); // no mappingError(a)
        postSend(p.local().qp(), dmaSend(1, WrOpcode.SEND, p.local(), a, 64, buf));
        assertEquals(WcStatus.SUCCESS, pollOne(p.local().sendCq()).status());
        dma.unmap(a, 64, DmaDirection.TO_DEVICE);
        DmaReport r = report(0, Kind.MAPPING_ERROR_NOT_CHECKED);
        assertStacks(r, true);
        expectReports(0, Kind.MAPPING_ERROR_NOT_CHECKED);
        // Linux's own point of detection: unmapped without ever being checked
        long b = dma.map(buf, DmaDirection.TO_DEVICE);
        dma.unmap(b, 64, DmaDirection.TO_DEVICE);
        expectReports(0, Kind.MAPPING_ERROR_NOT_CHECKED);
    }

    @Test
    void mappingsLeakedWhenTheContextCloses() {
        Context ctx = fabric.device(0).open();
        long a = mapChecked(ctx.dma(), alloc(64), DmaDirection.TO_DEVICE);
        mapChecked(ctx.dma(), alloc(32), DmaDirection.FROM_DEVICE);
        ctx.dma().unmap(a, 64, DmaDirection.TO_DEVICE);
        ctx.close();
        DmaReport r = report(0, Kind.LEAK);
        assertStacks(r, true);
        assertTrue(r.message().contains("1 live mapping"), r.message());
        expectReports(0, Kind.LEAK);
    }

    @Test
    void accessThroughAnMrAfterDeregistration() throws Exception {
        QpPair p = rc();
        MemoryRegion lmr = regAll(p.local().pd(), 64);
        MemoryRegion rmr = regAll(p.remote().pd(), 256);
        postSend(p.local().qp(), sendWr(1, WrOpcode.SEND, lmr, 0, 64)); // RNR: no receive yet
        release(lmr); // deregistered while the request still needs it
        postRecv(p.remote().qp(), 1, rmr, 0, 256);
        advanceUntil(p.local().sendCq(), 1, IbTimers.rnrTimerNs(12) * 3 / 2, 20); // the retransmission
        DmaReport r = report(0, Kind.ACCESS_AFTER_DEREGISTRATION);
        assertStacks(r, true);
        assertTrue(r.message().contains("deregistered at"), r.message());
        expectReports(0, Kind.ACCESS_AFTER_DEREGISTRATION);
    }

    @Test
    void sendBufferChangedBetweenPostAndTransmission() {
        QpPair p = rc();
        MemoryRegion lmr = regAll(p.local().pd(), 64);
        MemoryRegion rmr = regAll(p.remote().pd(), 256);
        write(lmr.segment(), 0, pattern(64, 1));
        postSend(p.local().qp(), sendWr(1, WrOpcode.SEND, lmr, 0, 64)); // RNR: transmitted again later
        write(lmr.segment(), 0, pattern(64, 2)); // the bug: the CPU reuses the buffer before the completion
        postRecv(p.remote().qp(), 1, rmr, 0, 256);
        advanceUntil(p.local().sendCq(), 1, IbTimers.rnrTimerNs(12) * 3 / 2, 20);
        DmaReport r = report(0, Kind.SEND_BUFFER_CHANGED);
        assertStacks(r, true);
        assertTrue(r.mappedAt().getMessage().contains("posted"), "the first stack is the post's");
        expectReports(0, Kind.SEND_BUFFER_CHANGED);
    }

    /**
     * An inline SEND in a send-queue slot that held a checked (not inline) SEND before is not compared with
     * that one's checksum: inline data is copied at post, so the CPU may change the buffer at once. Found by
     * the long random-operation run of -Pslow, whose sequences wrap the send queue.
     */
    @Test
    void anInlineSendInAReusedSlotIsNotComparedWithTheSlotsLastChecksum() {
        QpPair p = players().rc(QpConfig.rc().maxSendWr(1).maxInlineData(64));
        MemoryRegion lmr = regAll(p.local().pd(), 64);
        MemoryRegion rmr = regAll(p.remote().pd(), 256);
        for (int i = 0; i < 4; i++) {
            boolean inline = (i & 1) == 1;
            write(lmr.segment(), 0, pattern(64, i));
            postRecv(p.remote().qp(), i, rmr, 0, 256);
            var wr = sendWr(i, WrOpcode.SEND, lmr, 0, 64);
            if (inline) {
                wr.sendFlags(wr.sendFlags() | org.rdma4j.verbs.SendFlags.INLINE);
            }
            postSend(p.local().qp(), wr);
            if (inline) {
                write(lmr.segment(), 0, pattern(64, 100 + i)); // allowed: the inline data was copied at post
            }
            assertEquals(WcStatus.SUCCESS, pollOne(p.local().sendCq()).status());
            assertEquals(WcStatus.SUCCESS, pollOne(p.remote().recvCq()).status());
        }
        expectNoReports(0);
        expectNoReports(1);
    }
}
