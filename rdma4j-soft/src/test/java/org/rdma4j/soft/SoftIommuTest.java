// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.rdma4j.dma.DmaConfig;
import org.rdma4j.dma.DmaMode;
import org.rdma4j.testkit.IbTimers;
import org.rdma4j.testkit.QpConfig;
import org.rdma4j.testkit.QpPair;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.Dma;
import org.rdma4j.verbs.DmaDirection;
import org.rdma4j.verbs.DmaSgList;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WrOpcode;

/**
 * The soft device as DMA hardware behind an IOMMU: IO virtual addresses that a 4 KiB page table
 * translates, in a small window (8 pages here). Accesses to unmapped pages or against the mapping's
 * direction fault and fail the operation with the completion status rxe gives a failed copy.
 */
class SoftIommuTest extends DmaTestBase {
    private static final long WINDOW = 8 * 4096;

    @Override
    DmaConfig dmaConfig() {
        return SoftTestFabric.config(DmaMode.IOMMU).withIommuWindow(WINDOW);
    }

    private QpPair rc() {
        return players().rc(QpConfig.rc().rnrRetry(7).minRnrTimer(12));
    }

    @Test
    void theDmaAddressIsAnIovaAndTheVirtualAddressFaults() {
        QpPair p = rc();
        MemoryRegion rmr = regAll(p.remote().pd(), 256);
        postRecv(p.remote().qp(), 1, rmr, 0, 256);
        MemorySegment buf = alloc(64);
        Dma dma = ctxA.dma();
        assertFalse(dma.usesVirtDma());
        long iova = mapChecked(dma, buf, DmaDirection.TO_DEVICE);
        assertNotEquals(buf.address(), iova, "an IOMMU hands out IO virtual addresses");
        // The seed's "void *data" shortcut, posting the virtual address, is a fault on this device.
        postSend(p.local().qp(), dmaSend(1, WrOpcode.SEND, p.local(), buf.address(), 64, buf));
        assertWc(pollOne(p.local().sendCq()), WcStatus.LOC_PROT_ERR, 1);
        assertEquals(QpState.ERR, p.local().qp().state());
        dma.unmap(iova, 64, DmaDirection.TO_DEVICE);
        expectNoReports(0);
    }

    @Test
    void sendFromAnUnmappedIovaFaults() {
        QpPair p = rc();
        MemorySegment buf = alloc(64);
        Dma dma = ctxA.dma();
        long iova = mapChecked(dma, buf, DmaDirection.TO_DEVICE);
        dma.unmap(iova, 64, DmaDirection.TO_DEVICE);
        postSend(p.local().qp(), dmaSend(1, WrOpcode.SEND, p.local(), iova, 64, buf));
        assertWc(pollOne(p.local().sendCq()), WcStatus.LOC_PROT_ERR, 1);
    }

    @Test
    void sendFromAFromDeviceMappingFaults() {
        QpPair p = rc();
        MemorySegment buf = alloc(64);
        Dma dma = ctxA.dma();
        long iova = mapChecked(dma, buf, DmaDirection.FROM_DEVICE); // IOMMU_WRITE only: the device may not read
        postSend(p.local().qp(), dmaSend(1, WrOpcode.SEND, p.local(), iova, 64, buf));
        assertWc(pollOne(p.local().sendCq()), WcStatus.LOC_PROT_ERR, 1);
        dma.unmap(iova, 64, DmaDirection.FROM_DEVICE);
    }

    @Test
    void readAndAtomicIntoAToDeviceMappingFault() {
        QpPair p = rc();
        MemoryRegion rmr = regAll(p.remote().pd(), 256);
        MemorySegment buf = alloc(64);
        Dma dma = ctxA.dma();
        long iova = mapChecked(dma, buf, DmaDirection.TO_DEVICE); // IOMMU_READ only: the device may not write
        postSend(p.local().qp(), dmaSend(1, WrOpcode.RDMA_READ, p.local(), iova, 64, buf)
                .remoteAddr(rmr.address()).rkey(rmr.rkey()));
        assertWc(pollOne(p.local().sendCq()), WcStatus.LOC_PROT_ERR, 1);
        dma.unmap(iova, 64, DmaDirection.TO_DEVICE);
    }

    @Test
    void receiveIntoAToDeviceMappingFaultsAtTheResponder() {
        QpPair p = rc();
        MemoryRegion lmr = regAll(p.local().pd(), 256);
        MemorySegment buf = alloc(256);
        Dma dmaB = ctxB.dma();
        long iova = mapChecked(dmaB, buf, DmaDirection.TO_DEVICE);
        postRecv(p.remote().qp(), dmaRecv(7, p.remote(), iova, 256, buf));
        postSend(p.local().qp(), sendWr(1, WrOpcode.SEND, lmr, 0, 100));
        // rxe: a receive buffer the responder cannot write is a malformed WQE (class A): the receive
        // completes with LOC_QP_OP_ERR and the requester gets NAK remote operational error.
        assertWc(pollOne(p.remote().recvCq()), WcStatus.LOC_QP_OP_ERR, 7);
        assertWc(pollOne(p.local().sendCq()), WcStatus.REM_OP_ERR, 1);
        dmaB.unmap(iova, 256, DmaDirection.TO_DEVICE);
    }

