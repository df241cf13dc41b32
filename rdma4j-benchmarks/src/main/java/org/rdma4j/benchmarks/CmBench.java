// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.benchmarks;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.Verbs;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * The connection-management figures of issue 12 item 9, each beside a baseline measured in the same run
 * ({@code bench/cm-bench} runs them and records the load):
 * <ul>
 * <li>{@code latency N SERVER_IP CM_PORT TCP_PORT}: N sequential rdma_cm connect + disconnect cycles to a
 * {@code serve} process (resolve address and route, create the QP, connect until ESTABLISHED, disconnect until
 * DISCONNECTED, destroy), beside N TCP connect + orderly close cycles to the same process and the 8-byte SEND
 * round trip on one established connection; median, p90, p99 of each;</li>
 * <li>{@code accept C ROUNDS}: one listener on the in-process device soft1, C connections from soft0 started at
 * once, timed until the listener has seen all C ESTABLISHED; connections accepted per second, beside a
 * {@link ServerSocket} accepting C concurrent TCP connects in the same process;</li>
 * <li>{@code hold N SECONDS SERVER_IP CM_PORT}: this process opens N connections to a {@code serve} process and
 * holds them; heap (after GC), RSS and threads before, after and SECONDS later, per connection, beside N RC QPs
 * with their two CQs made by plain verbs (what a connection's QP costs without the CM);</li>
 * <li>{@code serve CM_PORT TCP_PORT}: the peer: accepts every CM connection (echoes SENDs, tears down on
 * DISCONNECTED) and every TCP connection (closes after EOF), until its standard input closes.</li>
 * </ul>
 * Waits are bounded; failures exit non-zero with a message.
 */
public final class CmBench {
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final QpCapabilities CAP = new QpCapabilities(4, 4, 1, 1, 0);
    /**
     * Connect + disconnect cycles (and round trips) before the measured ones, unless {@code -Dcmbench.warm=N}:
     * enough for the JIT to compile the CM's and the device's paths. With the 30 this benchmark ran before
     * (2026-12-02) it measured interpreted code: connect 2.85 ms and the round trip 779 us where the same
     * processes measure 0.61 ms and 47 us warm, at the same load (docs/benchmarks.md).
     */
    private static final int WARM = Integer.getInteger("cmbench.warm", 2000);
    /** The first connects of a new process, reported apart (what a program that connects once pays). */
    private static final int COLD = 30;

    private CmBench() {
    }

    /**
     * @param args the mode and its arguments (see the class comment)
     * @throws Exception on a failure
     */
    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            usage();
        }
        switch (args[0]) {
            case "serve" -> serve(Integer.parseInt(args[1]), Integer.parseInt(args[2]));
            case "latency" -> latency(Integer.parseInt(args[1]), InetAddress.getByName(args[2]), Integer.parseInt(args[3]),
                    Integer.parseInt(args[4]));
            case "accept" -> accept(Integer.parseInt(args[1]), Integer.parseInt(args[2]));
            case "hold" -> hold(Integer.parseInt(args[1]), Integer.parseInt(args[2]), InetAddress.getByName(args[3]),
                    Integer.parseInt(args[4]));
            default -> usage();
        }
        System.exit(0);
    }

    private static void usage() {
        System.err.println("usage: CmBench serve CM_PORT TCP_PORT | latency N SERVER_IP CM_PORT TCP_PORT"
                + " | accept C ROUNDS | hold N SECONDS SERVER_IP CM_PORT");
        System.exit(2);
    }

    private static CmEvent next(CmEventChannel ch, String what) {
        CmEvent e = ch.getEvent(WAIT);
        if (e == null) {
            throw new IllegalStateException("no CM event in " + WAIT.toSeconds() + " s while waiting for " + what);
        }
        return e;
    }

    private static void expect(CmEventChannel ch, CmEventType t) {
        try (CmEvent e = next(ch, t.rdmaName())) {
            if (e.type() != t) {
                throw new IllegalStateException("expected " + t + ", got " + e);
            }
        }
    }

    // ------------------------------------------------------------------ serve

    /** The first private-data byte of the connection whose SENDs {@link #serve} echoes (the round-trip baseline). */
    private static final byte ECHO = 'E';

    /**
     * One accepted connection of {@link #serve}: its QP; for the echo connection also a completion channel, CQs on
     * it, a receive buffer and a thread that echoes each SEND, woken by the channel (so that the round trip
     * measured beside the CM pays the same thread wake-ups as a MAD exchange, and no spinning thread of this
     * process takes a core from the other process or from this one's CM agent).
     */
    private static final class Conn {
        final CmId id;
        private final MemoryRegion mr;
        private final CompletionChannel channel;
        private final CompletionQueue scq;
        private final CompletionQueue rcq;
        private final Thread echo;
        private volatile boolean stop;

        Conn(CmId id, ProtectionDomain pd, Arena arena, boolean echoes) {
            this.id = id;
            if (!echoes) {
                id.createQp(pd, new QpInitAttributes().type(QpType.RC).cap(CAP));
                mr = null;
                channel = null;
                scq = null;
                rcq = null;
                echo = null;
                return;
            }
            Context ctx = id.context();
            channel = ctx.createCompChannel();
            scq = ctx.createCq(CAP.maxSendWr(), channel, 0);
            rcq = ctx.createCq(CAP.maxRecvWr(), channel, 0);
            id.createQp(pd, new QpInitAttributes().type(QpType.RC).sendCq(scq).recvCq(rcq).cap(CAP));
            mr = pd.regMr(arena.allocate(64, 8), EnumSet.of(AccessFlag.LOCAL_WRITE));
            post();
            scq.reqNotify(false);
            rcq.reqNotify(false);
            echo = Thread.ofPlatform().daemon().name("echo").start(this::echoLoop);
        }

        private void post() {
            id.qp().postRecv(new RecvWorkRequest().singleSge(mr.address(), 64, mr.lkey()));
        }

        private void echoLoop() {
            WorkCompletion wc = new WorkCompletion();
            while (!stop) {
                CompletionQueue cq = channel.getCqEvent(Duration.ofMillis(100));
                if (cq == null) {
                    continue;
                }
                cq.ackEvents(1);
                cq.reqNotify(false);
                while (cq.poll(wc)) {
                    if (cq == rcq && wc.status().name().equals("SUCCESS")) {
                        int n = wc.byteLen();
                        post();
                        id.qp().postSend(new SendWorkRequest().opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                                .singleSge(mr.address(), n, mr.lkey()));
                    }
                }
            }
        }

        void close() throws InterruptedException {
            if (echo != null) {
                stop = true;
                echo.interrupt();
                echo.join(WAIT.toMillis());
            }
            id.destroyQp();
            if (echo != null) {
                scq.close();
                rcq.close();
                channel.close();
                mr.close();
            }
            id.close();
        }
    }

    private static void serve(int cmPort, int tcpPort) throws Exception {
        RdmaCm cm = RdmaCm.system();
        // bound before "serving" is printed, so the client never finds it missing; a bind failure ends serve
        ServerSocket tss = new ServerSocket();
        tss.setReuseAddress(true);
        tss.bind(new InetSocketAddress(tcpPort), 1024);
        Thread tcp = Thread.ofPlatform().daemon().name("tcp-serve").start(() -> serveTcp(tss));
        Map<CmId, Conn> conns = new HashMap<>();
        Map<Context, ProtectionDomain> pds = new HashMap<>();
        try (Arena arena = Arena.ofShared(); CmEventChannel ch = cm.createEventChannel()) {
            CmId listen = ch.createId(PortSpace.TCP);
            listen.bindAddr(new InetSocketAddress(InetAddress.ofLiteral("::"), cmPort));
            listen.listen(0);
            System.out.println("serving cm " + cmPort + " tcp " + tcpPort);
            System.out.flush();
            while (!stdinEof) {
                CmEvent e = ch.getEvent(Duration.ofMillis(50));
                if (e == null) {
                    continue;
                }
                try (e) {
                    CmId id = e.id();
                    switch (e.type()) {
                        case CONNECT_REQUEST -> {
                            ProtectionDomain pd = pds.computeIfAbsent(id.context(), Context::allocPd);
                            byte[] pdata = e.privateData();
                            Conn c = new Conn(id, pd, arena, pdata != null && pdata.length > 0 && pdata[0] == ECHO);
                            conns.put(id, c);
                            id.accept(new ConnParam().responderResources(1).initiatorDepth(1).retryCount(6)
                                    .rnrRetryCount(7));
                        }
                        case DISCONNECTED -> {
                            Conn c = conns.remove(id);
                            if (c != null) {
                                // the DREP first, then the teardown, as rdma-core's cmtime server does
                                // (server_disconnect: rdma_disconnect on DISCONNECTED): the peer's
                                // disconnect ends when the DREP arrives
                                id.disconnect();
                                e.ack();
                                c.close();
                            }
                        }
                        default -> {
                            // ESTABLISHED, TIMEWAIT_EXIT: nothing to do
                        }
                    }
                }
            }
            listen.close();
            for (Conn c : conns.values()) {
                c.close();
            }
            tcp.interrupt();
        }
    }

    private static volatile boolean stdinEof;

    static {
        Thread.ofPlatform().daemon().name("stdin-eof").start(() -> {
            try {
                while (System.in.read() >= 0) {
                    // the parent writes nothing; EOF when it exits
                }
            } catch (IOException e) {
                // closed
            }
            stdinEof = true;
        });
    }

    /** Echoes each connection until its EOF; one connection's failure (a reset) does not end the server. */
    private static void serveTcp(ServerSocket ss) {
        try (ss) {
            while (!stdinEof) {
                try (Socket s = ss.accept()) {
                    InputStream in = s.getInputStream();
                    OutputStream out = s.getOutputStream();
                    byte[] b = new byte[64];
                    for (int n; (n = in.read(b)) > 0; ) {
                        out.write(b, 0, n);
                    }
                } catch (IOException e) {
                    if (ss.isClosed()) {
                        return;
                    }
                    System.err.println("tcp serve: one connection: " + e.getMessage());
                }
            }
        } catch (IOException e) {
            System.err.println("tcp serve: " + e.getMessage());
        }
    }

    // ------------------------------------------------------------------ latency

    private static void latency(int n, InetAddress server, int cmPort, int tcpPort) throws Exception {
        RdmaCm cm = RdmaCm.system();
        InetSocketAddress dst = new InetSocketAddress(server, cmPort);
        int warm = Math.max(WARM, 0);
        long[] resolve = new long[n];
        long[] qp = new long[n];
        long[] connect = new long[n];
        long[] disconnect = new long[n];
        long[] total = new long[n];
        long[] tcp = new long[n];
        long[] cold = new long[Math.min(COLD, warm)];
        try (CmEventChannel ch = cm.createEventChannel()) {
            ProtectionDomain pd = null;
            for (int i = -warm; i < n; i++) {
                long t0 = System.nanoTime();
                CmId id = ch.createId(PortSpace.TCP);
                id.resolveAddr(null, dst, Duration.ofSeconds(2));
                expect(ch, CmEventType.ADDR_RESOLVED);
                id.resolveRoute(Duration.ofSeconds(2));
                expect(ch, CmEventType.ROUTE_RESOLVED);
                long t1 = System.nanoTime();
                if (pd == null) {
                    pd = id.context().allocPd();
                }
                id.createQp(pd, new QpInitAttributes().type(QpType.RC).cap(CAP));
                long t2 = System.nanoTime();
                id.connect(new ConnParam().responderResources(1).initiatorDepth(1).retryCount(6).rnrRetryCount(7));
                expect(ch, CmEventType.ESTABLISHED);
                long t3 = System.nanoTime();
                id.disconnect();
                expect(ch, CmEventType.DISCONNECTED);
                long t4 = System.nanoTime();
                id.destroyQp();
                id.close();
                long t5 = System.nanoTime();
                if (i < -warm + cold.length) {
                    cold[i + warm] = t3 - t2;
                }
                if (i >= 0) {
                    resolve[i] = t1 - t0;
                    qp[i] = t2 - t1;
                    connect[i] = t3 - t2;
                    disconnect[i] = t4 - t3;
                    total[i] = t5 - t0;
                }
                // the baseline right after, so load changes hit both alike
                long s0 = System.nanoTime();
                try (Socket s = new Socket()) {
                    s.setTcpNoDelay(true);
                    s.connect(new InetSocketAddress(server, tcpPort), 5000);
                    s.shutdownOutput();
                    if (s.getInputStream().read() != -1) {
                        throw new IllegalStateException("tcp: data after shutdown");
                    }
                }
                if (i >= 0) {
                    tcp[i] = System.nanoTime() - s0;
                }
            }
            long[] rtt = pingRtt(ch, dst, pd, n);
            System.out.printf(Locale.ROOT, "cm connect+disconnect cycles: %d (after %d warm-up), load %s%n", n, warm, load());
            row("total (create..destroy)", total);
            row("  resolve addr+route", resolve);
            row("  create qp", qp);
            row("  connect (REQ..ESTABLISHED)", connect);
            row("  disconnect (DREQ..DISCONNECTED)", disconnect);
            if (cold.length > 0) {
                row("  connect, first " + cold.length + " of a new process", cold);
            }
            row("baseline: tcp connect+close", tcp);
            row("baseline: 8-byte SEND round trip", rtt);
            System.out.printf(Locale.ROOT, "ratio total / tcp connect+close (medians): %.2f%n",
                    (double) median(total) / median(tcp));
            System.out.printf(Locale.ROOT, "ratio connect / SEND round trip (medians): %.2f%n",
                    (double) median(connect) / median(rtt));
            if (pd != null) {
                pd.close();
            }
        }
    }

    /**
     * 8-byte SEND round trips on one connection to the serve process, which echoes each on a thread woken by
     * its completion channel; this side waits for the echo on a completion channel too. Both ends thus pay the
     * thread wake-ups a MAD exchange pays (a MAD is taken by the CM's agent, blocked on QP1's channel).
     */
    private static long[] pingRtt(CmEventChannel ch, InetSocketAddress dst, ProtectionDomain pd, int n) throws Exception {
        CmId id = ch.createId(PortSpace.TCP);
        id.resolveAddr(null, dst, Duration.ofSeconds(2));
        expect(ch, CmEventType.ADDR_RESOLVED);
        id.resolveRoute(Duration.ofSeconds(2));
        expect(ch, CmEventType.ROUTE_RESOLVED);
        Context ctx = id.context();
        CompletionChannel cc = ctx.createCompChannel();
        CompletionQueue scq = ctx.createCq(CAP.maxSendWr(), cc, 0);
        CompletionQueue rcq = ctx.createCq(CAP.maxRecvWr(), cc, 0);
        id.createQp(pd, new QpInitAttributes().type(QpType.RC).sendCq(scq).recvCq(rcq).cap(CAP));
        long[] rtt = new long[n];
        try (Arena arena = Arena.ofShared()) {
            MemoryRegion mr = pd.regMr(arena.allocate(64, 8), EnumSet.of(AccessFlag.LOCAL_WRITE));
            RecvWorkRequest r = new RecvWorkRequest().singleSge(mr.address() + 32, 32, mr.lkey());
            id.qp().postRecv(r);
            byte[] echo = new byte[1];
            echo[0] = ECHO;
            id.connect(new ConnParam().retryCount(6).rnrRetryCount(7).privateData(echo));
            expect(ch, CmEventType.ESTABLISHED);
            SendWorkRequest s = new SendWorkRequest().opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                    .singleSge(mr.address(), 8, mr.lkey());
            WorkCompletion wc = new WorkCompletion();
            int warm = Math.max(WARM, 0);
            int sendsOut = 0;
            for (int i = -warm; i < n; i++) {
                long t0 = System.nanoTime();
                id.qp().postSend(s);
                sendsOut++;
                boolean received = false;
                while (!received) {
                    rcq.reqNotify(false);
                    scq.reqNotify(false);
                    boolean any = false;
                    while (rcq.poll(wc)) {
                        check(wc);
                        received = true;
                        any = true;
                    }
                    while (scq.poll(wc)) {
                        check(wc);
                        sendsOut--;
                        any = true;
                    }
                    if (!received && !any) {
                        CompletionQueue cq = cc.getCqEvent(WAIT);
                        if (cq == null) {
                            throw new IllegalStateException("no completion in " + WAIT.toSeconds() + " s");
                        }
                        cq.ackEvents(1);
                    }
                }
                long t1 = System.nanoTime();
                id.qp().postRecv(r);
                while (sendsOut >= CAP.maxSendWr()) { // the SQ is full: wait for the oldest send's ACK
                    if (scq.poll(wc)) {
                        check(wc);
                        sendsOut--;
                    } else {
                        CompletionQueue cq = cc.getCqEvent(WAIT);
                        if (cq == null) {
                            throw new IllegalStateException("no send completion in " + WAIT.toSeconds() + " s");
                        }
                        cq.ackEvents(1);
                        scq.reqNotify(false);
                    }
                }
                if (i >= 0) {
                    rtt[i] = t1 - t0;
                }
            }
            id.disconnect();
            expect(ch, CmEventType.DISCONNECTED);
            id.destroyQp();
            for (CompletionQueue cq; (cq = cc.getCqEvent(Duration.ZERO)) != null; ) {
                cq.ackEvents(1);
            }
            scq.close();
            rcq.close();
            cc.close();
            mr.close();
        }
        id.close();
        return rtt;
    }

    private static void check(WorkCompletion wc) {
        if (!wc.status().name().equals("SUCCESS")) {
            throw new IllegalStateException("completion " + wc);
        }
    }

    // ------------------------------------------------------------------ accept rate

    private static void accept(int c, int rounds) throws Exception {
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
            cmRates[r] = cmAcceptRound(cm, c, new InetSocketAddress(serverIp, port + r), clientIp);
            Map<String, Long> after = counters();
            StringBuilder moved = new StringBuilder();
            after.forEach((k, v) -> {
                long d = v - before.getOrDefault(k, 0L);
                if (d != 0 && (k.contains("drop") || k.contains("retrans") || k.contains("timeout") || k.contains("dup")
                        || k.contains("backlog") || k.contains("DROP"))) {
                    moved.append(' ').append(k).append('+').append(d);
                }
            });
            if (!moved.isEmpty()) {
                System.out.println("  counters:" + moved);
            }
            tcpRates[r] = tcpAcceptRound(c);
            System.out.printf(Locale.ROOT, "%-6d %14.0f %14.0f %8.3f%n", r + 1, cmRates[r], tcpRates[r],
                    cmRates[r] / tcpRates[r]);
        }
        Arrays.sort(cmRates);
        Arrays.sort(tcpRates);
        System.out.printf(Locale.ROOT, "median %14.0f %14.0f %8.3f   load %s%n", cmRates[rounds / 2], tcpRates[rounds / 2],
                cmRates[rounds / 2] / tcpRates[rounds / 2], load());
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
    private static double cmAcceptRound(RdmaCm cm, int c, InetSocketAddress at, InetAddress src) throws Exception {
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
        return rate;
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

    // ------------------------------------------------------------------ holding N connections

    private static void hold(int n, int seconds, InetAddress server, int cmPort) throws Exception {
        RdmaCm cm = RdmaCm.system();
        InetSocketAddress dst = new InetSocketAddress(server, cmPort);
        Snapshot s0 = Snapshot.take();
        // baseline first: N RC QPs with two CQs each, plain verbs, on the device the CM would use
        Context ctx;
        try (CmEventChannel probe = cm.createEventChannel(); CmId id = probe.createId(PortSpace.TCP)) {
            id.resolveAddr(null, dst, Duration.ofSeconds(2));
            expect(probe, CmEventType.ADDR_RESOLVED);
            ctx = id.context().device().open();
        }
        Snapshot b0 = Snapshot.take();
        List<AutoCloseable> verbs = new ArrayList<>();
        ProtectionDomain bpd = ctx.allocPd();
        for (int i = 0; i < n; i++) {
            CompletionQueue scq = ctx.createCq(CAP.maxSendWr(), null, 0);
            CompletionQueue rcq = ctx.createCq(CAP.maxRecvWr(), null, 0);
            QueuePair q = bpd.createQp(new QpInitAttributes().type(QpType.RC).sendCq(scq).recvCq(rcq).cap(CAP));
            verbs.add(q);
            verbs.add(scq);
            verbs.add(rcq);
        }
        Snapshot b1 = Snapshot.take();
        for (AutoCloseable a : verbs) {
            a.close();
        }
        bpd.close();
        ctx.close();

        Snapshot c0 = Snapshot.take();
        List<CmId> ids = new ArrayList<>();
        long t0 = System.nanoTime();
        try (CmEventChannel ch = cm.createEventChannel()) {
            ProtectionDomain pd = null;
            for (int i = 0; i < n; i++) {
                CmId id = ch.createId(PortSpace.TCP);
                ids.add(id);
                id.resolveAddr(null, dst, Duration.ofSeconds(2));
            }
            int up = 0;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(300);
            while (up < n && System.nanoTime() < deadline) {
                CmEvent e = ch.getEvent(Duration.ofMillis(200));
                if (e == null) {
                    continue;
                }
                try (e) {
                    switch (e.type()) {
                        case ADDR_RESOLVED -> e.id().resolveRoute(Duration.ofSeconds(2));
                        case ROUTE_RESOLVED -> {
                            if (pd == null) {
                                pd = e.id().context().allocPd();
                            }
                            e.id().createQp(pd, new QpInitAttributes().type(QpType.RC).cap(CAP));
                            e.id().connect(new ConnParam().retryCount(6).rnrRetryCount(7));
                        }
                        case ESTABLISHED -> up++;
                        default -> throw new IllegalStateException("hold: " + e);
                    }
                }
            }
            if (up < n) {
                throw new IllegalStateException("only " + up + " of " + n + " connections came up");
            }
            double setup = (System.nanoTime() - t0) / 1e9;
            Snapshot c1 = Snapshot.take();
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
            while (System.nanoTime() < end) {
                CmEvent e = ch.getEvent(Duration.ofMillis(500));
                if (e != null) {
                    try (e) {
                        throw new IllegalStateException("an event while holding: " + e);
                    }
                }
            }
            Snapshot c2 = Snapshot.take();
            System.out.printf(Locale.ROOT, "holding %d rdma_cm connections (this side's IDs, QPs and their CQs); set up in"
                    + " %.2f s; load %s%n", n, setup, load());
            System.out.printf(Locale.ROOT, "%-44s %14s %14s %8s%n", "", "heap B/conn", "RSS B/conn", "threads");
            print("cm connections, after set-up", c0, c1, n);
            print("cm connections, " + seconds + " s later (growth)", c1, c2, n);
            print("baseline: RC QP + 2 CQs by verbs, no CM", b0, b1, n);
            System.out.printf(Locale.ROOT, "ratio cm / verbs-only QP (heap): %.2f%n",
                    (double) (c1.heap - c0.heap) / Math.max(1, b1.heap - b0.heap));
            for (CmId id : ids) {
                id.disconnect();
            }
            int down = 0;
            long d2 = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (down < n && System.nanoTime() < d2) {
                CmEvent e = ch.getEvent(Duration.ofMillis(200));
                if (e != null) {
                    try (e) {
                        if (e.type() == CmEventType.DISCONNECTED) {
                            down++;
                        }
                    }
                }
            }
            for (CmId id : ids) {
                id.destroyQp();
                id.close();
            }
            if (pd != null) {
                pd.close();
            }
            System.out.printf(Locale.ROOT, "startup snapshot: heap %d MiB, RSS %d MiB%n", s0.heap >> 20, s0.rss >> 20);
        }
    }

    private static void print(String what, Snapshot a, Snapshot b, int n) {
        System.out.printf(Locale.ROOT, "%-44s %14d %14d %8d%n", what, (b.heap - a.heap) / n, (b.rss - a.rss) / n,
                b.threads - a.threads);
    }

    /** Heap used after GC, resident set size, live threads. */
    private record Snapshot(long heap, long rss, int threads) {
        static Snapshot take() throws IOException {
            for (int i = 0; i < 3; i++) {
                System.gc();
            }
            long heap = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
            long rss = 0;
            for (String l : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (l.startsWith("VmRSS:")) {
                    rss = Long.parseLong(l.replaceAll("\\D", "")) * 1024;
                }
            }
            return new Snapshot(heap, rss, Thread.activeCount());
        }
    }

    // ------------------------------------------------------------------ reporting

    private static long median(long[] v) {
        long[] s = v.clone();
        Arrays.sort(s);
        return s[s.length / 2];
    }

    private static void row(String name, long[] v) {
        long[] s = v.clone();
        Arrays.sort(s);
        System.out.printf(Locale.ROOT, "%-36s p50 %9.1f us   p90 %9.1f us   p99 %9.1f us%n", name, s[s.length / 2] / 1e3,
                s[(int) Math.min(s.length - 1, Math.ceil(s.length * 0.9) - 1)] / 1e3,
                s[(int) Math.min(s.length - 1, Math.ceil(s.length * 0.99) - 1)] / 1e3);
    }

    private static String load() {
        try {
            return Files.readString(Path.of("/proc/loadavg")).trim();
        } catch (IOException e) {
            return "?";
        }
    }
}
