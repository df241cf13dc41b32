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
 * Benchmark 1: one signaled RC RDMA WRITE of {@code size} bytes from soft0 to soft1, then spin on its
 * completion; one operation = post + completion. Baseline {@link #copy}: {@code MemorySegment.copy} of
 * the same size between two 4 KiB-aligned {@code Arena.ofShared()} segments (as peers.md 1a).
 * Bandwidth = size / (ns/op); ratio = copy ns/op / write ns/op. Target: ratio &gt;= 0.9.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class WriteBench {
    @Param({"65536", "1048576"})
    public int size;

    private Arena arena;
    private MemorySegment src;
    private MemorySegment dst;
    private RcPair pair;
    private final SendWorkRequest wr = new SendWorkRequest(1);
    private final WorkCompletion wc = new WorkCompletion();

    @Setup
    public void setup(BenchmarkParams params) {
        arena = Arena.ofShared();
        src = arena.allocate(size, 4096);
        dst = arena.allocate(size, 4096);
        src.fill((byte) 1);
        dst.fill((byte) 2);
        if (params.getBenchmark().endsWith(".write")) {
            connect(); // only the WRITE benchmark needs devices; the baseline runs without them
        }
    }

    private void connect() {
        pair = new RcPair(256, new QpCapabilities(128, 128, 1, 1, 0));
        MemoryRegion local = pair.a.reg(src);
        MemoryRegion remote = pair.b.reg(dst);
        wr.clear().wrId(1).opcode(WrOpcode.RDMA_WRITE).sendFlags(SendFlags.SIGNALED)
                .singleSge(local.address(), size, local.lkey())
                .remoteAddr(remote.address()).rkey(remote.rkey());
        // one checked round before timing: the data must arrive
        write();
        if (dst.mismatch(src) != -1) {
            throw new IllegalStateException("RDMA WRITE did not deliver the data");
        }
    }

    @TearDown
    public void tearDown() {
        if (pair != null) {
            pair.close();
        }
        arena.close();
    }

    /** RC RDMA WRITE, signaled, polled to completion. */
    @Benchmark
    public void write() {
        if (!pair.a.qp.postSend(wr)) {
            throw new IllegalStateException("postSend refused: " + wr.postError());
        }
        RcPair.pollOne(pair.a.sendCq, wc);
    }

    /** Baseline: off-heap to off-heap copy of the same size. */
    @Benchmark
    public void copy() {
        MemorySegment.copy(src, 0, dst, 0, size);
    }
}
