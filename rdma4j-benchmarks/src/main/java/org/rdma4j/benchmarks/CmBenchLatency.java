// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.benchmarks;

import static org.rdma4j.benchmarks.CmBench.CAP;
import static org.rdma4j.benchmarks.CmBench.COLD;
import static org.rdma4j.benchmarks.CmBench.ECHO;
import static org.rdma4j.benchmarks.CmBench.WAIT;
import static org.rdma4j.benchmarks.CmBench.WARM;
import static org.rdma4j.benchmarks.CmBench.check;
import static org.rdma4j.benchmarks.CmBench.expect;
import static org.rdma4j.benchmarks.CmBench.load;
import static org.rdma4j.benchmarks.CmBench.median;
import static org.rdma4j.benchmarks.CmBench.row;

import java.lang.foreign.Arena;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.time.Duration;
import java.util.EnumSet;
import java.util.Locale;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * {@code CmBench latency N SERVER_IP CM_PORT TCP_PORT}: N rdma_cm connect + disconnect cycles to a
 * {@code serve} process, per step, beside TCP connect + close and the SEND round trip, in the same run.
 */
final class CmBenchLatency {
    private CmBenchLatency() {
    }

    static void latency(int n, InetAddress server, int cmPort, int tcpPort) throws Exception {
        RdmaCm cm = RdmaCm.system();
        InetSocketAddress dst = new InetSocketAddress(server, cmPort);
        int warm = Math.max(WARM, 0);
        long[] resolve = new long[n];
        long[] qp = new long[n];
        long[] connect = new long[n];
        long[] disconnect = new long[n];
        long[] connDisc = new long[n];
        long[] total = new long[n];
        long[] tcp = new long[n];
        long[] cold = new long[Math.min(COLD, warm)];
        try (CmEventChannel ch = cm.createEventChannel()) {
            ProtectionDomain pd = null;
            long[] gcAtStart = null;
            for (int i = -warm; i < n; i++) {
                if (i == 0) {
                    gcAtStart = gc();
                }
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
                    connDisc[i] = t4 - t2;
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
            long[] gcAtEnd = gc();
            long[] rtt = pingRtt(ch, dst, pd, n);
            System.out.printf(Locale.ROOT, "cm connect+disconnect cycles: %d (after %d warm-up), load %s%n", n, warm, load());
            row("total (create..destroy)", total);
            row("  resolve addr+route", resolve);
            row("  create qp", qp);
            row("  connect (REQ..ESTABLISHED)", connect);
            row("  disconnect (DREQ..DISCONNECTED)", disconnect);
            row("  connect + disconnect (REQ..DISC.)", connDisc);
            if (cold.length > 0) {
                row("  connect, first " + cold.length + " of a new process", cold);
            }
            if (gcAtStart != null) {
                System.out.printf(Locale.ROOT, "  this process's GC during the measured cycles: %d collections, %d ms"
                        + " (a pause lands in at most that many cycles)%n", gcAtEnd[0] - gcAtStart[0],
                        gcAtEnd[1] - gcAtStart[1]);
            }
            row("baseline: tcp connect+close", tcp);
            row("baseline: 8-byte SEND round trip", rtt);
            System.out.printf(Locale.ROOT, "ratio total / tcp connect+close (medians): %.2f%n",
                    (double) median(total) / median(tcp));
            System.out.printf(Locale.ROOT, "ratio connect + disconnect / tcp connect+close (medians): %.2f%n",
                    (double) median(connDisc) / median(tcp));
            System.out.printf(Locale.ROOT, "ratio connect / SEND round trip (medians): %.2f%n",
                    (double) median(connect) / median(rtt));
            if (pd != null) {
                pd.close();
            }
        }
    }

    /** {@return the collections and the milliseconds spent collecting so far, over every collector} */
    private static long[] gc() {
        long count = 0;
        long ms = 0;
        for (GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans()) {
            count += Math.max(0, b.getCollectionCount());
            ms += Math.max(0, b.getCollectionTime());
        }
        return new long[] {count, ms};
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
}
