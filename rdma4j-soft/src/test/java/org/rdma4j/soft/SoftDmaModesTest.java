// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.Parameter;
import org.junit.jupiter.params.ParameterizedClass;
import org.junit.jupiter.params.provider.MethodSource;
import org.rdma4j.dma.DmaConfig;
import org.rdma4j.dma.DmaMode;
import org.rdma4j.testkit.QpConfig;
import org.rdma4j.testkit.QpPair;
import org.rdma4j.verbs.CoherentBuffer;
import org.rdma4j.verbs.Dma;
import org.rdma4j.verbs.DmaDirection;
import org.rdma4j.verbs.DmaSgList;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * Correct ULP code (map, check, post with the local DMA L_Key, unmap on completion; sync; coherent
 * rings; scatter/gather lists) moves the right bytes in every DMA mode, and the checker stays silent
 * (the fixture fails any test that leaves a report).
 */
@ParameterizedClass(name = "{0}")
@MethodSource("org.rdma4j.soft.SoftTestFabric#modes")
class SoftDmaModesTest extends DmaTestBase {
    @Parameter
    DmaMode mode;

    @Override
    DmaConfig dmaConfig() {
        return SoftTestFabric.config(mode);
    }

    private QpPair rc() {
        return players().rc(QpConfig.rc());
    }

    @Test
    void sendFromMappedNativeAndHeapBuffers() {
        QpPair p = rc();
        MemoryRegion rmr = regAll(p.remote().pd(), 4096);
        Dma dma = ctxA.dma();
        byte[] heapData = pattern(300, 1);
        MemorySegment heap = MemorySegment.ofArray(heapData.clone());
        MemorySegment nat = alloc(700);
        byte[] natData = pattern(700, 2);
        write(nat, 0, natData);
        postRecv(p.remote().qp(), 1, rmr, 0, 1024);
        postRecv(p.remote().qp(), 2, rmr, 1024, 1024);

        long h = mapChecked(dma, heap, DmaDirection.TO_DEVICE);
        postSend(p.local().qp(), dmaSend(11, WrOpcode.SEND, p.local(), h, 300, heap));
        assertEquals(WcStatus.SUCCESS, pollOne(p.local().sendCq()).status());
        dma.unmap(h, 300, DmaDirection.TO_DEVICE);

        long n = mapChecked(dma, nat, DmaDirection.TO_DEVICE);
        // a sub-range of the mapping: the DMA address plus an offset, the mapped buffer as the CPU memory
        postSend(p.local().qp(), dmaSend(12, WrOpcode.SEND, p.local(), n + 100, 600, nat));
        assertEquals(WcStatus.SUCCESS, pollOne(p.local().sendCq()).status());
        dma.unmap(n, 700, DmaDirection.TO_DEVICE);

        pollUntil(p.remote().recvCq(), 2);
        assertBytes(heapData, rmr.segment(), 0, "from the heap buffer");
        assertArrayEquals(java.util.Arrays.copyOfRange(natData, 100, 700), read(rmr.segment(), 1024, 600),
                "from the native buffer");
    }

    @Test
    void receiveIntoMappedBufferVisibleAfterUnmap() {
        QpPair p = rc();
        MemoryRegion lmr = regAll(p.local().pd(), 4096);
        Dma dmaB = ctxB.dma();
        MemorySegment nat = alloc(2048);
        MemorySegment heap = MemorySegment.ofArray(new byte[512]);
        long a = mapChecked(dmaB, nat, DmaDirection.FROM_DEVICE);
        long b = mapChecked(dmaB, heap, DmaDirection.FROM_DEVICE);
        postRecv(p.remote().qp(), dmaRecv(1, p.remote(), a, 2048, nat));
        postRecv(p.remote().qp(), dmaRecv(2, p.remote(), b, 512, heap));
        byte[] d1 = pattern(1500, 3);
        byte[] d2 = pattern(512, 4);
        write(lmr.segment(), 0, d1);
        write(lmr.segment(), 2048, d2);
        postSend(p.local().qp(), sendWr(1, WrOpcode.SEND, lmr, 0, 1500));
        postSend(p.local().qp(), sendWr(2, WrOpcode.SEND, lmr, 2048, 512));
        pollUntil(p.local().sendCq(), 2).forEach(wc -> assertEquals(WcStatus.SUCCESS, wc.status()));
        for (WorkCompletion wc : pollUntil(p.remote().recvCq(), 2)) {
            assertEquals(WcStatus.SUCCESS, wc.status());
        }
        dmaB.unmap(a, 2048, DmaDirection.FROM_DEVICE);
        dmaB.unmap(b, 512, DmaDirection.FROM_DEVICE);
        assertBytes(d1, nat, 0, "native receive buffer");
        assertBytes(d2, heap, 0, "heap receive buffer");
    }

    @Test
    void oneReceiveBufferReusedWithSyncs() {
        QpPair p = rc();
        MemoryRegion lmr = regAll(p.local().pd(), 4096);
        Dma dmaB = ctxB.dma();
        MemorySegment buf = alloc(256);
        long a = mapChecked(dmaB, buf, DmaDirection.FROM_DEVICE);
        for (int i = 0; i < 3; i++) {
            postRecv(p.remote().qp(), dmaRecv(i, p.remote(), a, 256, buf));
            byte[] d = pattern(200, 10 + i);
            write(lmr.segment(), 0, d);
            postSend(p.local().qp(), sendWr(i, WrOpcode.SEND, lmr, 0, 200));
            assertEquals(WcStatus.SUCCESS, pollOne(p.local().sendCq()).status());
            assertEquals(WcStatus.SUCCESS, pollOne(p.remote().recvCq()).status());
            dmaB.syncForCpu(a, 256, DmaDirection.FROM_DEVICE);
            assertBytes(d, buf, 0, "receive " + i + " after sync for CPU");
            dmaB.syncForDevice(a, 256, DmaDirection.FROM_DEVICE);
        }
        dmaB.unmap(a, 256, DmaDirection.FROM_DEVICE);
    }

