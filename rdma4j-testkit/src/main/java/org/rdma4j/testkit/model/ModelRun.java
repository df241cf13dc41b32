// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit.model;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.function.Supplier;

import org.rdma4j.testkit.CmConnector;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.testkit.model.AbstractRandomOpsProperties.BadGene;
import org.rdma4j.testkit.model.AbstractRandomOpsProperties.OpGene;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcOpcode;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * One execution of a random operation sequence between two devices, checked against the byte[] model
 * after every batch: completions (status, opcode, byte_len, immediate data, wr_id order) and both
 * regions byte for byte.
 */
final class ModelRun {
    /** Most operations posted before the completions are checked. */
    static final int MAX_BATCH = 16;

    final QpType type;
    private final Fabric fabric;
    final ModelSide a;
    final ModelSide b;
    final int mtu;
    final int rdAtomic;
    final ByteOrder atomicOrder;
    final long timeoutNs;
    final List<PlannedOp> done = new ArrayList<>();
    /**
     * Whether a send CQ's completions are matched by wr_id rather than in post order: set for a device that
     * completes an RDMA READ after the WRITEs and SENDs posted behind it (siw: those complete once TCP has
     * them, the READ when its response arrives). Each request must still complete exactly once, as modelled;
     * the memory check then waits for an unsignaled READ's data as it does on UC, and every request but a
     * READ is fenced (a READ may otherwise see a later WRITE's data, RFC 5040).
     */
    boolean sendCompletionsByWrId;
    private final SendWorkRequest wr = new SendWorkRequest(4);
    private MemoryRegion restricted;
    private int staleRkey;
    private long staleAddr;
    private int batchNo;
    private int batchStart;

    /**
     * @param mtuBytes path MTU wanted for RC/UC (lowered to the ports' active MTU); UD uses the active MTU
     * @param rdAtomic RDMA READ/atomic depth wanted (lowered to what the devices allow)
     */
    ModelRun(Fabric fabric, QpType type, long seed, int psnA, int psnB, int mtuBytes, int rdAtomic,
             ByteOrder atomicOrder, long timeoutNs, Closer closer) {
        if (fabric.deviceCount() < 2) {
            throw new IllegalStateException("the fabric needs two devices, has " + fabric.deviceCount());
        }
        this.type = type;
        this.atomicOrder = atomicOrder;
        this.timeoutNs = timeoutNs;
        this.fabric = fabric;
        a = new ModelSide("A", fabric, 0, type, seed, closer);
        b = new ModelSide("B", fabric, 1, type, ~seed, closer);
        Mtu pathMtu = a.ctx.queryPort(Wiring.PORT).activeMtu();
        Mtu other = b.ctx.queryPort(Wiring.PORT).activeMtu();
        if (other.bytes() < pathMtu.bytes()) {
            pathMtu = other;
        }
        if (type != QpType.UD && mtuBytes < pathMtu.bytes()) {
            pathMtu = Mtu.ofBytes(mtuBytes);
        }
        mtu = pathMtu.bytes();
        this.rdAtomic = Math.max(1, Math.min(rdAtomic, Wiring.rdAtomic(a.ctx, b.ctx)));
        psnA &= 0xFF_FFFF;
        psnB &= 0xFF_FFFF;
        a.createQp(ProtectionDomain::createQp, closer);
        if (fabric.cm() != null && type == QpType.RC) {
            // iWARP: the CM connects the pair, B's QP made by the passive CM ID (CmConnector)
            CmConnector.connect(fabric, a.qp, this.rdAtomic, id -> {
                b.createQp(id::createQp, closer);
                return b.qp;
            }, closer::add);
        } else if (type == QpType.UD) {
            b.createQp(ProtectionDomain::createQp, closer);
            Wiring.activateUd(a.qp, psnA);
            Wiring.activateUd(b.qp, psnB);
            a.ahToPeer = closer.add(a.pd.createAh(Wiring.addressOf(b.ctx)));
            b.ahToPeer = closer.add(b.pd.createAh(Wiring.addressOf(a.ctx)));
        } else {
            b.createQp(ProtectionDomain::createQp, closer);
            Wiring.connect(a.qp, b.qp, b.ctx, pathMtu, psnA, psnB, this.rdAtomic);
            Wiring.connect(b.qp, a.qp, a.ctx, pathMtu, psnB, psnA, this.rdAtomic);
        }
        // Runs first at close: objects with unacknowledged events cannot be destroyed.
        closer.add(() -> {
            Wiring.drainAsyncEvents(a.ctx);
            Wiring.drainAsyncEvents(b.ctx);
        });
        a.postFreeSlots();
        b.postFreeSlots();
    }

