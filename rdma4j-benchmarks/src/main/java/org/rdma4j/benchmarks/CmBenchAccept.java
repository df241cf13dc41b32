// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.benchmarks;

import static org.rdma4j.benchmarks.CmBench.CAP;
import static org.rdma4j.benchmarks.CmBench.WAIT;
import static org.rdma4j.benchmarks.CmBench.load;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.Verbs;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * {@code CmBench accept C ROUNDS}: connections accepted per second by one listener on the in-process device,
 * C at once, beside a {@code ServerSocket} accepting C concurrent TCP connects in the same process. The CM's drop
 * counters that moved are printed for the accepting and for the teardown apart: the teardown closes connected IDs,
 * which drops one DREP per connection as unmatched, by design ({@link #TEARDOWN_NOTE}).
 */
final class CmBenchAccept {
    private CmBenchAccept() {
    }

    static void accept(int c, int rounds) throws Exception {
        RdmaCm cm = RdmaCm.system();
        InetAddress serverIp = gidAddress("soft1");
        InetAddress clientIp = gidAddress("soft0");
        int port = 40_000 + (int) (ProcessHandle.current().pid() % 5000);
        System.out.printf(Locale.ROOT, "accept rate: %d connections per round, %d rounds, load %s%n", c, rounds, load());
        System.out.printf(Locale.ROOT, "%-6s %14s %14s %8s%n", "round", "cm conn/s", "tcp conn/s", "ratio");
        double[] cmRates = new double[rounds];
        double[] tcpRates = new double[rounds];
        for (int r = 0; r < rounds; r++) {
            Map<String, Long> before = counters();
            Round round = cmAcceptRound(cm, c, new InetSocketAddress(serverIp, port + r), clientIp);
            cmRates[r] = round.rate();
            tcpRates[r] = tcpAcceptRound(c);
            // read after the TCP round, so that the teardown's last DREPs have long been processed
            Map<String, Long> after = counters();
            String accepting = moved(before, round.atEstablished());
            if (!accepting.isEmpty()) {
                System.out.println("  counters while accepting:" + accepting);
            }
            String teardown = moved(round.atEstablished(), after);
            if (!teardown.isEmpty()) {
                System.out.println("  counters at teardown:" + teardown + TEARDOWN_NOTE.formatted(c));
            }
            System.out.printf(Locale.ROOT, "%-6d %14.0f %14.0f %8.3f%n", r + 1, cmRates[r], tcpRates[r],
                    cmRates[r] / tcpRates[r]);
        }
        Arrays.sort(cmRates);
        Arrays.sort(tcpRates);
        System.out.printf(Locale.ROOT, "median %14.0f %14.0f %8.3f   load %s%n", cmRates[rounds / 2], tcpRates[rounds / 2],
                cmRates[rounds / 2] / tcpRates[rounds / 2], load());
    }

    /**
     * What the teardown's {@code cm_drop_unmatched} is: the client closes its connected IDs without
     * {@code rdma_disconnect}, so each close sends a DREQ and forgets the ID, and the listener's DREP then finds
     * no ID, one per connection, as Linux's {@code cm_drep_handler} drops it (docs/cm.md, "Counters").
     * Any other drop, and any while accepting, is worth a look.
     */
    private static final String TEARDOWN_NOTE = "  (cm_drop_unmatched: %d expected, the DREPs answering the DREQs"
            + " that closing the connected client IDs sent)";

    /** A round's rate, and the counters when the listener had seen every ESTABLISHED (before the teardown). */
    private record Round(double rate, Map<String, Long> atEstablished) {
    }

    /** The drop, retransmission, timeout, duplicate and backlog counters that moved from {@code a} to {@code b}. */
    private static String moved(Map<String, Long> a, Map<String, Long> b) {
        StringBuilder moved = new StringBuilder();
        b.forEach((k, v) -> {
            long d = v - a.getOrDefault(k, 0L);
            if (d != 0 && (k.contains("drop") || k.contains("retrans") || k.contains("timeout") || k.contains("dup")
                    || k.contains("backlog") || k.contains("DROP"))) {
                moved.append(' ').append(k).append('+').append(d);
            }
        });
        return moved.toString();
    }

    /** The CM's and the in-process devices' counters (drops and retransmissions explain a slow round). */
    private static Map<String, Long> counters() {
        Map<String, Long> m = new java.util.TreeMap<>(org.rdma4j.cm.UserCmProvider.shared().counters());
        for (String d : List.of("soft0", "soft1")) {
            if (Verbs.device(d) instanceof org.rdma4j.soft.SoftDevice sd) {
                for (org.rdma4j.soft.SoftCounter c : org.rdma4j.soft.SoftCounter.values()) {
                    m.put(d + "." + c.name(), sd.counter(c));
                }
            }
        }
        return m;
    }

    private static InetAddress gidAddress(String dev) {
        try (Context ctx = Verbs.device(dev).open()) {
            return ctx.queryGid(1, 0).toInetAddress();
        }
    }

    /** C connects started at once; the listener's thread accepts; timed until it saw C ESTABLISHED. */
    private static Round cmAcceptRound(RdmaCm cm, int c, InetSocketAddress at, InetAddress src) throws Exception {
        CountDownLatch listening = new CountDownLatch(1);
        AtomicInteger established = new AtomicInteger();
        long[] done = new long[1];
        List<CmId> serverIds = new ArrayList<>();
        java.util.concurrent.atomic.AtomicReference<ProtectionDomain> serverPd = new java.util.concurrent.atomic.AtomicReference<>();
        CmEventChannel sch = cm.createEventChannel();
        Thread server = Thread.ofPlatform().name("accept-server").start(() -> {
            try {
                CmId listen = sch.createId(PortSpace.TCP);
                listen.bindAddr(at);
                listen.listen(0);
                ProtectionDomain pd = null;
                listening.countDown();
                long deadline = System.nanoTime() + WAIT.toNanos();
                while (established.get() < c && System.nanoTime() < deadline) {
                    CmEvent e = sch.getEvent(Duration.ofMillis(100));
                    if (e == null) {
                        continue;
                    }
                    try (e) {
                        if (e.type() == CmEventType.CONNECT_REQUEST) {
                            if (pd == null) {
                                pd = e.id().context().allocPd();
                            }
                            e.id().createQp(pd, new QpInitAttributes().type(QpType.RC).cap(CAP));
                            e.id().accept(new ConnParam().retryCount(6).rnrRetryCount(7));
                            serverIds.add(e.id());
                        } else if (e.type() == CmEventType.ESTABLISHED && established.incrementAndGet() == c) {
                            done[0] = System.nanoTime();
                        }
                    }
                }
                listen.close();
                serverPd.set(pd);
            } catch (RuntimeException ex) {
                ex.printStackTrace();
            }
        });
        listening.await(30, TimeUnit.SECONDS);
        CmEventChannel cch = cm.createEventChannel();
        List<CmId> clientIds = new ArrayList<>();
        ProtectionDomain cpd = null;
        long t0 = System.nanoTime();
        for (int i = 0; i < c; i++) {
            CmId id = cch.createId(PortSpace.TCP);
            clientIds.add(id);
            id.resolveAddr(new InetSocketAddress(src, 0), at, Duration.ofSeconds(2));
        }
        int connected = 0;
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (connected < c && System.nanoTime() < deadline) {
            CmEvent e = cch.getEvent(Duration.ofMillis(100));
            if (e == null) {
                continue;
            }
            try (e) {
                switch (e.type()) {
                    case ADDR_RESOLVED -> e.id().resolveRoute(Duration.ofSeconds(2));
                    case ROUTE_RESOLVED -> {
                        if (cpd == null) {
                            cpd = e.id().context().allocPd();
                        }
                        e.id().createQp(cpd, new QpInitAttributes().type(QpType.RC).cap(CAP));
                        e.id().connect(new ConnParam().retryCount(6).rnrRetryCount(7));
                    }
                    case ESTABLISHED -> connected++;
                    default -> throw new IllegalStateException("client: " + e);
                }
            }
        }
        server.join(WAIT.toMillis());
        if (established.get() < c) {
            throw new IllegalStateException("the listener saw " + established.get() + " of " + c + " ESTABLISHED");
        }
        double rate = c / ((done[0] - t0) / 1e9);
        Map<String, Long> atEstablished = counters();
        // tear down: closing a connected ID sends the DREQ; drain both channels' events first
        for (CmEvent e; (e = cch.pollEvent()) != null; ) {
            e.ack();
        }
        for (CmId id : clientIds) {
            id.destroyQp();
            id.close();
        }
        drainFor(sch, Duration.ofMillis(200));
        for (CmId id : serverIds) {
            id.destroyQp();
            id.close();
        }
        drainFor(sch, Duration.ZERO);
        sch.close();
        cch.close();
        if (cpd != null) {
            cpd.close();
        }
        if (serverPd.get() != null) {
            serverPd.get().close();
        }
        return new Round(rate, atEstablished);
    }

    /** Acknowledges the channel's events, waiting up to {@code d} for more. */
    private static void drainFor(CmEventChannel ch, Duration d) {
        long end = System.nanoTime() + d.toNanos();
        while (true) {
            CmEvent e = ch.pollEvent();
            if (e == null) {
                if (System.nanoTime() >= end) {
                    return;
                }
                e = ch.getEvent(Duration.ofMillis(20));
                if (e == null) {
                    continue;
                }
            }
            e.ack();
        }
    }

    /** C non-blocking connects at once to a ServerSocketChannel whose thread accepts them all. */
    private static double tcpAcceptRound(int c) throws Exception {
        try (ServerSocketChannel ss = ServerSocketChannel.open()) {
            ss.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), c);
            List<SocketChannel> accepted = new ArrayList<>();
            long[] done = new long[1];
            Thread acceptor = Thread.ofPlatform().name("tcp-accept").start(() -> {
                try {
                    for (int i = 0; i < c; i++) {
                        accepted.add(ss.accept());
                    }
                    done[0] = System.nanoTime();
                } catch (IOException e) {
                    e.printStackTrace();
                }
            });
            List<SocketChannel> clients = new ArrayList<>();
            long t0 = System.nanoTime();
            for (int i = 0; i < c; i++) {
                SocketChannel s = SocketChannel.open();
                s.connect(ss.getLocalAddress());
                clients.add(s);
            }
            acceptor.join(WAIT.toMillis());
            double rate = c / ((done[0] - t0) / 1e9);
            for (SocketChannel s : clients) {
                s.close();
            }
            for (SocketChannel s : accepted) {
                s.close();
            }
            return rate;
        }
    }
}
