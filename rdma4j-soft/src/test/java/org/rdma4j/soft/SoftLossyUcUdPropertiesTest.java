// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.statistics.Statistics;

import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * UC and UD over a lossy link (drops and corruption up to 5 % each, messages cut at the path MTU on
 * UC): a lost message is simply lost. Every message that arrives arrives whole, with the right
 * length and bytes, in order and once (a UC message missing a segment is never delivered in part:
 * rxe drops the rest of a message after a gap and starts again at the next FIRST/ONLY); without any
 * loss every message arrives; the sender completes every WQE with SUCCESS; corruption is counted as
 * ICRC errors; nothing hangs: with the faults off, a last message arrives and both QPs stay in RTS.
 */
class SoftLossyUcUdPropertiesTest {
    private static final int SLOT = 4096;
    private static final int RECV = 1 << 20;

    @Property(tries = 100)
    void lostMessagesAreSimplyLost(@ForAll long seed, @ForAll("types") QpType type, @ForAll @IntRange(min = 1, max = 80) int n) {
        int delivered = check(seed, type, n);
        Statistics.label("delivered").collect(delivered == n ? "all" : delivered == 0 ? "none" : "some");
    }

    /**
     * One run of {@code n} messages, everything derived from {@code seed} (also run at length by
     * {@code SoftLossySlowPropertiesTest}).
     *
     * @return how many messages arrived
     */
    static int check(long seed, QpType type, int n) {
        SplittableRandom r = new SplittableRandom(seed);
        FaultInjectingLink.Faults faults = new FaultInjectingLink.Faults(r.nextDouble() * 0.05, 0, 0, 0,
                r.nextDouble() * 0.05, 1);
        LossyPair.Config cfg = LossyPair.Config.of(type).mtu(Mtu.MTU_256).psns(0xFF_FFFF - r.nextInt(40), 7);
        try (LossyPair pair = new LossyPair(cfg, seed, faults)) {
            return run(pair, r, n);
        }
    }

    @net.jqwik.api.Provide
    net.jqwik.api.Arbitrary<QpType> types() {
        return net.jqwik.api.Arbitraries.of(QpType.UC, QpType.UD);
    }

    private static int run(LossyPair pair, SplittableRandom r, int n) {
        boolean ud = pair.cfg.type() == QpType.UD;
        int grh = ud ? Responder.GRH_BYTES : 0;
        int maxLen = ud ? 1024 : 2500; // UD: within the 4096 active MTU, one packet
        LossyPair.Side a = pair.a;
        LossyPair.Side b = pair.b;
        RecvWorkRequest rr = new RecvWorkRequest(1);
        for (int i = 0; i <= n; i++) {
            rr.wrId(i).singleSge(b.addr(RECV + (long) SLOT * i), SLOT, b.mr.lkey());
            if (!b.qp.postRecv(rr)) {
                throw new AssertionError("postRecv: " + rr.postError());
            }
        }
        int[] len = new int[n + 1];
        int[] off = new int[n + 1];
        SendWorkRequest wr = new SendWorkRequest(1);
        for (int i = 0; i <= n; i++) {
            if (i == n) {
                pair.link.faults(FaultInjectingLink.Faults.NONE); // the last message must get through
            }
            len[i] = 4 + r.nextInt(maxLen - 3);
            off[i] = SLOT * i + r.nextInt(SLOT - len[i]); // sources do not overlap
            a.mem.set(ValueLayout.JAVA_INT_UNALIGNED, off[i], i); // the message says which it is
            wr.clear().wrId(i).opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                    .singleSge(a.addr(off[i]), len[i], a.mr.lkey());
            if (ud) {
                wr.ah(a.ahToPeer).remoteQpn(b.qp.qpNum()).remoteQkey(LossyPair.QKEY);
            }
            if (!a.qp.postSend(wr)) {
                throw new AssertionError("postSend: " + wr.postError());
            }
        }
        for (int i = 0; i < 8; i++) {
            pair.step();
        }
        List<WorkCompletion> sends = drain(a.scq);
        List<WorkCompletion> recvs = drain(b.rcq);
        String ctx = "\n" + pair.describe();
        if (sends.size() != n + 1) {
            throw new AssertionError(sends.size() + " send completions for " + (n + 1) + " sends" + ctx);
        }
        for (int i = 0; i <= n; i++) {
            WorkCompletion wc = sends.get(i);
            if (wc.wrId() != i || wc.status() != WcStatus.SUCCESS) {
                throw new AssertionError("send completion " + i + ": " + wc + ctx);
            }
        }
        int last = -1;
        for (int k = 0; k < recvs.size(); k++) {
            WorkCompletion wc = recvs.get(k);
            if (wc.status() != WcStatus.SUCCESS || wc.wrId() != k) {
                throw new AssertionError("receive completion " + k + ": " + wc + ctx);
            }
            long at = RECV + (long) SLOT * k + grh;
            int id = b.mem.get(ValueLayout.JAVA_INT_UNALIGNED, at);
            if (id <= last || id > n) {
                throw new AssertionError("receive " + k + " holds message " + id + " after " + last + ctx);
            }
            last = id;
            if (wc.byteLen() != len[id] + grh) {
                throw new AssertionError("message " + id + " arrived with byte_len " + wc.byteLen() + ", sent "
                        + len[id] + ctx);
            }
            byte[] want = new byte[len[id]];
            byte[] got = new byte[len[id]];
            MemorySegment.copy(a.mem, ValueLayout.JAVA_BYTE, off[id], want, 0, len[id]);
            MemorySegment.copy(b.mem, ValueLayout.JAVA_BYTE, at, got, 0, len[id]);
            if (!Arrays.equals(want, got)) {
                throw new AssertionError("message " + id + " arrived with wrong bytes" + ctx);
            }
        }
        if (last != n) {
            throw new AssertionError("the message sent with the faults off did not arrive" + ctx);
        }
        long lost = pair.link.count(FaultInjectingLink.Fault.DROPPED) + pair.link.count(FaultInjectingLink.Fault.CORRUPTED);
        if (lost == 0 && recvs.size() != n + 1) {
            throw new AssertionError("nothing lost, yet " + recvs.size() + " of " + (n + 1) + " arrived" + ctx);
        }
        if (b.dev.counter(SoftCounter.ICRC_ERROR) + a.dev.counter(SoftCounter.ICRC_ERROR)
                != pair.link.count(FaultInjectingLink.Fault.CORRUPTED)) {
            throw new AssertionError("corrupted packets not counted as ICRC errors" + ctx);
        }
        for (LossyPair.Side s : List.of(a, b)) {
            if (s.qp.state() != QpState.RTS) {
                throw new AssertionError(s.name + " is in " + s.qp.state() + ctx);
            }
        }
        return recvs.size() - 1;
    }

    private static List<WorkCompletion> drain(org.rdma4j.verbs.CompletionQueue cq) {
        List<WorkCompletion> out = new ArrayList<>();
        WorkCompletion wc = new WorkCompletion();
        for (int i = 0; i < 10_000 && cq.poll(wc); i++) {
            out.add(new WorkCompletion().copyFrom(wc));
        }
        return out;
    }
}