    /** Adds B's region without remote access and a deregistered R_Key, for the bad operations. */
    void prepareBadTargets(Closer closer) {
        Arena arena = closer.add(fabric.bufferArena());
        MemorySegment seg = arena.allocate(4096, 4096);
        restricted = closer.add(b.pd.regMr(seg, AccessFlag.of(AccessFlag.LOCAL_WRITE)));
        MemorySegment staleSeg = arena.allocate(4096, 4096);
        try (MemoryRegion stale = b.pd.regMr(staleSeg, AccessFlag.of(AccessFlag.LOCAL_WRITE,
                AccessFlag.REMOTE_WRITE, AccessFlag.REMOTE_READ, AccessFlag.REMOTE_ATOMIC))) {
            staleRkey = stale.rkey();
            staleAddr = stale.address();
        }
    }

    // ------------------------------------------------------------------------------------------ planning

    /** Resolves a generated operation against this run. */
    PlannedOp plan(OpGene g, int index, boolean forwardOnly) {
        boolean reverse = g.reverse() && !forwardOnly;
        ModelSide from = reverse ? b : a;
        ModelSide to = reverse ? a : b;
        WrOpcode op = g.opcode();
        int maxInline = from.qp.cap().maxInlineData();
        int maxSge = Math.max(1, Math.min(3, from.qp.cap().maxSendSge()));
        if (op == WrOpcode.RDMA_READ) {
            maxSge = Math.min(maxSge, from.maxSgeRd);
        }
        int len;
        if (op.isAtomic()) {
            len = 8;
        } else if (type == QpType.UD) {
            len = g.length() % (mtu + 1);
        } else {
            len = Math.min(g.length(), 9000);
        }
        if (sendCompletionsByWrId && op == WrOpcode.RDMA_READ && len == 0) {
            // siw 6.1 completes a zero-length RDMA READ queued behind another READ with GENERAL_ERR (seen in
            // the VM on siw0, docs/ibverbs.md): on such a device a READ moves at least one byte
            len = 1;
        }
        int k;
        if (op.isAtomic()) {
            k = 1;
        } else if (g.sgeCount() == 0) {
            k = len == 0 ? 0 : 1;
        } else {
            k = Math.min(g.sgeCount(), maxSge);
        }
        boolean readsLocal = op == WrOpcode.SEND || op == WrOpcode.SEND_WITH_IMM || op == WrOpcode.RDMA_WRITE
                || op == WrOpcode.RDMA_WRITE_WITH_IMM;
        int base = (readsLocal ? ModelSide.SRC : ModelSide.SINK) + Math.floorMod(g.localOffset(), ModelSide.AREA - len + 1);
        int[][] local = ModelSide.split(base, len, k, new Random(g.splitSeed()));
        boolean inline = g.inline() && readsLocal && len <= maxInline;
        PlannedOp p = new PlannedOp(index, from, to, op, len, local, inline, inline && g.badLkey(), g.signaled(),
                g.imm(), g.endBatch());
        if (op.isAtomic()) {
            p.remoteOffset = ModelSide.TARGET + 8 * Math.floorMod(g.remoteOffset(), ModelSide.AREA / 8);
            p.compareHits = g.compareHits();
            p.compareAdd = g.operand();
            p.swap = Long.rotateLeft(g.operand(), 29) ^ 0x5DEECE66DL;
        } else {
            p.remoteOffset = ModelSide.TARGET + Math.floorMod(g.remoteOffset(), ModelSide.AREA - len + 1);
        }
        p.remoteAddr = to.addr(p.remoteOffset);
        p.rkey = to.mr.rkey();
        return p;
    }