    @Test
    void rdmaReadAndAtomicResultIntoMappedBuffers() {
        QpPair p = rc();
        MemoryRegion rmr = regAll(p.remote().pd(), 4096);
        byte[] remote = pattern(3000, 5);
        write(rmr.segment(), 0, remote);
        rmr.segment().set(ValueLayout.JAVA_LONG, 3072, 40);
        Dma dma = ctxA.dma();
        MemorySegment sink = alloc(3000);
        MemorySegment result = alloc(8);
        long s = mapChecked(dma, sink, DmaDirection.FROM_DEVICE);
        long r = mapChecked(dma, result, DmaDirection.FROM_DEVICE);
        postSend(p.local().qp(), dmaSend(1, WrOpcode.RDMA_READ, p.local(), s, 3000, sink)
                .remoteAddr(rmr.address()).rkey(rmr.rkey()));
        postSend(p.local().qp(), dmaSend(2, WrOpcode.ATOMIC_FETCH_AND_ADD, p.local(), r, 8, result)
                .remoteAddr(rmr.address() + 3072).rkey(rmr.rkey()).compareAdd(2));
        pollUntil(p.local().sendCq(), 2).forEach(wc -> assertEquals(WcStatus.SUCCESS, wc.status()));
        dma.unmap(s, 3000, DmaDirection.FROM_DEVICE);
        dma.unmap(r, 8, DmaDirection.FROM_DEVICE);
        assertBytes(remote, sink, 0, "RDMA READ sink");
        assertEquals(40, result.get(ValueLayout.JAVA_LONG, 0), "atomic original value");
        assertEquals(42, rmr.segment().get(ValueLayout.JAVA_LONG, 3072), "atomic target");
    }

    @Test
    void scatterGatherListAndInline() {
        QpPair p = rc();
        MemoryRegion rmr = regAll(p.remote().pd(), 4096);
        Dma dma = ctxA.dma();
        byte[] d0 = pattern(100, 6);
        byte[] d1 = pattern(50, 7);
        DmaSgList sg = new DmaSgList(2).buffer(0, MemorySegment.ofArray(d0.clone())).buffer(1, alloc(50));
        write(sg.buffer(1), 0, d1);
        assertEquals(2, dma.mapSg(sg, 2, DmaDirection.TO_DEVICE));
        SendWorkRequest wr = new SendWorkRequest().wrId(1).opcode(WrOpcode.RDMA_WRITE).sendFlags(SendFlags.SIGNALED)
                .remoteAddr(rmr.address()).rkey(rmr.rkey()).numSge(2);
        for (int i = 0; i < 2; i++) {
            wr.sge(i).dma(sg.dmaAddress(i), (int) sg.dmaLength(i), p.local().pd().localDmaLkey(), sg.buffer(i));
        }
        postSend(p.local().qp(), wr);
        assertEquals(WcStatus.SUCCESS, pollOne(p.local().sendCq()).status());
        dma.unmapSg(sg, 2, DmaDirection.TO_DEVICE);
        assertBytes(d0, rmr.segment(), 0, "first entry");
        assertBytes(d1, rmr.segment(), 100, "second entry");

        // inline: the CPU copies at post from CPU memory (Linux drivers read inline sg_list.addr as a
        // kernel virtual address), so no mapping is involved and the buffer may change right after
        MemorySegment small = alloc(32);
        byte[] d2 = pattern(32, 8);
        write(small, 0, d2);
        SendWorkRequest in = new SendWorkRequest().wrId(2).opcode(WrOpcode.RDMA_WRITE)
                .sendFlags(SendFlags.SIGNALED | SendFlags.INLINE).remoteAddr(rmr.address() + 200).rkey(rmr.rkey())
                .numSge(1);
        in.sge(0).inline(small);
        postSend(p.local().qp(), in);
        small.fill((byte) 0);
        assertEquals(WcStatus.SUCCESS, pollOne(p.local().sendCq()).status());
        assertBytes(d2, rmr.segment(), 200, "inline data");
    }

    @Test
    void coherentRingNeedsNoSync() {
        QpPair p = rc();
        MemoryRegion lmr = regAll(p.local().pd(), 4096);
        Dma dmaB = ctxB.dma();
        CoherentBuffer ring = dmaB.allocCoherent(4096);
        for (int i = 0; i < 4; i++) {
            postRecv(p.remote().qp(), dmaRecv(i, p.remote(), ring.dmaAddress() + i * 1024L, 1024, ring.cpu()));
        }
        for (int i = 0; i < 4; i++) {
            write(lmr.segment(), i * 1024L, pattern(1000, 20 + i));
            postSend(p.local().qp(), sendWr(i, WrOpcode.SEND, lmr, i * 1024L, 1000));
        }
        pollUntil(p.local().sendCq(), 4);
        pollUntil(p.remote().recvCq(), 4).forEach(wc -> assertEquals(WcStatus.SUCCESS, wc.status()));
        for (int i = 0; i < 4; i++) {
            assertBytes(pattern(1000, 20 + i), ring.cpu(), i * 1024L, "ring slot " + i + ", no sync");
        }
        dmaB.freeCoherent(ring);
    }
}
