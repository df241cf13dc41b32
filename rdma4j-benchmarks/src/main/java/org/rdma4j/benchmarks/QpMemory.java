// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.benchmarks;

import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.util.EnumSet;
import java.util.Locale;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.Verbs;

/**
 * Memory per RC QP: creates N connected QP pairs between soft0 and soft1 with ManyQpBench's capabilities
 * (SQ 128, RQ 1, one SGE, 64 inline bytes) and prints the heap they hold (after a full GC, before and after)
 * and the native memory the JVM's Native Memory Tracking attributes to other allocations (run with
 * {@code -XX:NativeMemoryTracking=summary} for the native figure; without it only the heap is printed).
 *
 * <pre>java -XX:NativeMemoryTracking=summary -cp rdma4j-benchmarks/target/benchmarks.jar
 *     org.rdma4j.benchmarks.QpMemory 1000</pre>
 */
public final class QpMemory {
    private QpMemory() {
    }

    /**
     * @param args the number of QP pairs (default 1000)
     * @throws Exception on failure
     */
    public static void main(String[] args) throws Exception {
        int n = args.length > 0 ? Integer.parseInt(args[0]) : 1000;
        MemoryMXBean mx = ManagementFactory.getMemoryMXBean();
        try (Context a = Verbs.device("soft0").open(); Context b = Verbs.device("soft1").open();
             ProtectionDomain pdA = a.allocPd(); ProtectionDomain pdB = b.allocPd();
             CompletionQueue cqA = a.createCq(4096, null, 0); CompletionQueue cqB = b.createCq(4096, null, 0)) {
            // one pair first, so class loading and the devices' tables are not counted
            QueuePair[] warm = pair(pdA, pdB, cqA, cqB, a, b);
            long heap0 = heap(mx);
            long native0 = nativeOther();
            QueuePair[][] qps = new QueuePair[n][];
            for (int i = 0; i < n; i++) {
                qps[i] = pair(pdA, pdB, cqA, cqB, a, b);
            }
            long heap1 = heap(mx);
            long native1 = nativeOther();
            System.out.printf(Locale.ROOT, "qp_pairs=%d heap_per_qp=%d native_per_qp=%s%n", n,
                    (heap1 - heap0) / (2L * n), native0 < 0 ? "n/a (run with -XX:NativeMemoryTracking=summary)"
                            : Long.toString((native1 - native0) / (2L * n)));
            for (QueuePair[] p : qps) {
                p[0].close();
                p[1].close();
            }
            warm[0].close();
            warm[1].close();
        }
    }

    private static QueuePair[] pair(ProtectionDomain pdA, ProtectionDomain pdB, CompletionQueue cqA,
                                    CompletionQueue cqB, Context a, Context b) {
        QpCapabilities cap = new QpCapabilities(ManyQpBench.SQ_DEPTH, 1, 1, 1, 64);
        QueuePair x = pdA.createQp(new QpInitAttributes().type(QpType.RC).sendCq(cqA).recvCq(cqA).cap(cap));
        QueuePair y = pdB.createQp(new QpInitAttributes().type(QpType.RC).sendCq(cqB).recvCq(cqB).cap(cap));
        connect(x, y.qpNum(), b);
        connect(y, x.qpNum(), a);
        return new QueuePair[] {x, y};
    }

    private static void connect(QueuePair qp, int peer, Context peerCtx) {
        var access = EnumSet.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE);
        qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1).accessFlags(access));
        qp.modify(new QpAttributes().state(QpState.RTR).pathMtu(Mtu.MTU_1024).destQpNum(peer).rqPsn(0)
                .maxDestRdAtomic(1).minRnrTimer(12).av(new AhAttributes().dgid(peerCtx.queryGid(1, 0)).sgidIndex(0)));
        qp.modify(new QpAttributes().state(QpState.RTS).sqPsn(0).timeout(14).retryCnt(7).rnrRetry(7).maxRdAtomic(1));
    }

    private static long heap(MemoryMXBean mx) throws InterruptedException {
        for (int i = 0; i < 3; i++) {
            System.gc();
            Thread.sleep(50);
        }
        return mx.getHeapMemoryUsage().getUsed();
    }

    /** @return NMT's "Other" committed bytes (where Arena.allocate goes), or -1 without NMT */
    private static long nativeOther() {
        try {
            var server = ManagementFactory.getPlatformMBeanServer();
            var name = new javax.management.ObjectName("com.sun.management:type=DiagnosticCommand");
            String out = (String) server.invoke(name, "vmNativeMemory", new Object[] {new String[] {"summary"}},
                    new String[] {String[].class.getName()});
            for (String line : out.split("\n")) {
                String t = line.trim();
                if (t.startsWith("-") && t.contains("Other (reserved=")) {
                    int c = t.indexOf("committed=");
                    String v = t.substring(c + "committed=".length(), t.indexOf("KB", c));
                    return Long.parseLong(v.trim()) * 1024;
                }
            }
            return -1;
        } catch (Exception e) {
            return -1;
        }
    }
}
