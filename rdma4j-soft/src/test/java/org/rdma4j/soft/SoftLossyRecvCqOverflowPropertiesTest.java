// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.statistics.Statistics;

import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * RC SENDs into a receive CQ too small for them, over a lossy link (up to 5 % each of drops, duplicates,
 * reordering, delays and corruption, packets cut at the path MTU): the receiver polls a random part of
 * its completions between bursts of SENDs, so its CQ fills up at random points, and a receive completion
 * that does not fit moves its QP to ERR (rxe RESPST_ERR_CQ_OVERFLOW). Whatever happens, a SEND that
 * completed SUCCESS at the sender is on the receiver's CQ with its data: the responder does not
 * acknowledge a message whose completion it lost (rxe do_complete), so the sender sees RETRY_EXC_ERR for
 * it instead. Also checked: the receiver's successful completions are in order, each once, with the
 * right length and bytes. Everything derives from the seed jqwik prints on failure.
 */
class SoftLossyRecvCqOverflowPropertiesTest {
    private static final int SLOT = 2048;
    private static final long SRC = 1 << 20;

    @Property(tries = 120)
    void noMessageThatCompletedSuccessAtTheSenderIsMissingAtTheReceiver(@ForAll long seed) {
        Statistics.label("receive CQ overflowed").collect(check(seed));
    }

    /** @return whether the receiver's CQ overflowed in this run */
    static boolean check(long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        double p = 0.05;
        FaultInjectingLink.Faults faults = new FaultInjectingLink.Faults(r.nextDouble() * p, r.nextDouble() * p,
                r.nextDouble() * p, r.nextDouble() * p, r.nextDouble() * p, 1 + r.nextLong(3_000_000));
        Mtu mtu = new Mtu[] {Mtu.MTU_256, Mtu.MTU_1024, Mtu.MTU_4096}[r.nextInt(3)];
        int n = 4 + r.nextInt(60);
        int cqe = 1 + r.nextInt(n - 1);
        // a finite retry_cnt: once the receiver's QP is in ERR nothing answers, and 7 would retry forever
        LossyPair.Config cfg = LossyPair.Config.of(QpType.RC).mtu(mtu).psns(r.nextInt(1 << 24), r.nextInt(1 << 24))
                .retries(8, 3, 7);
        try (LossyPair pair = new LossyPair(cfg, seed, faults, cqe)) {
            run(pair, r, n);
            return pair.b.dev.counter(SoftCounter.CQ_OVERFLOW) > 0;
        }
    }

    private static void run(LossyPair pair, SplittableRandom r, int n) {
        int[] len = new int[n];
        long[] src = new long[n];
        RecvWorkRequest rr = new RecvWorkRequest(1);
        for (int k = 0; k < n; k++) {
            len[k] = r.nextInt(4) == 0 ? r.nextInt(8) : r.nextInt(SLOT + 1);
            src[k] = SRC + r.nextInt(64 << 10);
            rr.wrId(1000 + k).singleSge(pair.b.addr((long) SLOT * k), SLOT, pair.b.mr.lkey());
            if (!pair.b.qp.postRecv(rr)) {
                throw new AssertionError("postRecv refused: " + rr.postError());
            }
        }
        List<WorkCompletion> sent = new ArrayList<>();
        List<WorkCompletion> received = new ArrayList<>();
        WorkCompletion wc = new WorkCompletion();
        SendWorkRequest wr = new SendWorkRequest(1);
        StringBuilder plan = new StringBuilder();
        for (int k = 0; k < n; ) {
            int burst = Math.min(n - k, 1 + r.nextInt(8));
            plan.append(" send ").append(k).append("..").append(k + burst - 1);
            for (int end = k + burst; k < end; k++) {
                wr.clear().wrId(k).opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED).numSge(len[k] == 0 ? 0 : 1);
                if (len[k] > 0) {
                    wr.sge(0).set(pair.a.addr(src[k]), len[k], pair.a.mr.lkey());
                }
                if (!pair.a.qp.postSend(wr)) {
                    throw new AssertionError("postSend refused: " + wr.postError() + "\n" + pair.describe());
                }
            }
            int steps = r.nextInt(4);
            for (int i = 0; i < steps; i++) {
                pair.step();
            }
            int polls = r.nextInt(4);
            plan.append(", ").append(steps).append(" steps, poll ").append(polls);
            for (int i = 0; i < polls && pair.b.rcq.poll(wc); i++) {
                received.add(new WorkCompletion().copyFrom(wc));
            }
        }
        // every send completes: SUCCESS, or RETRY_EXC_ERR and flushes once the receiver is in ERR
        sent.addAll(pair.collect(new org.rdma4j.verbs.CompletionQueue[] {pair.a.scq}, new int[] {n}, 40_000).get(0));
        for (WorkCompletion extra : pair.quiesce(20)) {
            if (extra.qpNum() == pair.b.qp.qpNum()) {
                received.add(extra);
            } else {
                throw new AssertionError("a send completion beyond the " + n + " posted: " + extra + "\n"
                        + pair.describe());
            }
        }
        String ctx = "\n" + pair.describe() + "\nreceive CQ of " + pair.b.rcq.capacity() + ";" + plan
                + "\nsent: " + sent + "\nreceived: " + received;
        Map<Long, WorkCompletion> ok = new HashMap<>();
        long last = -1;
        for (WorkCompletion w : received) {
            if (w.status() != WcStatus.SUCCESS) {
                continue;
            }
            int k = (int) (w.wrId() - 1000);
            if (k <= last || k >= n) {
                throw new AssertionError("receive completion out of order or twice: " + w + ctx);
            }
            last = k;
            if (w.byteLen() != len[k]) {
                throw new AssertionError("message " + k + " received " + w.byteLen() + " bytes, sent " + len[k] + ctx);
            }
            byte[] want = new byte[len[k]];
            byte[] got = new byte[len[k]];
            MemorySegment.copy(pair.a.mem, ValueLayout.JAVA_BYTE, src[k], want, 0, len[k]);
            MemorySegment.copy(pair.b.mem, ValueLayout.JAVA_BYTE, (long) SLOT * k, got, 0, len[k]);
            if (!Arrays.equals(want, got)) {
                throw new AssertionError("message " + k + " arrived with other bytes" + ctx);
            }
            ok.put(w.wrId(), w);
        }
        for (WorkCompletion s : sent) {
            if (s.status() == WcStatus.SUCCESS && !ok.containsKey(1000 + s.wrId())) {
                throw new AssertionError("message " + s.wrId() + " completed SUCCESS at the sender but is not on"
                        + " the receiver's CQ" + ctx);
            }
        }
    }
}
