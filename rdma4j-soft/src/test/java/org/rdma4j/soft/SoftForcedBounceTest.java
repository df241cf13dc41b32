// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.lang.foreign.MemorySegment;
import java.util.EnumSet;

import org.junit.jupiter.api.Test;
import org.rdma4j.dma.DmaConfig;
import org.rdma4j.dma.DmaMode;
import org.rdma4j.testkit.QpConfig;
import org.rdma4j.testkit.QpPair;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.DmaDirection;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WrOpcode;

/**
 * Why registration must not go through bounce buffers: the seed's Windows Driver Verifier problem
 * ("an intermediate buffer that it copies to/from before/after the DMA operation ... totally breaks the
 * semantics of memory registration"). With bouncing forced and registrations allowed to bounce, a
 * remote RDMA WRITE lands in the bounce buffer and the CPU does not see it until a sync; the verbs
 * never issue one, so by default the device refuses such a registration ({@link SoftBounceTest}).
 */
class SoftForcedBounceTest extends DmaTestBase {
    @Override
    DmaConfig dmaConfig() {
        return SoftTestFabric.config(DmaMode.BOUNCE).withForceBounce(true).withBounceRegistrations(true);
    }

    @Test
    void aRemoteRdmaWriteIsInvisibleToTheCpuUntilASync() {
        QpPair p = players().rc(QpConfig.rc());
        byte[] data = pattern(2000, 9);
        MemorySegment src = alloc(2000);
        write(src, 0, data); // written before registration: the map copies it into the bounce buffer
        MemoryRegion lmr = reg(p.local().pd(), src, AccessFlag.LOCAL_WRITE);
        MemoryRegion rmr = track(p.remote().pd().regMr(alloc(2048),
                EnumSet.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE)));
        long rDma = ((SoftMr) rmr).dmaAddress();
        assertNotEquals(rmr.address(), rDma, "the registration lives in the bounce pool");

        postSend(p.local().qp(), rdmaWr(1, WrOpcode.RDMA_WRITE, lmr, rmr, 2000));
        assertEquals(WcStatus.SUCCESS, pollOne(p.local().sendCq()).status(), "the WRITE completed");
        assertArrayEquals(new byte[2000], read(rmr.segment(), 0, 2000),
                "the target's CPU still sees zeros: the data is in the bounce buffer");

        ctxB.dma().syncForCpu(rDma, 2048, DmaDirection.BIDIRECTIONAL);
        assertBytes(data, rmr.segment(), 0, "visible only after a sync for the CPU");
    }

    @Test
    void aSendFromRegisteredMemoryCarriesStaleBytesUntilSyncedForTheDevice() {
        QpPair p = players().rc(QpConfig.rc());
        MemoryRegion lmr = regAll(p.local().pd(), 256);
        MemoryRegion rmr = regAll(p.remote().pd(), 256);
        byte[] data = pattern(200, 10);
        write(lmr.segment(), 0, data); // after registration: the bounce copy is stale
        postSend(p.local().qp(), rdmaWr(1, WrOpcode.RDMA_WRITE, lmr, rmr, 200));
        assertEquals(WcStatus.SUCCESS, pollOne(p.local().sendCq()).status());
        ctxB.dma().syncForCpu(((SoftMr) rmr).dmaAddress(), 256, DmaDirection.BIDIRECTIONAL);
        assertArrayEquals(new byte[200], read(rmr.segment(), 0, 200), "the device sent the stale bounce copy");
        ctxB.dma().syncForDevice(((SoftMr) rmr).dmaAddress(), 256, DmaDirection.BIDIRECTIONAL); // back to the device

        ctxA.dma().syncForDevice(((SoftMr) lmr).dmaAddress(), 256, DmaDirection.BIDIRECTIONAL);
        postSend(p.local().qp(), rdmaWr(2, WrOpcode.RDMA_WRITE, lmr, rmr, 200));
        assertEquals(WcStatus.SUCCESS, pollOne(p.local().sendCq()).status());
        ctxB.dma().syncForCpu(((SoftMr) rmr).dmaAddress(), 256, DmaDirection.BIDIRECTIONAL);
        assertBytes(data, rmr.segment(), 0, "after sync for the device, then for the CPU");
    }
}
