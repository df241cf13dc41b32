// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.Parameter;
import org.junit.jupiter.params.ParameterizedClass;
import org.junit.jupiter.params.provider.EnumSource;
import org.rdma4j.common.ManualClock;
import org.rdma4j.dma.DmaChecker;
import org.rdma4j.dma.DmaConfig;
import org.rdma4j.dma.DmaMode;
import org.rdma4j.dma.DmaReport;
import org.rdma4j.testkit.ConformanceTestBase;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.testkit.QpConfig;
import org.rdma4j.testkit.QpPair;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.Dma;
import org.rdma4j.verbs.DmaDirection;
import org.rdma4j.verbs.DmaSgList;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * Memory the device may not use (issue 16, items 6 and 7), on every soft device kind: in process in each
 * DMA mode (the checker on, and virtual without it), cut at the MTU, and over RoCE in one JVM. Registration
 * (and a ULP's per-I/O mapping) refuses a closed
 * arena's segment, a confined arena's (the engine touches memory from its own threads) and one longer
 * than max_mr_size; an arena closed under a live registration makes every later access by the device an
 * error completion and a DMA checker report, never a touch of the freed memory or an exception, and the
 * other QPs carry on. The user's first-day scenario (confined and closed arenas, then several threads
 * over working memory) must end within a bounded time.
 */
@ParameterizedClass(name = "{0}")
@EnumSource(SoftMemoryLifetimeTest.Kind.class)
class SoftMemoryLifetimeTest extends ConformanceTestBase {
    /**
     * The device kinds. {@code VIRTUAL_UNCHECKED}: virtual DMA without the checker, as a device runs by
     * default, so that {@link org.rdma4j.verbs.Dma} takes its fast path (with the checker on every map goes
     * through the DMA space).
     */
    enum Kind { VIRTUAL, VIRTUAL_UNCHECKED, IOMMU, BOUNCE, SEGMENTED, ROCE }

    @Parameter
    Kind kind;

    @Override
    protected Fabric createFabric(ManualClock clock) {
        return switch (kind) {
            case VIRTUAL -> new SoftTestFabric(clock, false, DmaMode.VIRTUAL);
            case VIRTUAL_UNCHECKED -> new SoftTestFabric(clock, false, DmaConfig.virtual());
            case IOMMU -> new SoftTestFabric(clock, false, DmaMode.IOMMU);
            case BOUNCE -> new SoftTestFabric(clock, false, DmaMode.BOUNCE);
            case SEGMENTED -> new SoftTestFabric(clock, true, DmaMode.VIRTUAL);
            case ROCE -> new SoftRoceTestFabric(clock);
        };
    }

    private static final EnumSet<AccessFlag> ALL = EnumSet.allOf(AccessFlag.class);

    // ------------------------------------------------------------------ registration

    @Test
    void refusesSegmentOfClosedArena() {
        ProtectionDomain pd = track(ctxA.allocPd());
        Arena a = Arena.ofShared();
        MemorySegment seg = a.allocate(4096);
        a.close();
        VerbsException e = assertVerbsError(Errno.EINVAL, () -> pd.regMr(seg, ALL));
        assertTrue(e.getMessage().contains("arena is already closed"), e.getMessage());
    }

    @Test
    void refusesSegmentOfConfinedArenaSayingWhichArenasWork() {
        ProtectionDomain pd = track(ctxA.allocPd());
        try (Arena a = Arena.ofConfined()) {
            MemorySegment seg = a.allocate(4096);
            VerbsException e = assertVerbsError(Errno.EINVAL, () -> pd.regMr(seg, ALL));
            assertTrue(e.getMessage().contains("confined") && e.getMessage().contains("Arena.ofShared()"),
                    e.getMessage());
        }
    }

    @Test
    @SuppressWarnings("restricted") // a view of address space beyond the allocation, never accessed
    void refusesRegionLongerThanMaxMrSize() {
        ProtectionDomain pd = track(ctxA.allocPd());
        long max = ctxA.queryDevice().maxMrSize();
        MemorySegment base = alloc(4096);
        for (long len : new long[] {max + 1, 3L << 30}) {
            // a view of more address space than exists behind it: refused before anything reads it
            MemorySegment huge = MemorySegment.ofAddress(base.address()).reinterpret(len);
            VerbsException e = assertVerbsError(Errno.EINVAL, () -> pd.regMr(huge, ALL));
            assertTrue(e.getMessage().contains("max_mr_size"), e.getMessage());
        }
    }

    // ------------------------------------------------------------------ arena closed under a live MR

    /** A pair with a normal MR on each side, and a way to check it still works. */
    private record Rig(QpPair p, MemoryRegion lmr, MemoryRegion rmr) {
    }

    private Rig rig() {
        QpPair p = players().rc(QpConfig.rc().retryCnt(2).timeout(10));
        return new Rig(p, regAll(p.local().pd(), 4096), regAll(p.remote().pd(), 4096));
    }

