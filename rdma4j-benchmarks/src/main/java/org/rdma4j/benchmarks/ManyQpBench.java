// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.benchmarks;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
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
 * Many RC QPs active at once: {@code qps} connected pairs between soft0 and soft1, and one thread posting
 * {@link #BATCH} 8-byte INLINE RDMA WRITEs to each QP in turn (round-robin), every send completion on one
 * shared CQ, as a server with many connections and one completion queue. The rate with {@code qps=1000}
 * over the rate with {@code qps=1} of the same run is what many QPs cost (cache footprint, per-QP state);
 * the target is at least 0.8. {@link QpMemory} reports the memory each QP pair takes.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class ManyQpBench {
    static final int BATCH = 32;
    static final int MSG = 8;
    /** Every second visit's last WR is signaled: at most 2 x BATCH WRs outstanding per QP. */
    static final int SQ_DEPTH = 4 * BATCH;

    /** Active QP pairs. */
    @Param({"1", "1000"})
    public int qps;

    private Arena arena;
    private Context ctxA;
    private Context ctxB;
    private ProtectionDomain pdA;
    private ProtectionDomain pdB;
    private CompletionQueue sendCq;
    private CompletionQueue otherCq;
    private QueuePair[] qpA;
    private QueuePair[] qpB;
    private MemoryRegion mrA;
    private MemoryRegion mrB;
    private final SendWorkRequest[] wrs = new SendWorkRequest[BATCH];
    private final WorkCompletion[] wcs = new WorkCompletion[64];
    private int next;
    private long visits;
    private long signaled;
    private long reaped;

    @Setup
    public void setup() {
        arena = Arena.ofShared();
        MemorySegment src = arena.allocate(4096, 4096);
        MemorySegment dst = arena.allocate(4096, 4096);
        src.fill((byte) 7);
        ctxA = Verbs.device(System.getProperty("rdma4j.bench.devA", "soft0")).open();
        ctxB = Verbs.device(System.getProperty("rdma4j.bench.devB", "soft1")).open();
        pdA = ctxA.allocPd();
        pdB = ctxB.allocPd();
        int cqe = Math.min(32_767, Math.max(1024, 4 * qps));
        sendCq = ctxA.createCq(cqe, null, 0);
        otherCq = ctxB.createCq(cqe, null, 0);
        var access = EnumSet.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE);
        mrA = pdA.regMr(src, access);
        mrB = pdB.regMr(dst, access);
        qpA = new QueuePair[qps];
        qpB = new QueuePair[qps];
        QpCapabilities cap = new QpCapabilities(SQ_DEPTH, 1, 1, 1, 64);
        for (int i = 0; i < qps; i++) {
            qpA[i] = pdA.createQp(new QpInitAttributes().type(QpType.RC).sendCq(sendCq).recvCq(sendCq).cap(cap));
            qpB[i] = pdB.createQp(new QpInitAttributes().type(QpType.RC).sendCq(otherCq).recvCq(otherCq).cap(cap));
        }
        for (int i = 0; i < qps; i++) {
            connect(qpA[i], qpB[i].qpNum(), ctxB);
            connect(qpB[i], qpA[i].qpNum(), ctxA);
        }
        for (int i = 0; i < BATCH; i++) {
            wrs[i] = new SendWorkRequest(1).opcode(WrOpcode.RDMA_WRITE)
                    .singleSge(mrA.address() + (long) i * MSG, MSG, mrA.lkey())
                    .remoteAddr(mrB.address() + (long) i * MSG).rkey(mrB.rkey());
        }
        for (int i = 0; i < wcs.length; i++) {
            wcs[i] = new WorkCompletion();
        }
        // measure where a long-running server has its QPs: after a collection has moved each QP's objects
        // together (the same build measured 250 or 760 ns per message at 1,000 QPs depending on whether one had
        // happened before the measurement; CpuTimeRates collects here too)
        System.gc();
    }

    private static void connect(QueuePair qp, int peer, Context peerCtx) {
        var access = EnumSet.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE);
        qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1).accessFlags(access));
        qp.modify(new QpAttributes().state(QpState.RTR).pathMtu(Mtu.MTU_1024).destQpNum(peer).rqPsn(0)
                .maxDestRdAtomic(1).minRnrTimer(12).av(new AhAttributes().dgid(peerCtx.queryGid(1, 0)).sgidIndex(0)));
        qp.modify(new QpAttributes().state(QpState.RTS).sqPsn(0).timeout(14).retryCnt(7).rnrRetry(7).maxRdAtomic(1));
    }

    @TearDown
    public void tearDown() {
        // every QP's last signaled WRITE must complete before its QP goes
        while (reaped < signaled) {
            reap(true);
        }
        for (int i = 0; i < qps; i++) {
            qpA[i].close();
            qpB[i].close();
        }
        mrA.close();
        mrB.close();
        sendCq.close();
        otherCq.close();
        pdA.close();
        pdB.close();
        ctxA.close();
        ctxB.close();
        arena.close();
    }

    private void reap(boolean wait) {
        int spins = 0;
        do {
            int n = sendCq.poll(wcs, wcs.length);
            for (int i = 0; i < n; i++) {
                RcPair.check(wcs[i]);
            }
            reaped += n;
            if (n > 0 || !wait) {
                return;
            }
        } while (++spins < 1 << 30);
        throw new IllegalStateException("no completion");
    }

    /** BATCH INLINE WRITEs on the next QP of the round; score = messages/s. */
    @Benchmark
    @OperationsPerInvocation(BATCH)
    public void writeRoundRobin() {
        int q = next;
        next = q + 1 == qps ? 0 : q + 1;
        long v = visits++;
        // the visit's last WR is signaled on every second visit of a QP: the completion frees 2 x BATCH slots
        boolean sig = ((v / qps) & 1) == 1;
        SendWorkRequest[] w = wrs;
        for (int i = 0; i < BATCH - 1; i++) {
            w[i].sendFlags(SendFlags.INLINE);
        }
        w[BATCH - 1].sendFlags(sig ? SendFlags.INLINE | SendFlags.SIGNALED : SendFlags.INLINE);
        // a QP's previous-but-one signaled WRITE must have completed before its SQ takes 2 x BATCH more
        while (signaled - reaped >= qps) {
            reap(true);
        }
        int n = qpA[q].postSend(w, BATCH);
        if (n != BATCH) {
            throw new IllegalStateException("postSend posted " + n + "/" + BATCH + " on QP " + q + ": " + w[n].postError());
        }
        if (sig) {
            signaled++;
        }
        reap(false);
    }
}