    /** Resolves a deliberately bad operation (A to B, RC). */
    PlannedOp planBad(BadGene g, int index) {
        WrOpcode op = g.opcode();
        int len = op.isAtomic() ? 8 : Math.max(1, Math.min(g.length(), 9000));
        if (g.kind() == AbstractRandomOpsProperties.BadKind.NO_REMOTE_ACCESS) {
            len = Math.min(len, 4096);
        }
        int base = (op == WrOpcode.RDMA_WRITE ? ModelSide.SRC : ModelSide.SINK)
                + Math.floorMod(g.offset(), ModelSide.AREA - len + 1);
        PlannedOp p = new PlannedOp(index, a, b, op, len, new int[][] {{base, len}}, false, false, g.signaled(), 0,
                false);
        int aligned = 8 * Math.floorMod(g.offset(), 4);
        switch (g.kind()) {
            case FLIPPED_RKEY -> {
                p.rkey = b.mr.rkey() ^ 0x80;
                p.remoteAddr = b.addr(ModelSide.TARGET + aligned);
            }
            case STALE_RKEY -> {
                p.rkey = staleRkey;
                p.remoteAddr = staleAddr + aligned;
            }
            case OUT_OF_BOUNDS_HIGH -> {
                p.rkey = b.mr.rkey();
                p.remoteAddr = op.isAtomic() ? b.addr(ModelSide.SIZE + aligned)
                        : b.addr(ModelSide.SIZE - len + 1 + Math.floorMod(g.offset(), 64));
            }
            case OUT_OF_BOUNDS_LOW -> {
                p.rkey = b.mr.rkey();
                p.remoteAddr = b.mr.address() - 8 - aligned;
            }
            case NO_REMOTE_ACCESS -> {
                p.rkey = restricted.rkey();
                p.remoteAddr = restricted.address() + (op.isAtomic() ? aligned : Math.floorMod(g.offset(), 4096 - len + 1));
            }
            default -> throw new IllegalArgumentException(g.kind().toString());
        }
        p.bad = g.kind().toString();
        p.compareAdd = g.offset();
        p.swap = ~g.offset();
        return p;
    }

    /**
     * Cuts planned operations into batches (at {@code endBatch} or {@link #MAX_BATCH}) and makes the last
     * operation of each direction in each batch signaled, so its completion covers the whole batch.
     */
    static List<List<PlannedOp>> batches(List<PlannedOp> ops) {
        List<List<PlannedOp>> out = new ArrayList<>();
        List<PlannedOp> cur = new ArrayList<>();
        for (PlannedOp p : ops) {
            cur.add(p);
            if (p.endBatch || cur.size() == MAX_BATCH) {
                out.add(cur);
                cur = new ArrayList<>();
            }
        }
        if (!cur.isEmpty()) {
            out.add(cur);
        }
        for (List<PlannedOp> batch : out) {
            PlannedOp lastA = null;
            PlannedOp lastB = null;
            for (PlannedOp p : batch) {
                if (p.from.name.equals("A")) {
                    lastA = p;
                } else {
                    lastB = p;
                }
            }
            if (lastA != null) {
                lastA.signaled = true;
            }
            if (lastB != null) {
                lastB.signaled = true;
            }
        }
        return out;
    }

    // ------------------------------------------------------------------------------------------ execution

    /** Posts a batch, applies it to the model, then checks completions and memory. */
    void runBatch(List<PlannedOp> batch) {
        batchNo++;
        batchStart = done.size();
        Expect ex = new Expect();
        List<int[][]> pendingA = new ArrayList<>();
        List<int[][]> pendingB = new ArrayList<>();
        for (PlannedOp p : batch) {
            resolve(p);
            post(p, batch);
            apply(p, ex);
            List<int[][]> pending = p.from == a ? pendingA : pendingB;
            if (p.inline) {
                if (!overlapsAny(p.local, pending)) {
                    p.from.scribble(p.local);
                }
            } else if (p.opcode != WrOpcode.RDMA_READ && !p.opcode.isAtomic()) {
                pending.add(p.local);
            }
            done.add(p);
        }
        Supplier<String> ctx = () -> context(batch);
        check(ex, ctx);
        a.repostConsumed();
        b.repostConsumed();
        // with completions out of post order (siw) an unsignaled READ's data may trail the batch's last completion
        checkMemory(type == QpType.RC && !sendCompletionsByWrId, ctx);
    }