    @Test
    void unmapBeforeTheRetransmissionFaultsAtTransmission() {
        QpPair p = rc();
        MemoryRegion rmr = regAll(p.remote().pd(), 256);
        MemorySegment buf = alloc(64);
        write(buf, 0, pattern(64, 1));
        Dma dma = ctxA.dma();
        long iova = mapChecked(dma, buf, DmaDirection.TO_DEVICE);
        postSend(p.local().qp(), dmaSend(1, WrOpcode.SEND, p.local(), iova, 64, buf)); // RNR: no receive yet
        dma.unmap(iova, 64, DmaDirection.TO_DEVICE); // a ULP bug: unmapped before the completion
        postRecv(p.remote().qp(), 1, rmr, 0, 256);
        Advanced a = advanceUntil(p.local().sendCq(), 1, IbTimers.rnrTimerNs(12) * 3 / 2, 20);
        assertWc(a.completions().getFirst(), WcStatus.LOC_PROT_ERR, 1);
        assertNoCompletion(p.remote().recvCq());
    }

    @Test
    void deregistrationUnmapsTheRegionsPages() throws Exception {
        QpPair p = rc();
        MemoryRegion lmr = regAll(p.local().pd(), 64);
        MemoryRegion rmr = regAll(p.remote().pd(), 256);
        int before = soft(0).dma().iommuPagesInUse();
        postSend(p.local().qp(), sendWr(1, WrOpcode.SEND, lmr, 0, 64)); // RNR
        release(lmr); // deregistered while the request waits: its IOVA pages go away
        assertEquals(before - 1, soft(0).dma().iommuPagesInUse());
        postRecv(p.remote().qp(), 1, rmr, 0, 256);
        Advanced a = advanceUntil(p.local().sendCq(), 1, IbTimers.rnrTimerNs(12) * 3 / 2, 20);
        assertWc(a.completions().getFirst(), WcStatus.LOC_PROT_ERR, 1);
    }

    @Test
    void aScatterListThatDoesNotFitMapsNothing() {
        Dma dma = ctxA.dma();
        DmaSgList sg = new DmaSgList(3);
        for (int i = 0; i < 3; i++) {
            sg.buffer(i, arena.allocate(3 * 4096, 4096));
        }
        assertEquals(0, dma.mapSg(sg, 3, DmaDirection.TO_DEVICE), "9 pages do not fit in 8");
        assertEquals(0, soft(0).dma().iommuPagesInUse(), "the entries mapped before the failure are unmapped");
        assertEquals(2, dma.mapSg(sg, 2, DmaDirection.TO_DEVICE));
        assertEquals(6, soft(0).dma().iommuPagesInUse());
        var e = assertVerbsError(Errno.ENOMEM, () -> dma.allocCoherent(3 * 4096));
        assertTrue(e.getMessage().contains("IOMMU window"), e.getMessage());
        dma.unmapSg(sg, 2, DmaDirection.TO_DEVICE);
        assertEquals(0, soft(0).dma().iommuPagesInUse());
        expectNoReports(0);
    }

    @Test
    void exhaustingTheWindowIsAMappingErrorAndRegistrationFailsWithEnomem() {
        Dma dma = ctxA.dma();
        List<Long> iovas = new ArrayList<>();
        List<MemorySegment> bufs = new ArrayList<>();
        long failed = 0;
        for (int i = 0; i < 16; i++) {
            MemorySegment b = arena.allocate(4096, 4096);
            long a = dma.map(b, DmaDirection.BIDIRECTIONAL);
            if (dma.mappingError(a)) {
                failed = a;
                break;
            }
            iovas.add(a);
            bufs.add(b);
        }
        assertEquals(WINDOW / 4096, iovas.size(), "one page per aligned 4 KiB buffer until the window is full");
        assertEquals(Dma.MAPPING_ERROR, failed);
        var pd = track(ctxA.allocPd());
        var e = assertVerbsError(Errno.ENOMEM, () -> pd.regMr(alloc(64), EnumSet.noneOf(AccessFlag.class)));
        assertTrue(e.getMessage().contains("IOMMU window"), e.getMessage());
        dma.unmap(iovas.getFirst(), 4096, DmaDirection.BIDIRECTIONAL);
        // page-aligned: a 64-byte-aligned 100-byte buffer at offset 4032 of its page needs two IOMMU pages, and
        // only one is free (1 run in 64 failed here, depending on where the arena put it)
        long again = mapChecked(dma, arena.allocate(100, 4096), DmaDirection.TO_DEVICE);
        dma.unmap(again, 100, DmaDirection.TO_DEVICE);
        for (int i = 1; i < iovas.size(); i++) {
            dma.unmap(iovas.get(i), 4096, DmaDirection.BIDIRECTIONAL);
        }
        assertEquals(0, soft(0).dma().iommuPagesInUse());
        expectNoReports(0);
    }
}
