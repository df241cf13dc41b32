// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.benchmarks;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.time.Duration;
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
import org.rdma4j.soft.RoceConfig;
import org.rdma4j.soft.SoftFabric;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.Verbs;
import org.rdma4j.verbs.WorkCompletion;

/**
 * Event-driven request/response: a server thread that blocks on a completion channel ({@code server=event}:
 * {@code reqNotifyCq}, {@code getCqEvent}, {@code ackCqEvents}, then poll until empty, then SEND the answer)
 * against one that busy-polls its receive CQ ({@code server=poll}); the client (the JMH thread) SENDs 8 bytes
 * and busy-polls for the answer. Score: ns per round trip. In process ({@code transport=inproc}: soft0 and
 * soft1) and over RoCEv2 on loopback between two fabrics of this JVM ({@code transport=roce}: 127.0.0.1 and
 * 127.0.0.2, every packet through a UDP socket). The target: event within 10 µs of poll, per transport.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class EventDrivenBench {
    static final int ROUNDS = 50;

    /** How the server waits. */
    @Param({"poll", "event"})
    public String server;

    /** inproc or roce. */
    @Param({"inproc", "roce"})
    public String transport;

    private SoftFabric fabA;
    private SoftFabric fabB;
    private RcPair pair;
    private Arena arena;
    private SendLatencyBench.Endpoint client;
    private CompletionChannel channel;
    private CompletionQueue serverRecvCq;
    private Thread partner;
    private volatile boolean running;
    private volatile Throwable partnerFailure;
    private long seq;

    @Setup
    public void setup() throws IOException {
        running = true;
        arena = Arena.ofShared();
        Device a;
        Device b;
        if (transport.equals("roce")) {
            int port = 21000 + (int) (ProcessHandle.current().pid() % 20000);
            fabA = new SoftFabric();
            fabB = new SoftFabric();
            a = fabA.addRoceDevice("rxeA", new RoceConfig(List.of(InetAddress.getByName("127.0.0.1")), port, null));
            b = fabB.addRoceDevice("rxeB", new RoceConfig(List.of(InetAddress.getByName("127.0.0.2")), port, null));
        } else {
            a = Verbs.device(System.getProperty("rdma4j.bench.devA", "soft0"));
            b = Verbs.device(System.getProperty("rdma4j.bench.devB", "soft1"));
        }
        QpCapabilities cap = new QpCapabilities(SendLatencyBench.SQ_DEPTH, SendLatencyBench.RECV_DEPTH, 1, 1, 64);
        boolean event = server.equals("event");
        pair = new RcPair(a, b, 512, cap) {
            @Override
            QpInitAttributes serverAttributes(RcPair.Side side, QpInitAttributes attrs) {
                if (!event) {
                    return attrs;
                }
                channel = side.ctx.createCompChannel();
                serverRecvCq = side.ctx.createCq(512, channel, 0);
                side.extra(serverRecvCq);
                side.extra(channel);
                return attrs.recvCq(serverRecvCq);
            }
        };
        client = new SendLatencyBench.Endpoint(pair.a, arena, SendLatencyBench.SIGNAL_EVERY);
        SendLatencyBench.Endpoint srv = new SendLatencyBench.Endpoint(pair.b, arena, SendLatencyBench.SIGNAL_EVERY);
        partner = SendLatencyBench.startPartner("event-server", () -> {
            if (event) {
                eventServer(srv);
            } else {
                pollServer(srv);
            }
        }, e -> partnerFailure = e);
    }

    @TearDown
    public void tearDown() throws InterruptedException {
        running = false;
        partner.join(10_000);
        pair.close();
        if (fabA != null) {
            fabA.close();
            fabB.close();
        }
        arena.close();
        if (partnerFailure != null) {
            throw new IllegalStateException("server thread failed", partnerFailure);
        }
    }

    private static void answer(SendLatencyBench.Endpoint srv, WorkCompletion wc) {
        RcPair.check(wc);
        long slot = wc.wrId();
        long v = srv.recvBuf.get(ValueLayout.JAVA_LONG_UNALIGNED, slot * 64);
        srv.postRecv(slot);
        srv.reap();
        srv.send(v);
    }

    private void pollServer(SendLatencyBench.Endpoint srv) {
        WorkCompletion wc = srv.wc;
        while (running) {
            if (srv.recvCq.poll(wc)) {
                answer(srv, wc);
            }
        }
    }

    private void eventServer(SendLatencyBench.Endpoint srv) {
        WorkCompletion wc = srv.wc;
        CompletionQueue cq = srv.recvCq;
        cq.reqNotify(false);
        // and drain once after the first arm too: the client may have sent its first request before this thread
        // armed the CQ, and a completion queued before the arm raises no event (the arm asks for the next one:
        // rxe_cq_post reads cq->notify when it queues, ib_uverbs_req_notify_cq passes IB_CQ_NEXT_COMP without
        // IB_CQ_REPORT_MISSED_EVENTS). Without this poll the first round trip could wait for ever (5 of 30 runs, 3 at
        // a time: docs/benchmarks.md)
        while (cq.poll(wc)) {
            answer(srv, wc);
        }
        while (running) {
            CompletionQueue ev = channel.getCqEvent(Duration.ofMillis(100));
            if (ev == null) {
                continue;
            }
            ev.ackEvents(1);
            cq.reqNotify(false); // re-arm before draining, so a completion that arrives meanwhile raises an event
            while (cq.poll(wc)) {
                answer(srv, wc);
            }
        }
    }

    /** SEND and wait (busy-polling) for the answer; score = ns per round trip. */
    @Benchmark
    @OperationsPerInvocation(ROUNDS)
    public long roundTrip() {
        SendLatencyBench.Endpoint c = client;
        long s = seq;
        for (int i = 0; i < ROUNDS; i++) {
            c.reap();
            c.send(++s);
            c.receive();
            if (partnerFailure != null) {
                throw new IllegalStateException("server failed", partnerFailure);
            }
        }
        seq = s;
        return s;
    }
}