    /**
     * Runs the operations before the first bad one batch by batch; then posts the batch holding the bad
     * one and everything after it in one go and checks REM_ACCESS_ERR for the bad one, WR_FLUSH_ERR for
     * every later one and for every posted receive, both QPs in ERR, and memory untouched by anything
     * from the bad operation on.
     *
     * @param ops                  all operations
     * @param firstBad             index of the first bad one
     * @param responderErrors      whether the responder QP also enters ERR (IBA class C)
     */
    void runWithError(List<PlannedOp> ops, int firstBad, boolean responderErrors) {
        List<List<PlannedOp>> before = batches(ops.subList(0, firstBad));
        List<PlannedOp> last = new ArrayList<>();
        if (!before.isEmpty() && !before.getLast().getLast().endBatch && before.getLast().size() < MAX_BATCH) {
            last.addAll(before.removeLast());
        }
        for (List<PlannedOp> batch : before) {
            runBatch(batch);
        }
        last.addAll(ops.subList(firstBad, ops.size()));
        batchNo++;
        batchStart = done.size();
        Expect ex = new Expect();
        for (PlannedOp p : last) {
            resolve(p);
            post(p, last);
            if (p.index < firstBad) {
                apply(p, ex);
            } else {
                WcStatus st = p.index == firstBad ? WcStatus.REM_ACCESS_ERR : WcStatus.WR_FLUSH_ERR;
                ex.send(a).add(ExpectedCompletion.error(p.wrId, st, a.qp.qpNum(), p.toString()));
            }
            done.add(p);
        }
        while (!a.posted.isEmpty()) {
            ModelSide.PostedRecv r = a.posted.poll();
            ex.recv(a).add(ExpectedCompletion.error(r.wrId(), WcStatus.WR_FLUSH_ERR, a.qp.qpNum(), "flushed " + r));
        }
        if (responderErrors) {
            while (!b.posted.isEmpty()) {
                ModelSide.PostedRecv r = b.posted.poll();
                ex.recv(b).add(ExpectedCompletion.error(r.wrId(), WcStatus.WR_FLUSH_ERR, b.qp.qpNum(), "flushed " + r));
            }
        }
        Supplier<String> ctx = () -> context(last);
        check(ex, ctx);
        awaitState(a, QpState.ERR, ctx);
        if (responderErrors) {
            awaitState(b, QpState.ERR, ctx);
        }
        checkMemory(true, ctx);
    }

    /** Fails if a QP, CQ or device error event was raised during a run that had no bad operation. */
    void assertNoErrorEvents() {
        List<AsyncEvent> bad = new ArrayList<>();
        for (ModelSide e : List.of(a, b)) {
            for (AsyncEvent ev : Wiring.drainAsyncEvents(e.ctx)) {
                switch (ev.type()) {
                    case QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR, CQ_ERR, DEVICE_FATAL, SRQ_ERR, PORT_ERR -> bad.add(ev);
                    default -> {
                    }
                }
            }
        }
        if (!bad.isEmpty()) {
            throw new AssertionError("error events during a run of valid operations: " + bad + "\n" + context(List.of()));
        }
    }

    private void resolve(PlannedOp p) {
        if (p.bad == null && p.opcode == WrOpcode.ATOMIC_CMP_AND_SWP && p.compareHits) {
            p.compareAdd = getLong(p.to.model, p.remoteOffset);
        }
    }

