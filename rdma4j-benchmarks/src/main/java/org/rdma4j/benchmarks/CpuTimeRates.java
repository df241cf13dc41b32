// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.benchmarks;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.EnumSet;
import java.util.Locale;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.Verbs;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * The single-thread targets of issue 15 measured in <em>CPU time of the measuring thread</em> instead of wall
 * time: on a loaded 2-vCPU machine the scheduler preempts a JMH thread for whole quanta and wall-time figures
 * swing by 100 %, while the CPU time a thread spends per operation stays put (it still suffers the cache
 * pollution of whoever shares the core). For A/B comparisons of two builds while others use the machine; the
 * quotable figures are JMH's on a quiet machine. Each measure runs the same loop as its JMH benchmark
 * ({@link MsgRateBench#write8}, {@link ManyQpBench#writeRoundRobin}, {@link WriteBench#write} and its copy
 * baseline), several rounds interleaved, and prints the median ns of CPU per operation.
 *
 * <pre>java -cp benchmarks.jar org.rdma4j.benchmarks.CpuTimeRates [rounds] [seconds-per-measure]</pre>
 */
public final class CpuTimeRates {
    private static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();

    private CpuTimeRates() {
    }

    /** One measured loop: {@link #run} does {@code n} operations. */
    private interface Loop {
        void run(long n);
    }

    /**
     * Runs the measures.
     *
     * @param args rounds (default 5) and seconds per measure and round (default 1)
     */
    public static void main(String[] args) {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 5;
        double secs = args.length > 1 ? Double.parseDouble(args[1]) : 1;
        String only = args.length > 2 ? args[2] : "";
        try (Arena arena = Arena.ofShared()) {
            String[] names = {"write8", "manyQp1", "manyQp1000", "write64k", "copy64k", "write1m", "copy1m"};
            Loop[] loops = new Loop[names.length];
            double[][] ns = new double[names.length][rounds];
            for (int i = 0; i < names.length; i++) {
                if (only.isEmpty() || names[i].matches(only)) {
                    loops[i] = make(names[i], arena);
                }
            }
            // the objects made by the set-up moved to where a long-running process has them (a collection copies
            // each QP's objects together): ManyQpBench at 1,000 QPs measured 250 or 760 ns per message in the same
            // build depending on whether a collection had happened before the measurement
            System.gc();
            for (int r = 0; r < rounds; r++) {
                for (int i = 0; i < names.length; i++) {
                    if (loops[i] != null) {
                        ns[i][r] = measure(loops[i], secs);
                    }
                }
            }
            System.out.println("load: " + loadAverage());
            for (int i = 0; i < names.length; i++) {
                if (loops[i] != null) {
                    double[] v = ns[i].clone();
                    java.util.Arrays.sort(v);
                    System.out.printf(Locale.ROOT, "%-12s %12.2f ns CPU/op (median of %d; min %.2f max %.2f)%n", names[i],
                            v[v.length / 2], v.length, v[0], v[v.length - 1]);
                }
            }
        }
    }

    private static String loadAverage() {
        return String.format(Locale.ROOT, "%.2f", ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage());
    }

    /** Warms up, then measures ns of this thread's CPU per operation over about {@code secs} seconds. */
    private static double measure(Loop loop, double secs) {
        long chunk = 1_000;
        long t0 = MX.getCurrentThreadCpuTime();
        loop.run(chunk);
        while (MX.getCurrentThreadCpuTime() - t0 < 20_000_000L) {
            chunk *= 2;
            loop.run(chunk);
        }
        long budget = (long) (secs * 1e9);
        long ops = 0;
        long start = MX.getCurrentThreadCpuTime();
        long used;
        do {
            loop.run(chunk);
            ops += chunk;
            used = MX.getCurrentThreadCpuTime() - start;
        } while (used < budget);
        return (double) used / ops;
    }

    private static Loop make(String name, Arena arena) {
        return switch (name) {
            case "write8" -> write8(arena);
            case "manyQp1" -> manyQp(arena, 1);
            case "manyQp1000" -> manyQp(arena, 1000);
            case "write64k" -> write(arena, 65536);
            case "write1m" -> write(arena, 1 << 20);
            case "copy64k" -> copy(arena, 65536);
            case "copy1m" -> copy(arena, 1 << 20);
            default -> throw new IllegalArgumentException(name);
        };
    }

    /** {@link MsgRateBench#write8}: one op = one 8-byte INLINE WRITE (posted 32 per call). */
    private static Loop write8(Arena arena) {
        MemorySegment src = arena.allocate(4096, 4096);
        MemorySegment dst = arena.allocate(4096, 4096);
        RcPair pair = new RcPair(MsgRateBench.SQ_DEPTH, new QpCapabilities(MsgRateBench.SQ_DEPTH, 16, 1, 1, 64));
        MemoryRegion local = pair.a.reg(src);
        MemoryRegion remote = pair.b.reg(dst);
        int batch = MsgRateBench.BATCH;
        SendWorkRequest[] wrs = new SendWorkRequest[batch];
        for (int i = 0; i < batch; i++) {
            wrs[i] = new SendWorkRequest(1).opcode(WrOpcode.RDMA_WRITE)
                    .singleSge(local.address() + (long) i * 8, 8, local.lkey())
                    .remoteAddr(remote.address() + (long) i * 8).rkey(remote.rkey());
        }
        WorkCompletion[] wcs = new WorkCompletion[16];
        for (int i = 0; i < wcs.length; i++) {
            wcs[i] = new WorkCompletion();
        }
        int every = 64;
        long[] state = new long[2]; // posted, reaped
        return n -> {
            for (long k = 0; k < n; k += batch) {
                long p = state[0];
                for (int i = 0; i < batch; i++) {
                    wrs[i].sendFlags(++p % every == 0 ? SendFlags.INLINE | SendFlags.SIGNALED : SendFlags.INLINE);
                }
                while (p - state[1] > MsgRateBench.SQ_DEPTH) {
                    RcPair.pollOne(pair.a.sendCq, wcs[0]);
                    state[1] += every;
                }
                if (pair.a.qp.postSend(wrs, batch) != batch) {
                    throw new IllegalStateException("postSend: " + wrs[0].postError());
                }
                state[0] = p;
                if (p - state[1] >= every) {
                    int got = pair.a.sendCq.poll(wcs, wcs.length);
                    for (int i = 0; i < got; i++) {
                        RcPair.check(wcs[i]);
                    }
                    state[1] += (long) got * every;
                }
            }
        };
    }

    /** {@link ManyQpBench#writeRoundRobin}: one op = one 8-byte INLINE WRITE, 32 per QP visit. */
    private static Loop manyQp(Arena arena, int qps) {
        MemorySegment src = arena.allocate(4096, 4096);
        MemorySegment dst = arena.allocate(4096, 4096);
        Context ctxA = Verbs.device(System.getProperty("rdma4j.bench.devA", "soft0")).open();
        Context ctxB = Verbs.device(System.getProperty("rdma4j.bench.devB", "soft1")).open();
        ProtectionDomain pdA = ctxA.allocPd();
        ProtectionDomain pdB = ctxB.allocPd();
        int cqe = Math.min(32_767, Math.max(1024, 4 * qps));
        CompletionQueue sendCq = ctxA.createCq(cqe, null, 0);
        CompletionQueue otherCq = ctxB.createCq(cqe, null, 0);
        var access = EnumSet.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE);
        MemoryRegion mrA = pdA.regMr(src, access);
        MemoryRegion mrB = pdB.regMr(dst, access);
        QueuePair[] qpA = new QueuePair[qps];
        QueuePair[] qpB = new QueuePair[qps];
        QpCapabilities cap = new QpCapabilities(ManyQpBench.SQ_DEPTH, 1, 1, 1, 64);
        for (int i = 0; i < qps; i++) {
            qpA[i] = pdA.createQp(new QpInitAttributes().type(QpType.RC).sendCq(sendCq).recvCq(sendCq).cap(cap));
            qpB[i] = pdB.createQp(new QpInitAttributes().type(QpType.RC).sendCq(otherCq).recvCq(otherCq).cap(cap));
        }
        for (int i = 0; i < qps; i++) {
            connect(qpA[i], qpB[i].qpNum(), ctxB);
            connect(qpB[i], qpA[i].qpNum(), ctxA);
        }
        int batch = ManyQpBench.BATCH;
        SendWorkRequest[] w = new SendWorkRequest[batch];
        for (int i = 0; i < batch; i++) {
            w[i] = new SendWorkRequest(1).opcode(WrOpcode.RDMA_WRITE)
                    .singleSge(mrA.address() + (long) i * 8, 8, mrA.lkey())
                    .remoteAddr(mrB.address() + (long) i * 8).rkey(mrB.rkey());
        }
        WorkCompletion[] wcs = new WorkCompletion[64];
        for (int i = 0; i < wcs.length; i++) {
            wcs[i] = new WorkCompletion();
        }
        long[] st = new long[4]; // next, visits, signaled, reaped
        return n -> {
            for (long k = 0; k < n; k += batch) {
                int q = (int) st[0];
                st[0] = q + 1 == qps ? 0 : q + 1;
                long v = st[1]++;
                boolean sig = ((v / qps) & 1) == 1;
                for (int i = 0; i < batch - 1; i++) {
                    w[i].sendFlags(SendFlags.INLINE);
                }
                w[batch - 1].sendFlags(sig ? SendFlags.INLINE | SendFlags.SIGNALED : SendFlags.INLINE);
                while (st[2] - st[3] >= qps) {
                    int got;
                    while ((got = sendCq.poll(wcs, wcs.length)) == 0) {
                        // spin: the completion is being made on this thread's next poll
                    }
                    st[3] += got;
                }
                if (qpA[q].postSend(w, batch) != batch) {
                    throw new IllegalStateException("postSend: " + w[0].postError());
                }
                if (sig) {
                    st[2]++;
                }
                st[3] += sendCq.poll(wcs, wcs.length);
            }
        };
    }

    private static void connect(QueuePair qp, int peer, Context peerCtx) {
        var access = EnumSet.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE);
        qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1).accessFlags(access));
        qp.modify(new QpAttributes().state(QpState.RTR).pathMtu(Mtu.MTU_1024).destQpNum(peer).rqPsn(0)
                .maxDestRdAtomic(1).minRnrTimer(12).av(new AhAttributes().dgid(peerCtx.queryGid(1, 0)).sgidIndex(0)));
        qp.modify(new QpAttributes().state(QpState.RTS).sqPsn(0).timeout(14).retryCnt(7).rnrRetry(7).maxRdAtomic(1));
    }

    /** {@link WriteBench#write}: one op = one signaled WRITE of {@code size} bytes, polled. */
    private static Loop write(Arena arena, int size) {
        MemorySegment src = arena.allocate(size, 4096);
        MemorySegment dst = arena.allocate(size, 4096);
        src.fill((byte) 1);
        RcPair pair = new RcPair(256, new QpCapabilities(128, 128, 1, 1, 0));
        MemoryRegion local = pair.a.reg(src);
        MemoryRegion remote = pair.b.reg(dst);
        SendWorkRequest wr = new SendWorkRequest(1).wrId(1).opcode(WrOpcode.RDMA_WRITE).sendFlags(SendFlags.SIGNALED)
                .singleSge(local.address(), size, local.lkey()).remoteAddr(remote.address()).rkey(remote.rkey());
        WorkCompletion wc = new WorkCompletion();
        return n -> {
            for (long k = 0; k < n; k++) {
                if (!pair.a.qp.postSend(wr)) {
                    throw new IllegalStateException("postSend: " + wr.postError());
                }
                RcPair.pollOne(pair.a.sendCq, wc);
            }
        };
    }

    /** {@link WriteBench#copy}: the baseline. */
    private static Loop copy(Arena arena, int size) {
        MemorySegment src = arena.allocate(size, 4096);
        MemorySegment dst = arena.allocate(size, 4096);
        src.fill((byte) 1);
        return n -> {
            for (long k = 0; k < n; k++) {
                MemorySegment.copy(src, 0, dst, 0, size);
            }
        };
    }
}
