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
import net.jqwik.api.statistics.Statistics;

import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcFlags;
import org.rdma4j.verbs.WcOpcode;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * RC over a lossy link: with up to 5 % each of drops, duplicates, reordering, delays and corruption,
 * on packets cut at the path MTU, random SENDs, RDMA WRITEs, RDMA READs and atomics in both
 * directions are delivered exactly once and in order, and complete correctly. Everything derives
 * from the seed jqwik prints on failure (the link's seed and counters are in the message too).
 *
 * <p>Checked after every run: each send completion (status, opcode, byte_len, wr_id order), each
 * receive completion (opcode, byte_len, immediate data, order) and its data, every byte of both WRITE
 * targets, each READ's data, each atomic's returned original value and the final value of every
 * atomic target (an atomic applied twice would show), nothing extra on any CQ after many more
 * timeouts, both QPs still in RTS. Then each side RDMA READs the whole WRITE target of the other
 * through the same lossy link and finds the model.
 */
class SoftLossyRcPropertiesTest {
    /**
     * How large a run is: this class's tries use {@link #DEFAULT}; {@code SoftLossySlowPropertiesTest}
     * (-Pslow) uses {@link #LONG}.
     *
     * @param maxOps    operations per run, 1..maxOps
     * @param maxSend   longest SEND (a receive slot's size)
     * @param maxRdma   longest RDMA WRITE or READ
     * @param allFaults every fault at once, each with probability 1..5 %, instead of each with 0..5 %
     */
    record Scale(int maxOps, int maxSend, int maxRdma, boolean allFaults) {
        /** The default tier's runs: up to 60 operations of up to 4 KiB (SEND) and 8 KiB (WRITE, READ). */
        static final Scale DEFAULT = new Scale(60, 4096, 8192, false);
        /** -Pslow: up to 200 operations of up to 16 KiB (SEND) and 64 KiB (WRITE, READ), every fault at once. */
        static final Scale LONG = new Scale(200, 16 << 10, 64 << 10, true);
    }

    // Region layout (per side), from the scale (set once, by the constructor or by at(Scale))
    Scale scale;
    final int SRC = 0;
    int SRC_LEN;
    int RECV;
    int SLOT;
    final int SLOTS = 128;
    int WR;
    int WR_LEN;
    int RD;
    int RD_LEN;
    int SINK;
    int SINK_LEN;
    int ATOM;
    final int ATOM_SLOTS = 16;
    int RES;
    int VERIFY;
    /** Bytes of each side's region. */
    int MEM;

    /** Runs of the default size (jqwik's instance for the properties below, and other tests'). */
    SoftLossyRcPropertiesTest() {
        layOut(Scale.DEFAULT);
    }

    /** @return a runner of runs of this size (jqwik allows the test class one constructor only) */
    static SoftLossyRcPropertiesTest at(Scale scale) {
        SoftLossyRcPropertiesTest t = new SoftLossyRcPropertiesTest();
        t.layOut(scale);
        return t;
    }

    private void layOut(Scale s) {
        scale = s;
        SRC_LEN = Math.max(64 << 10, s.maxRdma());
        RECV = SRC_LEN;
        SLOT = s.maxSend();
        WR = RECV + SLOT * SLOTS;
        WR_LEN = Math.max(128 << 10, 4 * s.maxRdma());
        RD = WR + WR_LEN;
        RD_LEN = Math.max(128 << 10, 4 * s.maxRdma());
        SINK = RD + RD_LEN;
        SINK_LEN = Math.max(256 << 10, 16 * s.maxRdma());
        ATOM = SINK + SINK_LEN;
        RES = ATOM + 1024;
        VERIFY = RES + Math.max(4096, 8 * s.maxOps());
        MEM = Math.max(LossyPair.MEM, VERIFY + WR_LEN);
    }

    private static final WrOpcode[] OPS = {WrOpcode.SEND, WrOpcode.SEND_WITH_IMM, WrOpcode.RDMA_WRITE,
        WrOpcode.RDMA_WRITE_WITH_IMM, WrOpcode.RDMA_READ, WrOpcode.ATOMIC_FETCH_AND_ADD, WrOpcode.ATOMIC_CMP_AND_SWP};

    /** One planned operation. */
    private static final class Op {
        int index;
        LossyPair.Side from;
        LossyPair.Side to;
        WrOpcode opcode;
        int len;
        int[][] local; // {offset, length} pieces
        long remoteOff;
        boolean signaled;
        int imm;
        long compareAdd;
        long swap;
        long expectOrig;
        int recvSlot = -1;
        byte[] data;

        @Override
        public String toString() {
            return "#" + index + " " + from.name + "->" + to.name + " " + opcode + " len=" + len + " remote=" + remoteOff
                    + (signaled ? " sig" : "") + (recvSlot >= 0 ? " slot=" + recvSlot : "");
        }
    }

    /** Model of one side's WRITE target and atomic slots. */
    private final class Model {
        final byte[] wr = new byte[WR_LEN];
        final long[] atom = new long[ATOM_SLOTS];
        int nextSlot;
        int sinkUsed;
        int resUsed;
        final List<Op> recvs = new ArrayList<>();
        final List<Op> sends = new ArrayList<>();
    }

    /**
     * Seeds that once failed, kept: -4726346 stalled when an RNR NAK moved a resend (go-back-N to the
     * RNR NAK's PSN) that its budget still counted from its old start (Requester.RESEND_BUDGET). -2 at the
     * -Pslow scale (every fault at once, 256-packet READs at path MTU 256, a 1 ms ACK timeout) livelocked: the
     * peer's resends filled the inbox behind a READ reply paused for its gap, so the re-read that would have moved
     * the reply was dropped, and so were the responses to this side's own requester (OwnerWork.dutyCycle).
     */
    @org.junit.jupiter.api.Test
    void seedsThatOnceFailed() {
        check(-4726346L);
        check(-2L, Scale.LONG);
    }

    @Property(tries = 150)
    void everyOperationHappensExactlyOnceAndInOrder(@ForAll long seed) {
        Statistics.label("retried").collect(check(seed));
    }

    /**
     * One run, everything derived from {@code seed}.
     *
     * @return whether the requesters had to retry
     */
    static boolean check(long seed) {
        return check(seed, Scale.DEFAULT);
    }

    /**
     * One run of the given size, everything derived from {@code seed}.
     *
     * @return whether the requesters had to retry
     */
    static boolean check(long seed, Scale scale) {
        SplittableRandom r = new SplittableRandom(seed);
        double p = 0.05;
        FaultInjectingLink.Faults faults = scale.allFaults()
                ? new FaultInjectingLink.Faults(0.01 + r.nextDouble() * 0.04, 0.01 + r.nextDouble() * 0.04,
                        0.01 + r.nextDouble() * 0.04, 0.01 + r.nextDouble() * 0.04, 0.01 + r.nextDouble() * 0.04,
                        1 + r.nextLong(3_000_000))
                : new FaultInjectingLink.Faults(r.nextDouble() * p, r.nextDouble() * p,
                        r.nextDouble() * p, r.nextDouble() * p, r.nextDouble() * p, 1 + r.nextLong(3_000_000));
        Mtu mtu = new Mtu[] {Mtu.MTU_256, Mtu.MTU_512, Mtu.MTU_1024, Mtu.MTU_4096}[r.nextInt(4)];
        int psnA = r.nextBoolean() ? 0xFF_FFFF - r.nextInt(64) : r.nextInt(1 << 24);
        int psnB = r.nextBoolean() ? 0xFF_FFFF - r.nextInt(64) : r.nextInt(1 << 24);
        int rdAtomic = 1 + r.nextInt(8);
        LossyPair.Config cfg = LossyPair.Config.of(QpType.RC).mtu(mtu).psns(psnA, psnB).rdAtomic(rdAtomic);
        int nOps = 1 + r.nextInt(scale.maxOps());
        boolean lateRecv = r.nextInt(4) == 0;
        SoftLossyRcPropertiesTest t = at(scale);
        try (LossyPair pair = new LossyPair(cfg, seed, faults, 8192, t.MEM)) {
            t.run(pair, r, nOps, lateRecv);
            return pair.a.dev.counter(SoftCounter.COMPLETER_RETRY_ERR)
                    + pair.b.dev.counter(SoftCounter.COMPLETER_RETRY_ERR) > 0;
        }
    }

    void run(LossyPair pair, SplittableRandom r, int nOps, boolean lateRecv) {
        Model ma = new Model();
        Model mb = new Model();
        for (int i = 0; i < WR_LEN; i++) {
            ma.wr[i] = pair.a.mem.get(ValueLayout.JAVA_BYTE, WR + i);
            mb.wr[i] = pair.b.mem.get(ValueLayout.JAVA_BYTE, WR + i);
        }
        for (int i = 0; i < ATOM_SLOTS; i++) {
            ma.atom[i] = pair.a.mem.get(ValueLayout.JAVA_LONG, ATOM + 8L * i);
            mb.atom[i] = pair.b.mem.get(ValueLayout.JAVA_LONG, ATOM + 8L * i);
        }
        List<Op> ops = new ArrayList<>();
        for (int i = 0; i < nOps; i++) {
            boolean ab = r.nextBoolean();
            ops.add(plan(i, ab ? pair.a : pair.b, ab ? pair.b : pair.a, ab ? ma : mb, ab ? mb : ma, r));
        }
        // The last operation of each side is signaled, so every WQE is known to have completed.
        for (LossyPair.Side s : List.of(pair.a, pair.b)) {
            for (int i = ops.size() - 1; i >= 0; i--) {
                if (ops.get(i).from == s) {
                    ops.get(i).signaled = true;
                    break;
                }
            }
        }
        for (Op o : ops) {
            if (o.signaled) {
                (o.from == pair.a ? ma : mb).sends.add(o);
            }
        }
        // Receives (each model's recvs are what its side receives): all at once, or half now and the
        // rest after a few clock steps, with RNR NAKs meanwhile.
        int nowA = lateRecv ? ma.recvs.size() / 2 : ma.recvs.size();
        int nowB = lateRecv ? mb.recvs.size() / 2 : mb.recvs.size();
        postRecvs(pair.a, ma, 0, nowA);
        postRecvs(pair.b, mb, 0, nowB);
        SendWorkRequest wr = new SendWorkRequest(2);
        for (Op o : ops) {
            post(pair, o, wr);
        }
        if (lateRecv) {
            for (int i = 0; i < 3; i++) {
                pair.step();
            }
            postRecvs(pair.a, ma, nowA, ma.recvs.size());
            postRecvs(pair.b, mb, nowB, mb.recvs.size());
        }
        CompletionQueue[] cqs = {pair.a.scq, pair.a.rcq, pair.b.scq, pair.b.rcq};
        int[] want = {ma.sends.size(), ma.recvs.size(), mb.sends.size(), mb.recvs.size()};
        List<List<WorkCompletion>> got = pair.collect(cqs, want, 40_000);
        String ctx = "\n" + pair.describe() + "\noperations:\n  " + String.join("\n  ", ops.stream().map(Op::toString).toList());
        List<WorkCompletion> extra = pair.quiesce(40);
        if (!extra.isEmpty()) {
            throw new AssertionError("completions after every expected one arrived: " + extra + ctx);
        }
        checkSends(ma.sends, got.get(0), ctx);
        checkRecvs(pair.a, ma.recvs, got.get(1), ctx);
        checkSends(mb.sends, got.get(2), ctx);
        checkRecvs(pair.b, mb.recvs, got.get(3), ctx);
        for (Op o : ops) {
            checkResult(o, ctx);
        }
        checkTargets(pair.a, ma, ctx);
        checkTargets(pair.b, mb, ctx);
        for (LossyPair.Side s : List.of(pair.a, pair.b)) {
            if (s.qp.state() != QpState.RTS) {
                throw new AssertionError(s.name + " is in " + s.qp.state() + ctx);
            }
        }
        verifyByRead(pair, ma, mb, ctx);
    }

    private Op plan(int index, LossyPair.Side from, LossyPair.Side to, Model mf, Model mt, SplittableRandom r) {
        Op o = new Op();
        o.index = index;
        o.from = from;
        o.to = to;
        o.opcode = OPS[r.nextInt(OPS.length)];
        o.signaled = r.nextInt(4) != 0;
        o.imm = r.nextInt();
        switch (o.opcode) {
            case SEND, SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM -> {
                boolean send = o.opcode == WrOpcode.SEND || o.opcode == WrOpcode.SEND_WITH_IMM;
                o.len = r.nextInt(4) == 0 ? r.nextInt(8) : r.nextInt(send ? SLOT + 1 : scale.maxRdma() + 1);
                if (o.len > 1 && r.nextBoolean()) {
                    int k = 1 + r.nextInt(o.len - 1);
                    o.local = new int[][] {{SRC + r.nextInt(SRC_LEN - k), k}, {SRC + r.nextInt(SRC_LEN - (o.len - k)), o.len - k}};
                } else {
                    o.local = o.len == 0 ? new int[0][] : new int[][] {{SRC + r.nextInt(SRC_LEN - o.len + 1), o.len}};
                }
                o.data = new byte[o.len];
                int pos = 0;
                for (int[] piece : o.local) {
                    MemorySegment.copy(from.mem, ValueLayout.JAVA_BYTE, piece[0], o.data, pos, piece[1]);
                    pos += piece[1];
                }
                if (!send) {
                    o.remoteOff = WR + r.nextInt(WR_LEN - o.len + 1);
                    System.arraycopy(o.data, 0, mt.wr, (int) o.remoteOff - WR, o.len);
                }
                if (send || o.opcode == WrOpcode.RDMA_WRITE_WITH_IMM) {
                    o.recvSlot = mt.nextSlot++;
                    mt.recvs.add(o);
                }
            }
            case RDMA_READ -> {
                o.len = Math.min(1 + r.nextInt(scale.maxRdma()), SINK_LEN - mf.sinkUsed);
                o.remoteOff = RD + r.nextInt(RD_LEN - o.len + 1);
                o.local = o.len == 0 ? new int[0][] : new int[][] {{SINK + mf.sinkUsed, o.len}};
                mf.sinkUsed += o.len;
            }
            default -> {
                o.len = 8;
                int slot = r.nextInt(ATOM_SLOTS);
                o.remoteOff = ATOM + 8L * slot;
                o.local = new int[][] {{RES + mf.resUsed, 8}};
                mf.resUsed += 8;
                long cur = mt.atom[slot];
                o.expectOrig = cur;
                if (o.opcode == WrOpcode.ATOMIC_FETCH_AND_ADD) {
                    o.compareAdd = r.nextLong();
                    mt.atom[slot] = cur + o.compareAdd;
                } else {
                    o.compareAdd = r.nextBoolean() ? cur : r.nextLong();
                    o.swap = r.nextLong();
                    if (cur == o.compareAdd) {
                        mt.atom[slot] = o.swap;
                    }
                }
            }
        }
        return o;
    }

    private void postRecvs(LossyPair.Side s, Model m, int from, int to) {
        RecvWorkRequest rr = new RecvWorkRequest(1);
        for (int i = from; i < to; i++) {
            Op o = m.recvs.get(i);
            rr.wrId(1000 + o.recvSlot).singleSge(s.addr(RECV + (long) SLOT * o.recvSlot), SLOT, s.mr.lkey());
            if (!s.qp.postRecv(rr)) {
                throw new AssertionError("postRecv refused: " + rr.postError());
            }
        }
    }

    private void post(LossyPair pair, Op o, SendWorkRequest wr) {
        wr.clear().wrId(o.index).opcode(o.opcode).sendFlags(o.signaled ? SendFlags.SIGNALED : 0).numSge(o.local.length);
        for (int i = 0; i < o.local.length; i++) {
            wr.sge(i).set(o.from.addr(o.local[i][0]), o.local[i][1], o.from.mr.lkey());
        }
        if (o.opcode.hasImm()) {
            wr.immData(o.imm);
        }
        if (o.opcode != WrOpcode.SEND && o.opcode != WrOpcode.SEND_WITH_IMM) {
            wr.remoteAddr(o.to.addr(o.remoteOff)).rkey(o.to.mr.rkey());
        }
        if (o.opcode.isAtomic()) {
            wr.compareAdd(o.compareAdd).swap(o.swap);
        }
        if (!o.from.qp.postSend(wr)) {
            throw new AssertionError("postSend refused " + o + ": " + wr.postError() + "\n" + pair.describe());
        }
    }

    private void checkSends(List<Op> want, List<WorkCompletion> got, String ctx) {
        for (int i = 0; i < want.size(); i++) {
            Op o = want.get(i);
            WorkCompletion wc = got.get(i);
            int byteLen = o.opcode.isAtomic() ? 8 : o.len;
            if (wc.wrId() != o.index || wc.status() != WcStatus.SUCCESS || wc.opcode() != o.opcode.wcOpcode()
                    || wc.byteLen() != byteLen) {
                throw new AssertionError("send completion " + i + " is " + wc + ", expected " + o + " SUCCESS "
                        + o.opcode.wcOpcode() + " byte_len " + byteLen + ctx);
            }
        }
    }

    private void checkRecvs(LossyPair.Side s, List<Op> want, List<WorkCompletion> got, String ctx) {
        for (int i = 0; i < want.size(); i++) {
            Op o = want.get(i);
            WorkCompletion wc = got.get(i);
            boolean writeImm = o.opcode == WrOpcode.RDMA_WRITE_WITH_IMM;
            WcOpcode op = writeImm ? WcOpcode.RECV_RDMA_WITH_IMM : WcOpcode.RECV;
            boolean imm = o.opcode.hasImm();
            if (wc.wrId() != 1000 + o.recvSlot || wc.status() != WcStatus.SUCCESS || wc.opcode() != op
                    || wc.byteLen() != o.len || ((wc.wcFlags() & WcFlags.WITH_IMM) != 0) != imm
                    || imm && wc.immData() != o.imm) {
                throw new AssertionError(s.name + " receive completion " + i + " is " + wc + ", expected " + o + ctx);
            }
            if (!writeImm) {
                byte[] in = new byte[o.len];
                MemorySegment.copy(s.mem, ValueLayout.JAVA_BYTE, RECV + (long) SLOT * o.recvSlot, in, 0, o.len);
                if (!Arrays.equals(in, o.data)) {
                    throw new AssertionError(s.name + " received wrong data for " + o + ctx);
                }
            }
        }
    }

    private void checkResult(Op o, String ctx) {
        if (o.opcode == WrOpcode.RDMA_READ) {
            for (int i = 0; i < o.len; i++) {
                byte want = o.to.mem.get(ValueLayout.JAVA_BYTE, o.remoteOff + i);
                byte got = o.from.mem.get(ValueLayout.JAVA_BYTE, o.local[0][0] + i);
                if (want != got) {
                    throw new AssertionError("READ " + o + " byte " + i + ": " + got + " instead of " + want + ctx);
                }
            }
        } else if (o.opcode.isAtomic()) {
            long got = o.from.mem.get(ValueLayout.JAVA_LONG_UNALIGNED, o.local[0][0]);
            if (got != o.expectOrig) {
                throw new AssertionError(o + " returned 0x" + Long.toHexString(got) + " instead of 0x"
                        + Long.toHexString(o.expectOrig) + ctx);
            }
        }
    }

    private void checkTargets(LossyPair.Side s, Model m, String ctx) {
        for (int i = 0; i < WR_LEN; i++) {
            byte got = s.mem.get(ValueLayout.JAVA_BYTE, WR + i);
            if (got != m.wr[i]) {
                throw new AssertionError(s.name + " WRITE target byte " + i + " is " + got + ", model " + m.wr[i] + ctx);
            }
        }
        for (int i = 0; i < ATOM_SLOTS; i++) {
            long got = s.mem.get(ValueLayout.JAVA_LONG, ATOM + 8L * i);
            if (got != m.atom[i]) {
                throw new AssertionError(s.name + " atomic slot " + i + " is 0x" + Long.toHexString(got) + ", model 0x"
                        + Long.toHexString(m.atom[i]) + " (applied twice or not at all?)" + ctx);
            }
        }
    }

    /** Each side reads the other's WRITE target back over the lossy link. */
    private void verifyByRead(LossyPair pair, Model ma, Model mb, String ctx) {
        SendWorkRequest wr = new SendWorkRequest(1);
        for (LossyPair.Side s : List.of(pair.a, pair.b)) {
            LossyPair.Side peer = s == pair.a ? pair.b : pair.a;
            wr.clear().wrId(77).opcode(WrOpcode.RDMA_READ).sendFlags(SendFlags.SIGNALED)
                    .singleSge(s.addr(VERIFY), WR_LEN, s.mr.lkey()).remoteAddr(peer.addr(WR)).rkey(peer.mr.rkey());
            if (!s.qp.postSend(wr)) {
                throw new AssertionError("postSend refused: " + wr.postError());
            }
        }
        List<List<WorkCompletion>> got = pair.collect(new CompletionQueue[] {pair.a.scq, pair.b.scq}, new int[] {1, 1},
                40_000);
        for (int k = 0; k < 2; k++) {
            LossyPair.Side s = k == 0 ? pair.a : pair.b;
            byte[] model = k == 0 ? mb.wr : ma.wr;
            WorkCompletion wc = got.get(k).getFirst();
            if (wc.status() != WcStatus.SUCCESS || wc.byteLen() != WR_LEN) {
                throw new AssertionError(s.name + " verification READ: " + wc + ctx);
            }
            for (int i = 0; i < WR_LEN; i++) {
                if (s.mem.get(ValueLayout.JAVA_BYTE, VERIFY + i) != model[i]) {
                    throw new AssertionError(s.name + " read back a wrong byte " + i + " of the peer's WRITE target" + ctx);
                }
            }
        }
    }
}