    private void post(PlannedOp p, List<PlannedOp> batch) {
        ModelSide from = p.from;
        int flags = (p.signaled ? SendFlags.SIGNALED : 0) | (p.inline ? SendFlags.INLINE : 0);
        if (sendCompletionsByWrId && p.opcode != WrOpcode.RDMA_READ) {
            // iWARP: a READ may return what a WRITE posted behind it wrote (RFC 5040 ordering) unless that
            // request is fenced (siw: SIW_WQE_READ_FENCE waits for the READs before it)
            flags |= SendFlags.FENCE;
        }
        wr.clear().wrId(p.wrId).opcode(p.opcode).sendFlags(flags).numSge(p.local.length);
        int lkey = p.badLkey ? ~from.mr.lkey() : from.mr.lkey();
        for (int i = 0; i < p.local.length; i++) {
            wr.sge(i).set(from.addr(p.local[i][0]), p.local[i][1], lkey);
        }
        if (p.opcode.hasImm()) {
            wr.immData(p.imm);
        }
        if (p.opcode == WrOpcode.RDMA_WRITE || p.opcode == WrOpcode.RDMA_WRITE_WITH_IMM || p.opcode.isReadOrAtomic()) {
            wr.remoteAddr(p.remoteAddr).rkey(p.rkey);
        }
        if (p.opcode.isAtomic()) {
            wr.compareAdd(p.compareAdd).swap(p.swap);
        }
        if (type == QpType.UD) {
            wr.ah(from.ahToPeer).remoteQpn(p.to.qp.qpNum()).remoteQkey(Wiring.QKEY);
        }
        if (!from.qp.postSend(wr)) {
            throw new AssertionError("postSend refused " + p + ": " + wr.postError() + "\n" + context(batch));
        }
    }

    private void apply(PlannedOp p, Expect ex) {
        ModelSide from = p.from;
        ModelSide to = p.to;
        String desc = p.toString();
        switch (p.opcode) {
            case SEND, SEND_WITH_IMM -> {
                byte[] data = from.gather(p.local);
                ModelSide.PostedRecv r = to.consumeRecv(desc);
                int byteLen = p.length;
                if (type == QpType.UD) {
                    to.scatter(r.pieces(), 0, null, ModelSide.GRH);
                    to.scatter(r.pieces(), ModelSide.GRH, data, p.length);
                    byteLen += ModelSide.GRH;
                } else {
                    to.scatter(r.pieces(), 0, data, p.length);
                }
                ex.recv(to).add(new ExpectedCompletion(r.wrId(), WcStatus.SUCCESS, WcOpcode.RECV, byteLen,
                        p.opcode.hasImm(), p.imm, to.qp.qpNum(), type == QpType.UD ? from.qp.qpNum() : -1,
                        type == QpType.UD, desc + " into " + r));
            }
            case RDMA_WRITE, RDMA_WRITE_WITH_IMM -> {
                byte[] data = from.gather(p.local);
                System.arraycopy(data, 0, to.model, p.remoteOffset, p.length);
                if (p.opcode.hasImm()) {
                    ModelSide.PostedRecv r = to.consumeRecv(desc);
                    ex.recv(to).add(new ExpectedCompletion(r.wrId(), WcStatus.SUCCESS, WcOpcode.RECV_RDMA_WITH_IMM,
                            p.length, true, p.imm, to.qp.qpNum(), -1, false, desc + " consuming " + r));
                }
            }
            case RDMA_READ -> from.scatter(p.local, 0, Arrays.copyOfRange(to.model, p.remoteOffset,
                    p.remoteOffset + p.length), p.length);
            case ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD -> {
                long orig = getLong(to.model, p.remoteOffset);
                long next = p.opcode == WrOpcode.ATOMIC_FETCH_AND_ADD ? orig + p.compareAdd
                        : orig == p.compareAdd ? p.swap : orig;
                putLong(to.model, p.remoteOffset, next);
                byte[] result = new byte[8];
                putLong(result, 0, orig);
                from.scatter(p.local, 0, result, 8);
            }
            default -> throw new IllegalArgumentException(p.opcode.toString());
        }
        if (p.signaled) {
            ex.send(from).add(new ExpectedCompletion(p.wrId, WcStatus.SUCCESS, p.opcode.wcOpcode(), -1, false, 0,
                    from.qp.qpNum(), -1, false, desc));
        }
    }

