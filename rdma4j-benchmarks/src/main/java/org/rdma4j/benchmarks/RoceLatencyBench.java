// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.benchmarks;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.util.List;
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
import org.rdma4j.soft.RoceConfig;
import org.rdma4j.soft.SoftFabric;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.wire.net.SockAddr;
import org.rdma4j.wire.net.UdpSocket;

/**
 * RC SEND of 8 bytes over RoCEv2 on loopback between two threads, against the same ping-pong of raw 8-byte
 * UDP datagrams between two threads over two sockets of the same kind ({@link UdpSocket}: FFM
 * {@code sendto}/{@code recvfrom}, non-blocking, busy-polled). The JMH thread is the client; a partner
 * thread echoes. Devices A and B are on two separate {@link SoftFabric}s (127.0.0.1 and 127.0.0.2), so
 * every packet crosses a UDP socket exactly as between two processes, and both sides busy-poll as
 * perftest does. {@link #roce} over {@link #udp} of the same run is what the RoCE device costs on top of
 * the kernel's UDP path: packet build, ICRC, parse and ID solve, the engine, completions, and the ACK
 * datagram every RC SEND earns ({@code signalEvery=1} is perftest's {@code ib_send_lat}: every SEND
 * signaled, each waiting for its ACK before the next is posted). Score: ns per one-way trip (round trip / 2).
 *
 * <pre>bench/run-jmh RoceLatencyBench</pre>
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class RoceLatencyBench {
    static final int ROUNDS = 100;

    /** Every how many SENDs one is signaled (1: every SEND waits for its ACK, as in ib_send_lat). */
    @Param({"1", "16"})
    public int signalEvery;

    private SoftFabric fabA;
    private SoftFabric fabB;
    private RcPair pair;
    private Arena arena;
    private SendLatencyBench.Endpoint client;
    private long seq;

    private UdpSocket udpA;
    private UdpSocket udpB;
    private SockAddr toA;
    private SockAddr toB;
    private SockAddr fromA;
    private MemorySegment dgramA;

    private Thread partner;
    private volatile boolean running;
    private volatile Throwable partnerFailure;

    @Setup
    public void setup(BenchmarkParams params) throws IOException {
        running = true;
        int port = 20000 + (int) (ProcessHandle.current().pid() % 20000);
        InetAddress ipA = InetAddress.getByName("127.0.0.1");
        InetAddress ipB = InetAddress.getByName("127.0.0.2");
        arena = Arena.ofShared();
        if (params.getBenchmark().endsWith(".roce")) {
            fabA = new SoftFabric();
            fabB = new SoftFabric();
            var a = fabA.addRoceDevice("rxeA", new RoceConfig(List.of(ipA), port, null));
            var b = fabB.addRoceDevice("rxeB", new RoceConfig(List.of(ipB), port, null));
            pair = new RcPair(a, b, 512, new QpCapabilities(SendLatencyBench.SQ_DEPTH,
                    SendLatencyBench.RECV_DEPTH, 1, 1, 64));
            client = new SendLatencyBench.Endpoint(pair.a, arena, signalEvery);
            SendLatencyBench.Endpoint server = new SendLatencyBench.Endpoint(pair.b, arena, signalEvery);
            partner = start("roce-echo", () -> roceEcho(server));
        } else {
            udpA = UdpSocket.open(ipA, port + 1);
            udpB = UdpSocket.open(ipB, port + 1);
            udpA.setBlocking(false);
            udpB.setBlocking(false);
            toA = SockAddr.of(ipA, port + 1);
            toB = SockAddr.of(ipB, port + 1);
            fromA = new SockAddr();
            dgramA = arena.allocate(64, 64);
            MemorySegment dgramB = arena.allocate(64, 64);
            partner = start("udp-echo", () -> udpEcho(dgramB));
        }
    }

    private Thread start(String name, Runnable body) {
        return SendLatencyBench.startPartner(name, body, e -> partnerFailure = e);
    }

    @TearDown
    public void tearDown() throws InterruptedException {
        running = false;
        partner.join(10_000);
        if (pair != null) {
            pair.close();
            fabA.close();
            fabB.close();
        }
        if (udpA != null) {
            udpA.close();
            udpB.close();
        }
        arena.close();
        if (partnerFailure != null) {
            throw new IllegalStateException("partner thread failed", partnerFailure);
        }
    }

    private void roceEcho(SendLatencyBench.Endpoint server) {
        WorkCompletion wc = server.wc;
        while (running) {
            if (server.recvCq.poll(wc)) {
                RcPair.check(wc);
                long slot = wc.wrId();
                long v = server.recvBuf.get(ValueLayout.JAVA_LONG_UNALIGNED, slot * 64);
                server.postRecv(slot);
                server.reap();
                server.send(v);
            }
        }
    }

    /** RC SEND ping-pong between the two threads (perftest's order: repost, reap the last send, send). */
    @Benchmark
    @OperationsPerInvocation(2 * ROUNDS)
    public long roce() {
        SendLatencyBench.Endpoint c = client;
        long s = seq;
        for (int i = 0; i < ROUNDS; i++) {
            c.reap();
            c.send(++s);
            c.receive();
        }
        seq = s;
        return s;
    }

    private void udpEcho(MemorySegment buf) {
        SockAddr from = new SockAddr();
        try {
            while (running) {
                if (udpB.receive(buf, from) == 8) {
                    udpB.send(buf.asSlice(0, 8), toA);
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Baseline: the same ping-pong of raw 8-byte datagrams between the two threads. */
    @Benchmark
    @OperationsPerInvocation(2 * ROUNDS)
    public long udp() throws IOException {
        long s = seq;
        for (int i = 0; i < ROUNDS; i++) {
            dgramA.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, ++s);
            udpA.send(dgramA.asSlice(0, 8), toB);
            long spins = 0;
            while (udpA.receive(dgramA, fromA) != 8) {
                if (++spins == 1L << 32 || partnerFailure != null) {
                    throw new IllegalStateException("no echo", partnerFailure);
                }
            }
        }
        seq = s;
        return s;
    }
}
