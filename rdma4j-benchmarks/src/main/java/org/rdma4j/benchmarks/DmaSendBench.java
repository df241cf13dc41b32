// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.benchmarks;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.CompilerControl;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.BenchmarkParams;
import org.rdma4j.dma.DmaConfig;
import org.rdma4j.soft.SoftDevice;
import org.rdma4j.soft.SoftFabric;
import org.rdma4j.verbs.CoherentBuffer;
import org.rdma4j.verbs.Dma;
import org.rdma4j.verbs.DmaDirection;
import org.rdma4j.verbs.DmaSgList;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.verbs.spi.DmaOps;

/**
 * The seed's performance question: what does per-packet DMA mapping cost an IPoIB-like send path on a
 * CPU-copy device? Every operation is one packet: map the buffer, build the work request, post an RC
 * SEND on the soft device, poll its completion, unmap (and, on the receiver, poll and repost the
 * receive: the same constant in every variant). Variants, one benchmark method each:
 * <ul>
 * <li>{@code a_direct}: no mapping at all, the buffer's address goes straight into the SGE (the
 *     seed's optional {@code void *data} field);
 * <li>{@code b_branch}: {@link Dma} on a virtual device, Linux's final {@code ib_uses_virt_dma()} form
 *     (a final boolean, no indirect call);
 * <li>{@code c_mono}, {@code d_bi}, {@code e_mega}: the 2006 {@code ib_dma_mapping_ops} form, a call
 *     through the {@link DmaOps} interface whose implementations all return the address, with one,
 *     two or three implementation classes rotating at the call site;
 * <li>{@code f_iommu}: {@link Dma} on a device behind an IOMMU (page-table map, translation);
 * <li>{@code g_bounce}: {@link Dma} on a device that bounces everything (swiotlb=force; map copies).
 * </ul>
 * The {@code *Map} twins do only the sender's per-packet mapping work (map, check, build the WR,
 * unmap) without posting, which isolates the few nanoseconds the question is about from the
 * ~hundreds the transport takes. Goal: {@code b_branch} within 0.5 ns/op of {@code a_direct}.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class DmaSendBench {
    private static final int RECVS = 16;

    /** Packet size in bytes. */
    @Param({"64", "1500", "65536"})
    public int size;

    private SoftFabric fabric;
    private RcPair pair;
    private Arena arena;
    private MemorySegment buf;
    private Dma dma;
    private DmaOps[] ring;
    private int ringIdx;
    private int lkey;
    private final SendWorkRequest wr = new SendWorkRequest(1);
    private final RecvWorkRequest[] recvs = new RecvWorkRequest[RECVS];
    private final WorkCompletion wc = new WorkCompletion();
    private long wrId;
    private boolean posting;

    /** Virtual mapping through an interface, as ipath's 2006 ib_dma_mapping_ops did; three copies to vary the class. */
    static final class VirtOpsA extends VirtOps {
    }

    /** A second class with the same behaviour. */
    static final class VirtOpsB extends VirtOps {
    }

    /** A third class with the same behaviour. */
    static final class VirtOpsC extends VirtOps {
    }

    /** The behaviour: the DMA address is the buffer's address. */
    abstract static class VirtOps implements DmaOps {
        @Override
        public long map(MemorySegment cpu, DmaDirection dir) {
            return cpu.address();
        }

        @Override
        public void unmap(long dmaAddress, long size, DmaDirection dir) {
        }

        @Override
        public boolean mappingError(long dmaAddress) {
            return dmaAddress == Dma.MAPPING_ERROR;
        }

        @Override
        public int mapSg(DmaSgList sg, int nents, DmaDirection dir) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void unmapSg(DmaSgList sg, int nents, DmaDirection dir) {
        }

        @Override
        public void syncForCpu(long dmaAddress, long size, DmaDirection dir) {
        }

        @Override
        public void syncForDevice(long dmaAddress, long size, DmaDirection dir) {
        }

        @Override
        public CoherentBuffer allocCoherent(long size) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void freeCoherent(CoherentBuffer buffer) {
        }
    }

    @Setup
    public void setup(BenchmarkParams params) {
        String name = params.getBenchmark();
        String variant = name.substring(name.lastIndexOf('.') + 1);
        posting = !variant.endsWith("Map");
        DmaConfig senderDma = variant.startsWith("f_") ? DmaConfig.iommu()
                : variant.startsWith("g_") ? DmaConfig.bounce().withForceBounce(true) : DmaConfig.virtual();
        fabric = new SoftFabric();
        SoftDevice a = fabric.addDevice("dmaA", senderDma);
        SoftDevice b = fabric.addDevice("dmaB", DmaConfig.virtual()); // the receiver is the same in every variant
        pair = new RcPair(a, b, 64, new QpCapabilities(16, RECVS, 1, 1, 0));
        arena = Arena.ofShared();
        buf = arena.allocate(size, 64);
        buf.fill((byte) 7);
        dma = pair.a.ctx.dma();
        lkey = pair.a.pd.localDmaLkey();
        DmaOps x = new VirtOpsA();
        ring = variant.startsWith("c_") ? new DmaOps[] {x, x, x}
                : variant.startsWith("d_") ? new DmaOps[] {x, new VirtOpsB(), x}
                : new DmaOps[] {x, new VirtOpsB(), new VirtOpsC()};
        wr.opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED).numSge(1);
        for (int i = 0; i < RECVS; i++) {
            MemoryRegion mr = pair.b.reg(arena.allocate(size, 64));
            recvs[i] = new RecvWorkRequest(1).wrId(i).singleSge(mr.address(), size, mr.lkey());
            if (!pair.b.qp.postRecv(recvs[i])) {
                throw new IllegalStateException("postRecv: " + recvs[i].postError());
            }
        }
    }

    @TearDown
    public void tearDown() {
        pair.close();
        fabric.close();
        arena.close();
    }

    /**
     * Builds the WR and, unless a *Map variant, posts it and reaps both sides. Forced inline, like the
     * other helpers, so that no variant pays a call the others do not (C2 otherwise declined to inline
     * some of them as "too large", which showed up as a few ns).
     */
    @CompilerControl(CompilerControl.Mode.INLINE)
    private void send(long addr) {
        wr.wrId(++wrId).sge(0).dma(addr, size, lkey, buf);
        if (posting) {
            postAndReap();
        }
    }

    /** The transport part, the same in every variant. */
    private void postAndReap() {
        if (!pair.a.qp.postSend(wr)) {
            throw new IllegalStateException("postSend: " + wr.postError());
        }
        RcPair.pollOne(pair.a.sendCq, wc);
        RcPair.pollOne(pair.b.recvCq, wc);
        RecvWorkRequest r = recvs[(int) wc.wrId()];
        if (!pair.b.qp.postRecv(r)) {
            throw new IllegalStateException("postRecv: " + r.postError());
        }
    }

    @CompilerControl(CompilerControl.Mode.INLINE)
    private DmaOps nextOps() {
        int i = ringIdx + 1;
        if (i == 3) {
            i = 0;
        }
        ringIdx = i;
        return ring[i];
    }

    @CompilerControl(CompilerControl.Mode.INLINE)
    private void viaDma(Dma d) {
        MemorySegment b = buf;
        long a = d.map(b, DmaDirection.TO_DEVICE);
        if (d.mappingError(a)) {
            throw new IllegalStateException("mapping error");
        }
        send(a);
        d.unmap(a, size, DmaDirection.TO_DEVICE);
    }

    @CompilerControl(CompilerControl.Mode.INLINE)
    private void viaOps(DmaOps o) {
        MemorySegment b = buf;
        long a = o.map(b, DmaDirection.TO_DEVICE);
        if (o.mappingError(a)) {
            throw new IllegalStateException("mapping error");
        }
        send(a);
        o.unmap(a, size, DmaDirection.TO_DEVICE);
    }

    /** (a) The virtual address straight into the SGE: no mapping call. */
    @Benchmark
    public void a_direct() {
        send(buf.address());
    }

    /** (b) Linux's final form on a virtual device: one predictable branch. */
    @Benchmark
    public void b_branch() {
        viaDma(dma);
    }

    /** (c) Interface call, one implementation class at the call site. */
    @Benchmark
    public void c_mono() {
        viaOps(nextOps());
    }

    /** (d) Interface call, two implementation classes. */
    @Benchmark
    public void d_bi() {
        viaOps(nextOps());
    }

    /** (e) Interface call, three implementation classes. */
    @Benchmark
    public void e_mega() {
        viaOps(nextOps());
    }

    /** (f) A device behind an IOMMU. */
    @Benchmark
    public void f_iommu() {
        viaDma(dma);
    }

    /** (g) A device that bounces every buffer. */
    @Benchmark
    public void g_bounce() {
        viaDma(dma);
    }

    /** (a) without posting: building the WR only. */
    @Benchmark
    public void a_directMap() {
        a_direct();
    }

    /** (b) without posting. */
    @Benchmark
    public void b_branchMap() {
        b_branch();
    }

    /** (c) without posting. */
    @Benchmark
    public void c_monoMap() {
        c_mono();
    }

    /** (d) without posting. */
    @Benchmark
    public void d_biMap() {
        d_bi();
    }

    /** (e) without posting. */
    @Benchmark
    public void e_megaMap() {
        e_mega();
    }

    /** (f) without posting: IOMMU map and unmap. */
    @Benchmark
    public void f_iommuMap() {
        f_iommu();
    }

    /** (g) without posting: bounce map (a copy) and unmap. */
    @Benchmark
    public void g_bounceMap() {
        g_bounce();
    }
}