    /** An MR over memory of an arena the test then closes. */
    private MemoryRegion doomed(ProtectionDomain pd) {
        Arena a = Arena.ofShared();
        MemoryRegion mr = reg(pd, a.allocate(4096, 64), AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE,
                AccessFlag.REMOTE_READ, AccessFlag.REMOTE_ATOMIC);
        a.close(); // succeeds: FFM cannot keep it open for the registration (ProtectionDomain.regMr)
        return mr;
    }

    @Test
    void sendFromClosedArenaFailsWithLocProtErr() {
        Rig r = rig();
        MemoryRegion gone = doomed(r.p().local().pd());
        postRecv(r.p().remote().qp(), 9, r.rmr(), 0, 256);
        postSend(r.p().local().qp(), sendWr(1, WrOpcode.SEND, gone, 0, 64));
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.LOC_PROT_ERR, 1);
        assertEquals(QpState.ERR, r.p().local().qp().state());
        assertReported(0);
        assertOthersWork();
    }

    @Test
    void writeIntoClosedArenaFailsWithRemAccessErr() {
        Rig r = rig();
        MemoryRegion gone = doomed(r.p().remote().pd());
        postSend(r.p().local().qp(), rdmaWr(1, WrOpcode.RDMA_WRITE, r.lmr(), gone, 64));
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.REM_ACCESS_ERR, 1);
        assertEquals(QpState.ERR, r.p().remote().qp().state(), "responder");
        assertReported(1);
        assertOthersWork();
    }

    @Test
    void sendIntoReceiveBufferOfClosedArenaFailsTheReceive() {
        Rig r = rig();
        MemoryRegion gone = doomed(r.p().remote().pd());
        postRecv(r.p().remote().qp(), 9, gone, 0, 256);
        postSend(r.p().local().qp(), sendWr(1, WrOpcode.SEND, r.lmr(), 0, 64));
        // the failed copy into the receive WQE is a malformed WQE (rxe send_data_in): class A
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.REM_OP_ERR, 1);
        assertWc(pollOne(r.p().remote().recvCq()), WcStatus.LOC_QP_OP_ERR, 9);
        assertReported(1);
        assertOthersWork();
    }

    @Test
    void readOfClosedArenaFailsWithRemAccessErr() {
        Rig r = rig();
        MemoryRegion gone = doomed(r.p().remote().pd());
        postSend(r.p().local().qp(), rdmaWr(1, WrOpcode.RDMA_READ, r.lmr(), gone, 64));
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.REM_ACCESS_ERR, 1);
        assertReported(1);
        assertOthersWork();
    }

    @Test
    void readIntoClosedArenaFailsWithLocProtErr() {
        Rig r = rig();
        MemoryRegion gone = doomed(r.p().local().pd());
        postSend(r.p().local().qp(), rdmaWr(1, WrOpcode.RDMA_READ, gone, r.rmr(), 64));
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.LOC_PROT_ERR, 1);
        assertReported(0);
        assertOthersWork();
    }

    @Test
    void atomicOnClosedArenaFailsWithRemAccessErr() {
        Rig r = rig();
        MemoryRegion gone = doomed(r.p().remote().pd());
        postSend(r.p().local().qp(), sendWr(1, WrOpcode.ATOMIC_FETCH_AND_ADD, r.lmr(), 0, 8)
                .remoteAddr(gone.address()).rkey(gone.rkey()).compareAdd(1));
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.REM_ACCESS_ERR, 1);
        assertReported(1);
        assertOthersWork();
    }

    /**
     * With the DMA checker on (in-process fixtures), device {@code dev} reported the unreachable memory; the
     * reports are cleared so that the fixture's own check passes.
     */
    private void assertReported(int dev) {
        if (!(fabric instanceof SoftDevicesFixture f)) {
            return;
        }
        DmaChecker c = f.softDevice(dev).dma().checker();
        if (c == null) {
            return;
        }
        List<DmaReport> rs = c.reports();
        assertTrue(rs.stream().anyMatch(x -> x.kind() == DmaReport.Kind.ACCESS_TO_UNREACHABLE_MEMORY),
                "device " + dev + " reported the access: " + rs);
        for (SoftDevice d : f.softDevices()) {
            if (d.dma().checker() != null) {
                d.dma().checker().clearReports();
            }
        }
    }

    /** A new pair over live memory still works, in both directions. */
    private void assertOthersWork() {
        QpPair p = players().rc(QpConfig.rc().sqPsn(0x4242));
        MemoryRegion a = regAll(p.local().pd(), 4096);
        MemoryRegion b = regAll(p.remote().pd(), 4096);
        write(a.segment(), 0, pattern(100, 3));
        postRecv(p.remote().qp(), 7, b, 0, 256);
        postSend(p.local().qp(), sendWr(8, WrOpcode.SEND, a, 0, 100));
        assertWc(pollOne(p.local().sendCq()), WcStatus.SUCCESS, 8);
        assertWc(pollOne(p.remote().recvCq()), WcStatus.SUCCESS, 7);
        assertBytes(pattern(100, 3), b.segment(), 0, "SEND on another QP");
        postSend(p.remote().qp(), rdmaWr(9, WrOpcode.RDMA_WRITE, b, a, 100));
        assertWc(pollOne(p.remote().sendCq()), WcStatus.SUCCESS, 9);
    }

    // ------------------------------------------------------------------ the first-day scenario

    @Test
    void confinedAndClosedArenasThenSeveralThreadsEndInBoundedTime() {
        assertTimeoutPreemptively(Duration.ofSeconds(120), () -> {
            ProtectionDomain pd = track(ctxA.allocPd());
            try (Arena confined = Arena.ofConfined()) {
                MemorySegment mine = confined.allocate(4096);
                assertVerbsError(Errno.EINVAL, () -> pd.regMr(mine, ALL));
                // a ULP's per-I/O mapping refuses it too, so no engine thread ever meets it
                assertMapRefused(mine, "confined");
            }
            Arena closed = Arena.ofShared();
            MemorySegment gone = closed.allocate(4096);
            closed.close();
            assertVerbsError(Errno.EINVAL, () -> pd.regMr(gone, ALL));
            assertMapRefused(gone, "closed");
            // then four threads, each with its own pair over shared memory, ping-pong SENDs: the posting thread
            // of one side is never the thread that polls the other, and in process the peer's responder runs
            // on the poster's thread
            int threads = 4;
            int rounds = 100;
            List<QpPair> pairs = new ArrayList<>();
            List<MemoryRegion[]> mrs = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                QpPair p = players().rc(QpConfig.rc().sqPsn(0x1000 * (t + 1)));
                pairs.add(p);
                mrs.add(new MemoryRegion[] {regAll(p.local().pd(), 4096), regAll(p.remote().pd(), 4096)});
            }
            List<CompletableFuture<Void>> done = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                QpPair p = pairs.get(t);
                MemoryRegion[] m = mrs.get(t);
                CompletableFuture<Void> f = new CompletableFuture<>();
                done.add(f);
                Thread.ofPlatform().daemon().name("lifetime-ping-" + t).start(() -> {
                    try {
                        pingPong(p, m[0], m[1], rounds);
                        f.complete(null);
                    } catch (Throwable e) {
                        f.completeExceptionally(e);
                    }
                });
            }
            for (CompletableFuture<Void> f : done) {
                f.get(100, TimeUnit.SECONDS);
            }
        });
    }

    /** {@link Dma#map} and {@link Dma#mapSg} (beside a good entry) throw, saying why. */
    private void assertMapRefused(MemorySegment seg, String why) {
        Dma dma = ctxA.dma();
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> dma.map(seg, DmaDirection.TO_DEVICE));
        assertTrue(e.getMessage().contains(why), e.getMessage());
        DmaSgList sg = new DmaSgList(2).buffer(0, alloc(64)).buffer(1, seg);
        e = assertThrows(IllegalArgumentException.class,
                () -> dma.mapSg(sg, 2, DmaDirection.FROM_DEVICE));
        assertTrue(e.getMessage().contains(why), e.getMessage());
    }

    /** {@code rounds} SENDs A->B, each echoed B->A, B's side served by a second thread. */
    private void pingPong(QpPair p, MemoryRegion a, MemoryRegion b, int rounds) throws Exception {
        CompletableFuture<Void> echo = new CompletableFuture<>();
        Thread server = Thread.ofPlatform().daemon().name(Thread.currentThread().getName() + "-echo").start(() -> {
            try {
                for (int i = 0; i < rounds; i++) {
                    spinFor(p.remote().recvCq(), WcStatus.SUCCESS);
                    postRecv(p.remote().qp(), 100 + i + 1, b, 0, 64);
                    postSend(p.remote().qp(), sendWr(i, WrOpcode.SEND, b, 0, 8));
                    spinFor(p.remote().sendCq(), WcStatus.SUCCESS);
                }
                echo.complete(null);
            } catch (Throwable e) {
                echo.completeExceptionally(e);
            }
        });
        postRecv(p.remote().qp(), 100, b, 0, 64);
        for (int i = 0; i < rounds; i++) {
            postRecv(p.local().qp(), 200 + i, a, 64, 64);
            a.segment().set(ValueLayout.JAVA_LONG, 0, i);
            SendWorkRequest wr = sendWr(i, WrOpcode.SEND, a, 0, 8);
            postSend(p.local().qp(), wr);
            spinFor(p.local().sendCq(), WcStatus.SUCCESS);
            spinFor(p.local().recvCq(), WcStatus.SUCCESS);
        }
        echo.get(60, TimeUnit.SECONDS);
        server.join(10_000);
    }

    /** Polls one completion with a bounded spin and checks its status. */
    private static void spinFor(org.rdma4j.verbs.CompletionQueue cq, WcStatus want) {
        WorkCompletion wc = new WorkCompletion();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!cq.poll(wc)) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("no completion within 30 s on " + cq);
            }
            Thread.onSpinWait();
        }
        if (wc.status() != want) {
            throw new AssertionError("completion " + wc + ", expected " + want);
        }
    }
}