    private void check(Expect ex, Supplier<String> ctx) {
        long deadline = System.nanoTime() + timeoutNs;
        for (ModelSide e : List.of(a, b)) {
            List<ExpectedCompletion> s = ex.send(e);
            List<ExpectedCompletion> r = ex.recv(e);
            List<WorkCompletion> gotS = Completions.take(e.sendCq, s.size(), deadline,
                    () -> "send CQ of " + e.name + ", expected " + s + "\n" + ctx.get());
            List<WorkCompletion> gotR = Completions.take(e.recvCq, r.size(), deadline,
                    () -> "receive CQ of " + e.name + ", expected " + r + "\n" + ctx.get());
            ExpectedCompletion.assertMatch("send CQ of " + e.name, s,
                    sendCompletionsByWrId ? ExpectedCompletion.inExpectedOrder(s, gotS) : gotS, ctx);
            ExpectedCompletion.assertMatch("receive CQ of " + e.name, r, gotR, ctx);
        }
        for (ModelSide e : List.of(a, b)) {
            Completions.assertEmpty(e.sendCq, () -> "send CQ of " + e.name + "\n" + ctx.get());
            Completions.assertEmpty(e.recvCq, () -> "receive CQ of " + e.name + "\n" + ctx.get());
        }
    }

    private void checkMemory(boolean strict, Supplier<String> ctx) {
        long deadline = System.nanoTime() + timeoutNs;
        for (ModelSide e : List.of(a, b)) {
            String d = e.compareMemory();
            // Without a responder acknowledgement (UC, UD) placement may trail the sender's completion.
            while (d != null && !strict && System.nanoTime() - deadline < 0) {
                Thread.yield();
                d = e.compareMemory();
            }
            if (d != null) {
                throw new AssertionError(d + "\n" + ctx.get());
            }
        }
    }

    private void awaitState(ModelSide e, QpState want, Supplier<String> ctx) {
        long deadline = System.nanoTime() + timeoutNs;
        QpState s = e.qp.state();
        while (s != want && System.nanoTime() - deadline < 0) {
            Thread.yield();
            s = e.qp.state();
        }
        if (s != want) {
            throw new AssertionError("QP of " + e.name + " is in " + s + ", expected " + want + "\n" + ctx.get());
        }
    }

    private static boolean overlapsAny(int[][] pieces, List<int[][]> others) {
        for (int[][] o : others) {
            for (int[] x : pieces) {
                for (int[] y : o) {
                    if (x[0] < y[0] + y[1] && y[0] < x[0] + x[1]) {
                        return true;
                    }
                }
            }
        }
        return false;
    }

    private long getLong(byte[] m, int off) {
        return ByteBuffer.wrap(m, off, 8).order(atomicOrder).getLong();
    }

    private void putLong(byte[] m, int off, long v) {
        ByteBuffer.wrap(m, off, 8).order(atomicOrder).putLong(v);
    }

    /** {@return the run and the batch, for failure messages} */
    String context(List<PlannedOp> batch) {
        StringBuilder sb = new StringBuilder();
        sb.append("run: ").append(type).append(" path MTU ").append(mtu).append(" rd_atomic ").append(rdAtomic).append(", A qpn 0x")
                .append(Integer.toHexString(a.qp.qpNum())).append(" inline<=").append(a.qp.cap().maxInlineData())
                .append(", B qpn 0x").append(Integer.toHexString(b.qp.qpNum())).append(", batch #").append(batchNo)
                .append(", ").append(done.size()).append(" operations posted so far");
        sb.append("\nthis batch:");
        for (PlannedOp p : batch) {
            sb.append("\n  ").append(p);
        }
        int end = Math.min(batchStart, done.size());
        int from = Math.max(0, end - 12);
        if (from < end) {
            sb.append("\nbefore it:");
            for (PlannedOp p : done.subList(from, end)) {
                sb.append("\n  ").append(p);
            }
        }
        return sb.toString();
    }

    /** Expected completions per endpoint and queue. */
    private final class Expect {
        private final List<ExpectedCompletion> sendA = new ArrayList<>();
        private final List<ExpectedCompletion> sendB = new ArrayList<>();
        private final List<ExpectedCompletion> recvA = new ArrayList<>();
        private final List<ExpectedCompletion> recvB = new ArrayList<>();

        List<ExpectedCompletion> send(ModelSide e) {
            return e == a ? sendA : sendB;
        }

        List<ExpectedCompletion> recv(ModelSide e) {
            return e == a ? recvA : recvB;
        }
    }
}
