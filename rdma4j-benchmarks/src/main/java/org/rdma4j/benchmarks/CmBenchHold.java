// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.benchmarks;

import static org.rdma4j.benchmarks.CmBench.CAP;
import static org.rdma4j.benchmarks.CmBench.expect;
import static org.rdma4j.benchmarks.CmBench.load;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * {@code CmBench hold N SECONDS SERVER_IP CM_PORT}: what N held connections cost (heap, RSS, threads), beside
 * N RC QPs with their CQs made by plain verbs.
 */
final class CmBenchHold {
    private CmBenchHold() {
    }

    static void hold(int n, int seconds, InetAddress server, int cmPort) throws Exception {
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

}
