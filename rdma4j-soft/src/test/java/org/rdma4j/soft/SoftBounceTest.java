// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.EnumSet;

import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
import org.rdma4j.dma.DmaConfig;
import org.rdma4j.dma.DmaMode;
import org.rdma4j.testkit.QpConfig;
import org.rdma4j.testkit.QpPair;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Dma;
import org.rdma4j.verbs.DmaDirection;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WrOpcode;

/**
 * The soft device as DMA hardware with bounce buffers (swiotlb, map registers): a 16 KiB pool of
 * 2 KiB slots. Heap memory is bounced, native memory inside the DMA mask is reached directly, the
 * copies happen at map, unmap and sync, and memory registration never goes through the pool.
 */
class SoftBounceTest extends DmaTestBase {
    @Override
    DmaConfig dmaConfig() {
        return SoftTestFabric.config(DmaMode.BOUNCE).withBouncePool(16 * 1024);
    }

    @Test
    void heapIsBouncedAndNativeMemoryIsReachedDirectly() {
        Dma dma = ctxA.dma();
        MemorySegment nat = alloc(100);
        long a = mapChecked(dma, nat, DmaDirection.TO_DEVICE);
        assertEquals(nat.address(), a, "native memory inside the 64-bit DMA mask: no bounce");
        MemorySegment heap = MemorySegment.ofArray(new byte[100]);
        long b = mapChecked(dma, heap, DmaDirection.TO_DEVICE);
        assertNotEquals(heap.address(), b, "heap memory: a bounce slot");
        dma.unmap(a, 100, DmaDirection.TO_DEVICE);
        dma.unmap(b, 100, DmaDirection.TO_DEVICE);
    }

    @Test
    void aBouncedReceiveIsInvisibleUntilSyncedForTheCpu() {
        QpPair p = players().rc(QpConfig.rc());
        MemoryRegion lmr = regAll(p.local().pd(), 4096);
        Dma dmaB = ctxB.dma();
        byte[] array = new byte[1024];
        MemorySegment heap = MemorySegment.ofArray(array);
        long a = mapChecked(dmaB, heap, DmaDirection.FROM_DEVICE);
        postRecv(p.remote().qp(), dmaRecv(1, p.remote(), a, 1024, heap));
        byte[] d = pattern(1000, 3);
        write(lmr.segment(), 0, d);
        postSend(p.local().qp(), sendWr(1, WrOpcode.SEND, lmr, 0, 1000));
        assertEquals(WcStatus.SUCCESS, pollOne(p.local().sendCq()).status());
        assertEquals(WcStatus.SUCCESS, pollOne(p.remote().recvCq()).status());
        assertArrayEquals(new byte[1000], java.util.Arrays.copyOf(array, 1000), "still in the bounce slot");
        dmaB.syncForCpu(a, 1024, DmaDirection.FROM_DEVICE);
        assertArrayEquals(d, java.util.Arrays.copyOf(array, 1000), "copied back by the sync");
        dmaB.unmap(a, 1024, DmaDirection.FROM_DEVICE);
    }

    @Test
    void aBouncedSendCarriesWhatWasThereAtMapTime() {
        QpPair p = players().rc(QpConfig.rc());
        MemoryRegion rmr = regAll(p.remote().pd(), 4096);
        postRecv(p.remote().qp(), 1, rmr, 0, 4096);
        Dma dma = ctxA.dma();
        byte[] d = pattern(600, 4);
        MemorySegment heap = MemorySegment.ofArray(d.clone());
        long a = mapChecked(dma, heap, DmaDirection.TO_DEVICE);
        postSend(p.local().qp(), dmaSend(1, WrOpcode.SEND, p.local(), a, 600, heap));
        assertEquals(WcStatus.SUCCESS, pollOne(p.local().sendCq()).status());
        dma.unmap(a, 600, DmaDirection.TO_DEVICE);
        assertEquals(WcStatus.SUCCESS, pollOne(p.remote().recvCq()).status());
        assertBytes(d, rmr.segment(), 0, "bounced send");
    }

    @Test
    void theLimitedPoolIsAMappingErrorAndLongMappingsDoNotFit() {
        Dma dma = ctxA.dma();
        long a = mapChecked(dma, MemorySegment.ofArray(new byte[12 * 1024]), DmaDirection.TO_DEVICE);
        long b = dma.map(MemorySegment.ofArray(new byte[8 * 1024]), DmaDirection.TO_DEVICE);
        assertTrue(dma.mappingError(b), "16 KiB pool, 12 KiB in use: 8 KiB more does not fit");
        long c = mapChecked(dma, MemorySegment.ofArray(new byte[4 * 1024]), DmaDirection.TO_DEVICE);
        dma.unmap(a, 12 * 1024, DmaDirection.TO_DEVICE);
        dma.unmap(c, 4 * 1024, DmaDirection.TO_DEVICE);
        expectNoReports(0);
    }

    @Test
    void registeringMemoryThatWouldNeedBouncingFailsClearly() {
        // swiotlb=force: every mapping would bounce, so a registration cannot be coherent with the CPU.
        try (SoftFabric f = new SoftFabric(new ManualClock())) {
            SoftDevice d = f.addDevice("forced", DmaConfig.bounce().withForceBounce(true));
            Context ctx = d.open();
            ProtectionDomain pd = ctx.allocPd();
            VerbsException e = assertThrows(VerbsException.class,
                    () -> pd.regMr(alloc(4096), EnumSet.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE)));
            assertEquals(Errno.EOPNOTSUPP, e.errno());
            assertTrue(e.getMessage().contains("bounce") && e.getMessage().contains("DMA_ATTR_REQUIRE_COHERENT"),
                    e.getMessage());
            // per-I/O mappings are fine: the ULP syncs them itself
            long a = ctx.dma().map(alloc(64), DmaDirection.TO_DEVICE);
            assertFalse(ctx.dma().mappingError(a));
            ctx.dma().unmap(a, 64, DmaDirection.TO_DEVICE);
            pd.close();
            ctx.close();
        }
        // A 32-bit DMA mask: native memory above 4 GiB cannot be registered either.
        try (SoftFabric f = new SoftFabric(new ManualClock())) {
            Context ctx = f.addDevice("dma32", DmaConfig.bounce().withAddressBits(32)).open();
            ProtectionDomain pd = ctx.allocPd();
            MemorySegment high = alloc(64);
            if (high.address() + 64 > (1L << 32)) {
                VerbsException e = assertThrows(VerbsException.class, () -> pd.regMr(high, EnumSet.noneOf(AccessFlag.class)));
                assertTrue(e.getMessage().contains("32-bit DMA mask"), e.getMessage());
            }
            pd.close();
            ctx.close();
        }
    }
}
