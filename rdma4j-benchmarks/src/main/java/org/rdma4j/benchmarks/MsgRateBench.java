// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.benchmarks;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.BenchmarkParams;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * Benchmark 3: message rate of 8-byte INLINE RC RDMA WRITEs. Each invocation posts {@link #BATCH} work
 * requests with one {@code postSend(wrs, n)} call; only every {@code signalEvery}-th WR is SIGNALED and
 * those completions are reaped (opportunistically after each batch, by spinning when the send queue
 * would overflow). The score is messages per second. Baseline {@link #copy8}: {@code MemorySegment.copy}
 * of 8 bytes, {@link #BATCH} times per invocation into distinct slots (the Java floor for moving one
 * 8-byte message). Target: {@link #write8} &gt;= 20 M msg/s.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class MsgRateBench {
    static final int BATCH = 32;
    static final int MSG = 8;
    static final int SQ_DEPTH = 1024;

    /** Every how many WRs one is signaled. */
    @Param({"64"})
    public int signalEvery;

    private Arena arena;
    private MemorySegment src;
    private MemorySegment dst;
    private RcPair pair;
    private final SendWorkRequest[] wrs = new SendWorkRequest[BATCH];
    private final WorkCompletion[] wcs = new WorkCompletion[16];
    private long posted;
    private long reaped;
    private boolean inline;

    @Setup
    public void setup(BenchmarkParams params) {
        arena = Arena.ofShared();
        src = arena.allocate(4096, 4096);
        dst = arena.allocate(4096, 4096);
        src.fill((byte) 1);
        for (int i = 0; i < wcs.length; i++) {
            wcs[i] = new WorkCompletion();
        }
        if (params.getBenchmark().endsWith(".write8")) {
            connect();
        }
    }

    private void connect() {
        pair = new RcPair(SQ_DEPTH, new QpCapabilities(SQ_DEPTH, 16, 1, 1, 64));
        MemoryRegion local = pair.a.reg(src);
        MemoryRegion remote = pair.b.reg(dst);
        inline = pair.a.qp.cap().maxInlineData() >= MSG;
        if (!inline) {
            System.err.println("WARNING: QP grants " + pair.a.qp.cap().maxInlineData()
                    + " inline bytes; posting 8-byte WRITEs without INLINE");
        }
        for (int i = 0; i < BATCH; i++) {
            wrs[i] = new SendWorkRequest(1).opcode(WrOpcode.RDMA_WRITE)
                    .singleSge(local.address() + (long) i * MSG, MSG, local.lkey())
                    .remoteAddr(remote.address() + (long) i * MSG).rkey(remote.rkey());
        }
    }

    @TearDown
    public void tearDown() {
        if (pair != null) {
            // wait for every signaled WRITE still outstanding before destroying the QPs
            WorkCompletion wc = wcs[0];
            while (posted - reaped >= signalEvery) {
                RcPair.pollOne(pair.a.sendCq, wc);
                reaped += signalEvery;
            }
            pair.close();
            if (dst.asSlice(0, (long) BATCH * MSG).mismatch(src.asSlice(0, (long) BATCH * MSG)) != -1) {
                throw new IllegalStateException("RDMA WRITEs did not deliver the data");
            }
        }
        arena.close();
    }

    /** 32 x 8-byte INLINE RDMA WRITE in one postSend; score = messages/s. */
    @Benchmark
    @OperationsPerInvocation(BATCH)
    public void write8() {
        int base = inline ? SendFlags.INLINE : 0;
        int every = signalEvery;
        long p = posted;
        SendWorkRequest[] w = wrs;
        for (int i = 0; i < BATCH; i++) {
            w[i].sendFlags(++p % every == 0 ? base | SendFlags.SIGNALED : base);
        }
        // keep the send queue from overflowing: unsignaled WRs are freed by the next signaled completion
        while (p - reaped > SQ_DEPTH) {
            RcPair.pollOne(pair.a.sendCq, wcs[0]);
            reaped += every;
        }
        int n = pair.a.qp.postSend(w, BATCH);
        if (n != BATCH) {
            throw new IllegalStateException("postSend posted " + n + "/" + BATCH + ": " + w[n].postError());
        }
        posted = p;
        if (p - reaped >= every) {
            int got = pair.a.sendCq.poll(wcs, wcs.length);
            for (int i = 0; i < got; i++) {
                RcPair.check(wcs[i]);
            }
            reaped += (long) got * every;
        }
    }

    /** Baseline: 32 x MemorySegment.copy of 8 bytes into distinct slots; score = copies/s. */
    @Benchmark
    @OperationsPerInvocation(BATCH)
    public void copy8() {
        MemorySegment s = src;
        MemorySegment d = dst;
        for (int i = 0; i < BATCH; i++) {
            MemorySegment.copy(s, (long) i * MSG, d, (long) i * MSG, MSG);
        }
    }
}
