// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.benchmarks;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.TimeUnit;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.BenchmarkParams;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * Benchmark 2: RC SEND of 8 bytes, one-way latency with busy polling. The JMH thread is the client: it
 * posts a SEND, spins on its receive CQ for the echo and reposts the receive; a partner thread started
 * in {@code @Setup} is the server: it spins on its receive CQ, reposts the receive and SENDs back. Each
 * invocation does {@link #ROUNDS} round trips and counts 2 x ROUNDS operations, so the score is ns per
 * one-way trip (round trip / 2). SENDs are INLINE when the QP grants 8 inline bytes, signaled every
 * {@link #SIGNAL_EVERY}th (completions reaped off the critical path where possible).
 * Baseline {@link #volatilePingPong}: the same ping-pong between the same two kinds of thread over two
 * volatile fields, the floor for one cross-core hop. Target: {@link #send} &lt;= 250 ns.
 * <p>Both modes are reported: AverageTime, and SampleTime (every invocation of {@link #ROUNDS} round
 * trips timed; its median is robust against the scheduler preempting one of the two spinning threads,
 * which on a 2-vCPU machine with any other load costs milliseconds).
 */
@State(Scope.Thread)
@BenchmarkMode({Mode.AverageTime, Mode.SampleTime})
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class SendLatencyBench {
    static final int ROUNDS = 100;
    static final int MSG = 8;
    static final int RECV_DEPTH = 64;
    static final int SQ_DEPTH = 128;
    static final int SIGNAL_EVERY = 16;

    private RcPair pair;
    private Arena arena;
    private Endpoint client;
    private Endpoint server; // driven by the JMH thread itself in sendOneThread
    private Thread partner;
    private volatile boolean running;
    private volatile Throwable partnerFailure;

    // volatile ping-pong baseline; fields padded apart so that they sit on different cache lines
    private final VolatilePair vp = new VolatilePair();
    private long seq;

    @Setup
    public void setup(BenchmarkParams params) {
        running = true;
        if (params.getBenchmark().endsWith(".send")) {
            setupRdma(true);
        } else if (params.getBenchmark().endsWith(".sendOneThread")) {
            setupRdma(false);
        } else {
            partner = startPartner("pingpong-echo", this::volatileEcho);
        }
    }

    private void setupRdma(boolean withPartner) {
        arena = Arena.ofShared();
        pair = new RcPair(512, new QpCapabilities(SQ_DEPTH, RECV_DEPTH, 1, 1, 64));
        client = new Endpoint(pair.a, arena);
        Endpoint srv = new Endpoint(pair.b, arena);
        if (withPartner) {
            partner = startPartner("send-echo", () -> rdmaEcho(srv));
        } else {
            server = srv;
        }
    }

    private Thread startPartner(String name, Runnable body) {
        return startPartner(name, body, e -> partnerFailure = e);
    }

    /**
     * Starts a daemon partner thread running {@code body}; a failure is printed and handed to {@code failed}
     * (the benchmark checks it in its spin loops and at tear-down).
     */
    static Thread startPartner(String name, Runnable body, java.util.function.Consumer<Throwable> failed) {
        Thread t = new Thread(() -> {
            try {
                body.run();
            } catch (Throwable e) {
                failed.accept(e);
                e.printStackTrace();
            }
        }, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    @TearDown
    public void tearDown() throws InterruptedException {
        running = false;
        if (partner != null) {
            partner.join(10_000);
        }
        if (pair != null) {
            pair.close();
            arena.close();
        }
        if (partnerFailure != null) {
            throw new IllegalStateException("partner thread failed", partnerFailure);
        }
    }

    /** One side: pre-posted receives, an 8-byte send buffer, reusable WRs and completions. */
    static final class Endpoint {
        final QueuePair qp;
        final CompletionQueue sendCq;
        final CompletionQueue recvCq;
        final MemorySegment sendBuf;
        final MemorySegment recvBuf;
        final MemoryRegion recvMr;
        final SendWorkRequest swr = new SendWorkRequest(1);
        final RecvWorkRequest rwr = new RecvWorkRequest(1);
        final WorkCompletion wc = new WorkCompletion();
        final WorkCompletion swc = new WorkCompletion();
        final int baseFlags;
        final int signalEvery;
        long posted;
        long reaped;

        Endpoint(RcPair.Side side, Arena arena) {
            this(side, arena, SIGNAL_EVERY);
        }

        /** @param signalEvery every how many SENDs one is signaled (a power of two up to {@link #SIGNAL_EVERY}) */
        Endpoint(RcPair.Side side, Arena arena, int signalEvery) {
            this.signalEvery = signalEvery;
            qp = side.qp;
            sendCq = side.sendCq;
            recvCq = side.recvCq;
            sendBuf = arena.allocate(64, 64);
            recvBuf = arena.allocate((long) RECV_DEPTH * 64, 4096);
            MemoryRegion sendMr = side.reg(sendBuf);
            recvMr = side.reg(recvBuf);
            baseFlags = qp.cap().maxInlineData() >= MSG ? SendFlags.INLINE : 0;
            swr.opcode(WrOpcode.SEND).singleSge(sendMr.address(), MSG, sendMr.lkey());
            for (int i = 0; i < RECV_DEPTH; i++) {
                postRecv(i);
            }
        }

        void postRecv(long slot) {
            rwr.wrId(slot).singleSge(recvMr.address() + slot * 64, 64, recvMr.lkey());
            if (!qp.postRecv(rwr)) {
                throw new IllegalStateException("postRecv refused: " + rwr.postError());
            }
        }

        void send(long value) {
            sendBuf.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, value);
            long n = ++posted;
            boolean sig = n % signalEvery == 0;
            swr.wrId(n).sendFlags(sig ? baseFlags | SendFlags.SIGNALED : baseFlags);
            if (!qp.postSend(swr)) {
                throw new IllegalStateException("postSend refused: " + swr.postError());
            }
        }

        /** Reaps send completions: must when the SQ is half full, opportunistically otherwise. */
        void reap() {
            long out = posted - reaped;
            if (signalEvery == 1) {
                // every SEND signaled (ib_send_lat): its completion, which needs the peer's ACK, comes first
                if (out > 0) {
                    RcPair.pollOne(sendCq, swc);
                    reaped++;
                }
            } else if (out >= SQ_DEPTH / 2) {
                RcPair.pollOne(sendCq, swc);
                reaped += signalEvery;
            } else if (out >= signalEvery && sendCq.poll(swc)) {
                RcPair.check(swc);
                reaped += signalEvery;
            }
        }

        /** Takes one receive completion (spinning), checks it and reposts the buffer. */
        void receive() {
            RcPair.pollOne(recvCq, wc);
            if (wc.byteLen() != MSG) {
                throw new IllegalStateException("unexpected receive " + wc);
            }
            postRecv(wc.wrId());
        }
    }

    private void rdmaEcho(Endpoint server) {
        WorkCompletion wc = server.wc;
        while (running) {
            if (server.recvCq.poll(wc)) {
                RcPair.check(wc);
                long slot = wc.wrId();
                long v = server.recvBuf.get(ValueLayout.JAVA_LONG_UNALIGNED, slot * 64);
                server.send(v);
                server.postRecv(slot);
                server.reap();
            }
        }
    }

    /** RC SEND ping-pong; score = ns per one-way trip. */
    @Benchmark
    @OperationsPerInvocation(2 * ROUNDS)
    public long send() {
        Endpoint c = client;
        long s = seq;
        for (int i = 0; i < ROUNDS; i++) {
            c.send(++s);
            c.receive();
            c.reap();
        }
        seq = s;
        return s;
    }

    /**
     * Diagnostic, not a target: the same SEND ping-pong with both ends driven by the JMH thread (post,
     * take the peer's receive, echo, take the echo). No cross-core hand-off, so this is the device's pure
     * CPU cost per one-way trip; {@link #send} minus this is what the two-thread hand-off adds.
     */
    @Benchmark
    @OperationsPerInvocation(2 * ROUNDS)
    public long sendOneThread() {
        Endpoint c = client;
        Endpoint sv = server;
        long s = seq;
        for (int i = 0; i < ROUNDS; i++) {
            c.send(++s);
            sv.receive();
            sv.send(s);
            sv.reap();
            c.receive();
            c.reap();
        }
        seq = s;
        return s;
    }

    private void volatileEcho() {
        VolatilePair p = vp;
        long last = 0;
        while (running) {
            long v = p.ping;
            if (v != last) {
                p.pong = v;
                last = v;
            }
        }
    }

    /** Baseline: volatile-field ping-pong with the partner thread; score = ns per one-way trip. */
    @Benchmark
    @OperationsPerInvocation(2 * ROUNDS)
    public long volatilePingPong() {
        VolatilePair p = vp;
        long s = seq;
        for (int i = 0; i < ROUNDS; i++) {
            p.ping = ++s;
            int spins = 0;
            while (p.pong != s) {
                if (++spins == 1 << 30 && partnerFailure != null) {
                    throw new IllegalStateException("partner failed", partnerFailure);
                }
            }
        }
        seq = s;
        return s;
    }

    /** Two volatile longs on separate cache lines. */
    static final class VolatilePair {
        long p00, p01, p02, p03, p04, p05, p06, p07;
        volatile long ping;
        long p10, p11, p12, p13, p14, p15, p16, p17;
        volatile long pong;
        long p20, p21, p22, p23, p24, p25, p26, p27;
    }
}
