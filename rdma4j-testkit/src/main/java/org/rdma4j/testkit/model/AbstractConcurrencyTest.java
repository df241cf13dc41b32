// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit.model;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.function.Supplier;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.CmConnector;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.TransportType;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcFlags;
import org.rdma4j.verbs.WcOpcode;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * Concurrency tests every device runs: posting from several threads (on several QPs and on one QP)
 * while other threads poll. Every work request must complete exactly once with SUCCESS, every message
 * must arrive exactly once with the right bytes, and the order of each posting thread's messages must
 * be kept on a connected QP. Every wait is bounded by {@link #deadline()}: a stuck device fails the
 * test with a progress report instead of hanging it.
 */
public abstract class AbstractConcurrencyTest {
    /** Constructor for subclasses. */
    protected AbstractConcurrencyTest() {
    }

    private static final int THREADS = 4;
    private static final int SLOT = 1024;
    private static final ValueLayout.OfInt BE_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final long RECV_TAG = 0x7EC0_0000_0000L;

    private Fabric fabric;
    private Closer closer;

    /**
     * {@return a new fabric with at least two devices}
     *
     * @param clock the clock the devices' timers must use
     */
    protected abstract Fabric createFabric(ManualClock clock);

    /** {@return how long one test may take before it is failed} */
    protected Duration deadline() {
        return Duration.ofSeconds(30);
    }

    /** {@return messages each posting thread sends (bounded by the device's queue sizes)} */
    protected int messagesPerThread() {
        return 300;
    }

    @BeforeEach
    void openFabric() {
        fabric = createFabric(new ManualClock());
        closer = new Closer();
    }

    @AfterEach
    void closeFabric() {
        // createFabric may have skipped the test (a provider without a device): nothing to close then
        try {
            if (closer != null) {
                closer.close();
            }
        } finally {
            if (fabric != null) {
                fabric.close();
            }
        }
    }

    /**
     * Four RC QPs share one send CQ (polled by two threads) and, on the peer, one receive CQ.
     *
     * @throws Exception when a thread fails or the run times out
     */
    @Test
    public void rcQpsSharingOneCqCompleteEveryRequestOnce() throws Exception {
        manyQpsShareOneCq(QpType.RC);
    }

    /**
     * The same on UC.
     *
     * @throws Exception when a thread fails or the run times out
     */
    @Test
    public void ucQpsSharingOneCqCompleteEveryRequestOnce() throws Exception {
        manyQpsShareOneCq(QpType.UC);
    }

    /**
     * Four threads post SENDs on one RC QP: each message arrives once, each thread's order is kept.
     *
     * @throws Exception when a thread fails or the run times out
     */
    @Test
    public void rcConcurrentPostersOnOneQpKeepPerThreadOrder() throws Exception {
        manyThreadsOnOneQp(QpType.RC);
    }

    /**
     * The same on UC.
     *
     * @throws Exception when a thread fails or the run times out
     */
    @Test
    public void ucConcurrentPostersOnOneQpKeepPerThreadOrder() throws Exception {
        manyThreadsOnOneQp(QpType.UC);
    }

    /**
     * Four threads post SENDs on one UD QP: each message arrives once (UD does not promise order).
     *
     * @throws Exception when a thread fails or the run times out
     */
    @Test
    public void udConcurrentPostersOnOneQpDeliverEveryMessageOnce() throws Exception {
        manyThreadsOnOneQp(QpType.UD);
    }

    // ---------------------------------------------------------------------------------- scenarios

    /**
     * Whether the pair is connected through the fabric's CM ({@link Fabric#cm()}: iWARP, {@link CmConnector});
     * skips a UC or UD test on an iWARP device, which has RC QPs only.
     */
    private boolean throughCm(QpType type) {
        if (fabric.device(0).transportType() == TransportType.IWARP) {
            Assumptions.assumeTrue(type == QpType.RC, () -> fabric.device(0).name() + " is an iWARP device: RC QPs"
                    + " only, no " + type);
        }
        return fabric.cm() != null && type == QpType.RC;
    }

    private void manyQpsShareOneCq(QpType type) throws Exception {
        throughCm(type);
        // iWARP has no immediate data (RDMAP, RFC 5040; siw refuses WRITE_WITH_IMM at post): a SEND instead
        boolean imm = fabric.device(0).transportType() != TransportType.IWARP;
        long deadline = System.nanoTime() + deadline().toNanos();
        Side a = side(0, 2 * THREADS * 64 + 64);
        int msgs = Math.min(messagesPerThread(), a.ctx.queryDevice().maxQpWr());
        Side b = side(1, THREADS * msgs + 64);
        MemorySegment src = a.region(THREADS * msgs * SLOT);
        MemorySegment recv = b.region(THREADS * msgs * SLOT);
        MemorySegment target = b.region(THREADS * msgs * SLOT);
        MemoryRegion srcMr = closer.add(a.pd.regMr(src, AccessFlag.of(AccessFlag.LOCAL_WRITE)));
        MemoryRegion recvMr = closer.add(b.pd.regMr(recv, AccessFlag.of(AccessFlag.LOCAL_WRITE)));
        MemoryRegion targetMr = closer.add(b.pd.regMr(target, AccessFlag.of(AccessFlag.LOCAL_WRITE,
                AccessFlag.REMOTE_WRITE)));
        Mtu mtu = a.ctx.queryPort(Wiring.PORT).activeMtu();
        QueuePair[] qpA = new QueuePair[THREADS];
        QueuePair[] qpB = new QueuePair[THREADS];
        Map<Integer, Integer> qpIndexB = new HashMap<>();
        int rd = Wiring.rdAtomic(a.ctx, b.ctx);
        for (int i = 0; i < THREADS; i++) {
            qpA[i] = closer.add(a.pd.createQp(new QpInitAttributes().type(type).sendCq(a.cq).recvCq(a.cq)
                    .cap(new QpCapabilities(64, 1, 1, 1, 0))));
            QpInitAttributes initB = new QpInitAttributes().type(type).sendCq(b.cq).recvCq(b.cq)
                    .cap(new QpCapabilities(1, msgs, 1, 1, 0));
            if (throughCm(type)) {
                qpB[i] = CmConnector.connect(fabric, qpA[i], rd, id -> closer.add(id.createQp(b.pd, initB)),
                        closer::add);
            } else {
                qpB[i] = closer.add(b.pd.createQp(initB));
                Wiring.connect(qpA[i], qpB[i], b.ctx, mtu, 100 * i, 0xFF_FF00 + i, rd);
                Wiring.connect(qpB[i], qpA[i], a.ctx, mtu, 0xFF_FF00 + i, 100 * i, rd);
            }
            qpIndexB.put(qpB[i].qpNum(), i);
        }
        // Message (t, seq): SEND if seq % 3 == 0, RDMA_WRITE_WITH_IMM if 1, RDMA_WRITE if 2.
        int total = THREADS * msgs;
        int recvPerQp = 0;
        for (int s = 0; s < msgs; s++) {
            recvPerQp += s % 3 != 2 ? 1 : 0;
        }
        RecvWorkRequest rwr = new RecvWorkRequest(1);
        for (int t = 0; t < THREADS; t++) {
            for (int k = 0; k < recvPerQp; k++) {
                int slot = t * msgs + k;
                rwr.wrId(RECV_TAG | slot).singleSge(recvMr.address() + (long) slot * SLOT, SLOT, recvMr.lkey());
                assertTrue(qpB[t].postRecv(rwr), () -> "postRecv refused: " + rwr.postError());
            }
        }
        for (int t = 0; t < THREADS; t++) {
            for (int s = 0; s < msgs; s++) {
                fill(src, (long) (t * msgs + s) * SLOT, length(t, s, SLOT), t, s);
            }
        }

        Progress p = new Progress(total, THREADS * recvPerQp);
        AtomicIntegerArray sendSeen = new AtomicIntegerArray(total);
        AtomicIntegerArray recvSeen = new AtomicIntegerArray(total);
        int[] lastSeq = new int[THREADS];
        java.util.Arrays.fill(lastSeq, -1);
        Semaphore[] window = new Semaphore[THREADS];
        List<Callable<Void>> tasks = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            int tt = t;
            window[t] = new Semaphore(Math.min(64, qpA[t].cap().maxSendWr()));
            tasks.add(() -> {
                SendWorkRequest wr = new SendWorkRequest(1);
                for (int s = 0; s < msgs && !p.stop.get(); s++) {
                    acquire(window[tt], deadline, p);
                    int len = length(tt, s, SLOT);
                    long slot = (long) tt * msgs + s;
                    wr.clear().wrId(((long) tt << 32) | s).sendFlags(SendFlags.SIGNALED)
                            .singleSge(srcMr.address() + slot * SLOT, len, srcMr.lkey());
                    switch (s % 3) {
                        case 0 -> wr.opcode(WrOpcode.SEND);
                        case 1 -> {
                            if (imm) {
                                wr.opcode(WrOpcode.RDMA_WRITE_WITH_IMM).immData(imm(tt, s))
                                        .remoteAddr(targetMr.address() + slot * SLOT).rkey(targetMr.rkey());
                            } else {
                                wr.opcode(WrOpcode.SEND);
                            }
                        }
                        default -> wr.opcode(WrOpcode.RDMA_WRITE).remoteAddr(targetMr.address() + slot * SLOT)
                                .rkey(targetMr.rkey());
                    }
                    if (!qpA[tt].postSend(wr)) {
                        p.fail("thread " + tt + ": postSend of message " + s + " refused: " + wr.postError());
                        return null;
                    }
                    p.posted.incrementAndGet();
                }
                return null;
            });
        }
        for (int k = 0; k < 2; k++) {
            tasks.add(() -> {
                pollLoop(a.cq, deadline, p, () -> p.sendDone.get() >= total, wc -> {
                    int t = (int) (wc.wrId() >>> 32);
                    int s = (int) wc.wrId();
                    if (wc.status() != WcStatus.SUCCESS || t < 0 || t >= THREADS || s < 0 || s >= msgs) {
                        return "send completion " + wc;
                    }
                    WcOpcode want = s % 3 == 0 || (s % 3 == 1 && !imm) ? WcOpcode.SEND : WcOpcode.RDMA_WRITE;
                    if (wc.opcode() != want || wc.qpNum() != qpA[t].qpNum()) {
                        return "send completion " + wc + ": expected " + want + " on qp 0x"
                                + Integer.toHexString(qpA[t].qpNum());
                    }
                    if (sendSeen.incrementAndGet(t * msgs + s) != 1) {
                        return "wr_id 0x" + Long.toHexString(wc.wrId()) + " completed twice";
                    }
                    window[t].release();
                    p.sendDone.incrementAndGet();
                    return null;
                });
                return null;
            });
        }
        tasks.add(() -> {
            pollLoop(b.cq, deadline, p, () -> p.recvDone.get() >= p.recvTotal, wc -> {
                Integer t = qpIndexB.get(wc.qpNum());
                if (wc.status() != WcStatus.SUCCESS || t == null) {
                    return "receive completion " + wc;
                }
                int s;
                String bad;
                if (wc.opcode() == WcOpcode.RECV) {
                    int slot = (int) (wc.wrId() & 0xFFFF_FFFFL);
                    s = recv.get(BE_INT, (long) slot * SLOT + 4);
                    bad = wc.hasImm() ? "SEND completed WITH_IMM"
                            : s < 0 || s >= msgs || s % 3 == 2 || (s % 3 == 1 && imm) ? "payload names message " + s
                            : check(recv, (long) slot * SLOT, wc.byteLen(), t, s, SLOT);
                } else if (wc.opcode() == WcOpcode.RECV_RDMA_WITH_IMM && wc.hasImm()) {
                    int im = wc.immData();
                    s = im & 0xFF_FFFF;
                    bad = (im >>> 24) != t ? "imm 0x" + Integer.toHexString(im) + " names thread " + (im >>> 24)
                            : s >= msgs || s % 3 != 1 ? "imm 0x" + Integer.toHexString(im) + " names no RDMA WRITE with imm"
                            : check(target, (long) (t * msgs + s) * SLOT, wc.byteLen(), t, s, SLOT);
                } else {
                    return "receive completion " + wc + " (expected RECV or RECV_RDMA_WITH_IMM with imm)";
                }
                if (bad != null) {
                    return "QP " + t + " " + wc + ": " + bad;
                }
                if (s <= lastSeq[t]) {
                    return "QP " + t + ": message " + s + " arrived after message " + lastSeq[t];
                }
                lastSeq[t] = s;
                if (recvSeen.incrementAndGet(t * msgs + s) != 1) {
                    return "QP " + t + ": message " + s + " arrived twice";
                }
                p.recvDone.incrementAndGet();
                return null;
            });
            return null;
        });
        runAll(tasks, deadline, p);
        for (int i = 0; i < total; i++) {
            int t = i / msgs;
            int s = i % msgs;
            if (sendSeen.get(i) != 1) {
                fail("wr_id 0x" + Long.toHexString(((long) t << 32) | s) + " completed " + sendSeen.get(i) + " times");
            }
            if (s % 3 != 2 && recvSeen.get(i) != 1) {
                fail("message (" + t + ", " + s + ") arrived " + recvSeen.get(i) + " times");
            }
        }
        // Plain RDMA WRITEs: on RC the completion implies placement; on UC placement may trail it.
        for (int i = 0; i < total; i++) {
            int t = i / msgs;
            int s = i % msgs;
            if (s % 3 == 2) {
                String bad = check(target, (long) i * SLOT, length(t, s, SLOT), t, s, SLOT);
                while (bad != null && type != QpType.RC && System.nanoTime() - deadline < 0) {
                    Thread.yield();
                    bad = check(target, (long) i * SLOT, length(t, s, SLOT), t, s, SLOT);
                }
                if (bad != null) {
                    fail("RDMA WRITE (" + t + ", " + s + "): " + bad);
                }
            }
        }
        Completions.assertEmpty(a.cq, () -> "shared send CQ");
        Completions.assertEmpty(b.cq, () -> "shared receive CQ");
    }

    private void manyThreadsOnOneQp(QpType type) throws Exception {
        throughCm(type);
        long deadline = System.nanoTime() + deadline().toNanos();
        Side a = side(0, 512);
        int maxWr = a.ctx.queryDevice().maxQpWr();
        int msgs = Math.min(messagesPerThread(), maxWr / THREADS);
        int total = THREADS * msgs;
        Side b = side(1, total + 64);
        Mtu mtu = a.ctx.queryPort(Wiring.PORT).activeMtu();
        int grh = type == QpType.UD ? ModelSide.GRH : 0;
        int maxLen = type == QpType.UD ? Math.min(SLOT - grh, mtu.bytes()) : SLOT;
        MemorySegment src = a.region(total * SLOT);
        MemorySegment recv = b.region(total * SLOT);
        MemoryRegion srcMr = closer.add(a.pd.regMr(src, AccessFlag.of(AccessFlag.LOCAL_WRITE)));
        MemoryRegion recvMr = closer.add(b.pd.regMr(recv, AccessFlag.of(AccessFlag.LOCAL_WRITE)));
        QueuePair qa = closer.add(a.pd.createQp(new QpInitAttributes().type(type).sendCq(a.cq).recvCq(a.cq)
                .cap(new QpCapabilities(Math.min(256, maxWr), 1, 1, 1, 0))));
        QpInitAttributes initB = new QpInitAttributes().type(type).sendCq(b.cq).recvCq(b.cq)
                .cap(new QpCapabilities(1, total, 1, 1, 0));
        QueuePair qb;
        AddressHandle ah = null;
        if (throughCm(type)) {
            qb = CmConnector.connect(fabric, qa, Wiring.rdAtomic(a.ctx, b.ctx),
                    id -> closer.add(id.createQp(b.pd, initB)), closer::add);
        } else if (type == QpType.UD) {
            qb = closer.add(b.pd.createQp(initB));
            Wiring.activateUd(qa, 7);
            Wiring.activateUd(qb, 9);
            ah = closer.add(a.pd.createAh(Wiring.addressOf(b.ctx)));
        } else {
            qb = closer.add(b.pd.createQp(initB));
            int rd = Wiring.rdAtomic(a.ctx, b.ctx);
            Wiring.connect(qa, qb, b.ctx, mtu, 0xFF_FFF0, 77, rd);
            Wiring.connect(qb, qa, a.ctx, mtu, 77, 0xFF_FFF0, rd);
        }
        RecvWorkRequest rwr = new RecvWorkRequest(1);
        for (int k = 0; k < total; k++) {
            rwr.wrId(RECV_TAG | k).singleSge(recvMr.address() + (long) k * SLOT, SLOT, recvMr.lkey());
            assertTrue(qb.postRecv(rwr), () -> "postRecv refused: " + rwr.postError());
        }
        for (int t = 0; t < THREADS; t++) {
            for (int s = 0; s < msgs; s++) {
                fill(src, (long) (t * msgs + s) * SLOT, length(t, s, maxLen), t, s);
            }
        }

        Progress p = new Progress(total, total);
        AtomicIntegerArray sendSeen = new AtomicIntegerArray(total);
        AtomicIntegerArray recvSeen = new AtomicIntegerArray(total);
        int[] nextSeq = new int[THREADS];
        Semaphore window = new Semaphore(Math.min(256, qa.cap().maxSendWr()));
        AddressHandle udAh = ah;
        List<Callable<Void>> tasks = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            int tt = t;
            tasks.add(() -> {
                SendWorkRequest wr = new SendWorkRequest(1);
                for (int s = 0; s < msgs && !p.stop.get(); s++) {
                    acquire(window, deadline, p);
                    long slot = (long) tt * msgs + s;
                    wr.clear().wrId(((long) tt << 32) | s).opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                            .singleSge(srcMr.address() + slot * SLOT, length(tt, s, maxLen), srcMr.lkey());
                    if (udAh != null) {
                        wr.ah(udAh).remoteQpn(qb.qpNum()).remoteQkey(Wiring.QKEY);
                    }
                    if (!qa.postSend(wr)) {
                        p.fail("thread " + tt + ": postSend of message " + s + " refused: " + wr.postError());
                        return null;
                    }
                    p.posted.incrementAndGet();
                }
                return null;
            });
        }
        for (int k = 0; k < 2; k++) {
            tasks.add(() -> {
                pollLoop(a.cq, deadline, p, () -> p.sendDone.get() >= total, wc -> {
                    int t = (int) (wc.wrId() >>> 32);
                    int s = (int) wc.wrId();
                    if (wc.status() != WcStatus.SUCCESS || wc.opcode() != WcOpcode.SEND || t < 0 || t >= THREADS
                            || s < 0 || s >= msgs) {
                        return "send completion " + wc;
                    }
                    if (sendSeen.incrementAndGet(t * msgs + s) != 1) {
                        return "wr_id 0x" + Long.toHexString(wc.wrId()) + " completed twice";
                    }
                    window.release();
                    p.sendDone.incrementAndGet();
                    return null;
                });
                return null;
            });
        }
        tasks.add(() -> {
            pollLoop(b.cq, deadline, p, () -> p.recvDone.get() >= total, wc -> {
                if (wc.status() != WcStatus.SUCCESS || wc.opcode() != WcOpcode.RECV || wc.hasImm()
                        || wc.qpNum() != qb.qpNum()) {
                    return "receive completion " + wc;
                }
                if (type == QpType.UD && (wc.srcQp() != qa.qpNum() || (wc.wcFlags() & WcFlags.GRH) == 0)) {
                    return "UD receive completion " + wc + ": expected src_qp 0x" + Integer.toHexString(qa.qpNum())
                            + " and the GRH flag";
                }
                long off = (wc.wrId() & 0xFFFF_FFFFL) * SLOT + grh;
                int t = recv.get(BE_INT, off);
                int s = recv.get(BE_INT, off + 4);
                String bad = t < 0 || t >= THREADS || s < 0 || s >= msgs ? "payload names message (" + t + ", " + s + ")"
                        : check(recv, off, wc.byteLen() - grh, t, s, maxLen);
                if (bad != null) {
                    return wc + ": " + bad;
                }
                if (recvSeen.incrementAndGet(t * msgs + s) != 1) {
                    return "message (" + t + ", " + s + ") arrived twice";
                }
                if (type != QpType.UD) {
                    if (s != nextSeq[t]) {
                        return "thread " + t + ": message " + s + " arrived when " + nextSeq[t] + " was next";
                    }
                    nextSeq[t]++;
                }
                p.recvDone.incrementAndGet();
                return null;
            });
            return null;
        });
        runAll(tasks, deadline, p);
        for (int i = 0; i < total; i++) {
            if (sendSeen.get(i) != 1 || recvSeen.get(i) != 1) {
                fail("message (" + i / msgs + ", " + i % msgs + "): send completed " + sendSeen.get(i)
                        + " times, received " + recvSeen.get(i) + " times");
            }
        }
        Completions.assertEmpty(a.cq, () -> "send CQ");
        Completions.assertEmpty(b.cq, () -> "receive CQ");
    }

    // ---------------------------------------------------------------------------------- machinery

    /** One device's context, PD, shared CQ and memory. */
    private final class Side {
        final Context ctx;
        final ProtectionDomain pd;
        final CompletionQueue cq;
        final Arena arena;

        Side(int device, int cqe) {
            arena = closer.add(fabric.bufferArena());
            ctx = closer.add(fabric.openContext(device));
            pd = closer.add(ctx.allocPd());
            cq = closer.add(ctx.createCq(Math.min(cqe, ctx.queryDevice().maxCqe()), null, 0));
        }

        MemorySegment region(long size) {
            return arena.allocate(size, 4096);
        }
    }

    private Side side(int device, int cqe) {
        return new Side(device, cqe);
    }

    /** Shared state of the threads of one test. */
    private static final class Progress {
        final int sendTotal;
        final int recvTotal;
        final AtomicInteger posted = new AtomicInteger();
        final AtomicInteger sendDone = new AtomicInteger();
        final AtomicInteger recvDone = new AtomicInteger();
        final AtomicBoolean stop = new AtomicBoolean();
        final Queue<String> errors = new ConcurrentLinkedQueue<>();

        Progress(int sendTotal, int recvTotal) {
            this.sendTotal = sendTotal;
            this.recvTotal = recvTotal;
        }

        void fail(String error) {
            if (errors.size() < 20) {
                errors.add(Thread.currentThread().getName() + ": " + error);
            }
            stop.set(true);
        }

        @Override
        public String toString() {
            return "posted " + posted.get() + "/" + sendTotal + ", send completions " + sendDone.get() + "/" + sendTotal
                    + ", receive completions " + recvDone.get() + "/" + recvTotal;
        }
    }

    /** A check of one completion: null if fine, else the error. */
    @FunctionalInterface
    private interface WcCheck {
        String apply(WorkCompletion wc);
    }

    private static void pollLoop(CompletionQueue cq, long deadline, Progress p, Supplier<Boolean> finished,
                                 WcCheck check) {
        WorkCompletion[] wcs = Completions.newArray(16);
        while (!p.stop.get() && !finished.get()) {
            int n = cq.poll(wcs, wcs.length);
            for (int i = 0; i < n; i++) {
                String bad = check.apply(wcs[i]);
                if (bad != null) {
                    p.fail(bad);
                    return;
                }
            }
            if (n == 0) {
                if (System.nanoTime() - deadline > 0) {
                    p.fail("deadline passed while polling: " + p);
                    return;
                }
                Thread.yield();
            }
        }
    }

    private static void acquire(Semaphore window, long deadline, Progress p) throws InterruptedException {
        long left = deadline - System.nanoTime();
        if (left <= 0 || !window.tryAcquire(left, TimeUnit.NANOSECONDS)) {
            p.fail("deadline passed waiting for a send-queue slot (completions stopped coming?): " + p);
            throw new IllegalStateException("deadline");
        }
    }

    private void runAll(List<Callable<Void>> tasks, long deadline, Progress p) throws Exception {
        AtomicInteger n = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(tasks.size(), r -> {
            Thread t = new Thread(r, "rdma4j-concurrency-" + n.getAndIncrement());
            t.setDaemon(true);
            return t;
        });
        try {
            List<Future<Void>> futures = new ArrayList<>();
            for (Callable<Void> task : tasks) {
                futures.add(pool.submit(() -> {
                    try {
                        return task.call();
                    } catch (Throwable e) {
                        if (!p.stop.get() || p.errors.isEmpty()) {
                            p.fail(e.toString());
                        }
                        throw e;
                    }
                }));
            }
            for (Future<Void> f : futures) {
                long left = Math.max(1, deadline - System.nanoTime() + TimeUnit.SECONDS.toNanos(1));
                try {
                    f.get(left, TimeUnit.NANOSECONDS);
                } catch (TimeoutException e) {
                    p.stop.set(true);
                    fail("timed out after " + deadline() + ": " + p + "; errors: " + p.errors);
                } catch (java.util.concurrent.ExecutionException e) {
                    // reported through p.errors
                }
            }
        } finally {
            p.stop.set(true);
            pool.shutdownNow();
            if (!pool.awaitTermination(5, TimeUnit.SECONDS)) {
                p.errors.add("worker threads did not stop within 5 s of shutdownNow");
            }
        }
        if (!p.errors.isEmpty()) {
            fail(String.join("\n", p.errors) + "\nprogress: " + p);
        }
        if (p.sendDone.get() != p.sendTotal || p.recvDone.get() != p.recvTotal) {
            fail("incomplete: " + p);
        }
    }

    private static int length(int t, int s, int max) {
        return 12 + Math.floorMod(t * 131 + s * 37, max - 11);
    }

    private static int imm(int t, int s) {
        return (t << 24) | s;
    }

    private static byte pattern(int t, int s, int j) {
        return (byte) (t * 31 + s * 7 + j * 13);
    }

    /** Writes message (t, s): thread, sequence and length as big-endian ints, then a pattern. */
    private static void fill(MemorySegment m, long off, int len, int t, int s) {
        m.set(BE_INT, off, t);
        m.set(BE_INT, off + 4, s);
        m.set(BE_INT, off + 8, len);
        for (int j = 12; j < len; j++) {
            m.set(ValueLayout.JAVA_BYTE, off + j, pattern(t, s, j));
        }
    }

    /** {@return null if message (t, s) of {@code byteLen} bytes is at {@code off}, else what is wrong} */
    private static String check(MemorySegment m, long off, int byteLen, int t, int s, int max) {
        int len = length(t, s, max);
        if (byteLen != len) {
            return "byte_len " + byteLen + ", message (" + t + ", " + s + ") has " + len;
        }
        if (m.get(BE_INT, off) != t || m.get(BE_INT, off + 4) != s || m.get(BE_INT, off + 8) != len) {
            return "header (" + m.get(BE_INT, off) + ", " + m.get(BE_INT, off + 4) + ", " + m.get(BE_INT, off + 8)
                    + "), expected (" + t + ", " + s + ", " + len + ")";
        }
        for (int j = 12; j < len; j++) {
            if (m.get(ValueLayout.JAVA_BYTE, off + j) != pattern(t, s, j)) {
                return "byte " + j + " of message (" + t + ", " + s + ") is "
                        + (m.get(ValueLayout.JAVA_BYTE, off + j) & 0xFF) + ", expected " + (pattern(t, s, j) & 0xFF);
            }
        }
        return null;
    }
}
