// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.SplittableRandom;

import org.rdma4j.common.ManualClock;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.WorkCompletion;

/**
 * Two soft devices on a fabric that cuts messages at the path MTU, joined by a
 * {@link FaultInjectingLink}, with one QP each (connected for RC/UC, RTS for UD), one region of
 * {@link #MEM} bytes each with every access right, and a send and a receive CQ each. Time is a
 * {@link ManualClock}: {@link #step()} moves it by a quarter of the local ACK timeout, which runs the
 * protocol timers and releases delayed packets.
 */
final class LossyPair implements AutoCloseable {
    static final int MEM = 2 << 20;
    static final int QKEY = 0x1111_1111;

    /**
     * QP parameters.
     *
     * @param type        QP type
     * @param mtu         path MTU
     * @param psnA        A's first send PSN (B's expected PSN)
     * @param psnB        B's first send PSN
     * @param rdAtomic    max_rd_atomic and max_dest_rd_atomic of both sides
     * @param timeout     local ACK timeout exponent (4.096 us * 2^timeout)
     * @param retryCnt    retry_cnt
     * @param rnrRetry    rnr_retry
     * @param minRnrTimer min_rnr_timer code of the responders
     * @param maxWr       send and receive queue depths
     */
    record Config(QpType type, Mtu mtu, int psnA, int psnB, int rdAtomic, int timeout, int retryCnt, int rnrRetry,
                  int minRnrTimer, int maxWr) {
        static Config of(QpType type) {
            return new Config(type, Mtu.MTU_256, 0xFF_FFF0, 0x12_3456, 4, 8, 7, 7, 1, 256);
        }

        Config psns(int a, int b) {
            return new Config(type, mtu, a & 0xFF_FFFF, b & 0xFF_FFFF, rdAtomic, timeout, retryCnt, rnrRetry,
                    minRnrTimer, maxWr);
        }

        Config mtu(Mtu m) {
            return new Config(type, m, psnA, psnB, rdAtomic, timeout, retryCnt, rnrRetry, minRnrTimer, maxWr);
        }

        Config rdAtomic(int n) {
            return new Config(type, mtu, psnA, psnB, n, timeout, retryCnt, rnrRetry, minRnrTimer, maxWr);
        }

        Config retries(int timeoutExp, int retry, int rnr) {
            return new Config(type, mtu, psnA, psnB, rdAtomic, timeoutExp, retry, rnr, minRnrTimer, maxWr);
        }

        Config minRnrTimer(int code) {
            return new Config(type, mtu, psnA, psnB, rdAtomic, timeout, retryCnt, rnrRetry, code, maxWr);
        }
    }

    /** One end. */
    static final class Side {
        final String name;
        final SoftDevice dev;
        final Context ctx;
        final ProtectionDomain pd;
        final CompletionQueue scq;
        final CompletionQueue rcq;
        final MemorySegment mem;
        final MemoryRegion mr;
        final QueuePair qp;
        AddressHandle ahToPeer;

        Side(String name, SoftDevice dev, Arena arena, Config cfg, int recvCqe, int memBytes) {
            this.name = name;
            this.dev = dev;
            ctx = dev.open();
            pd = ctx.allocPd();
            scq = ctx.createCq(8192, null, 0);
            rcq = ctx.createCq(recvCqe, null, 0);
            mem = arena.allocate(memBytes, 4096);
            mr = pd.regMr(mem, EnumSet.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE, AccessFlag.REMOTE_READ,
                    AccessFlag.REMOTE_ATOMIC));
            qp = pd.createQp(new QpInitAttributes().type(cfg.type()).sendCq(scq).recvCq(rcq)
                    .cap(new QpCapabilities(cfg.maxWr(), cfg.maxWr(), 2, 1, 64)));
        }

        long addr(long off) {
            return mr.address() + off;
        }

        void close() {
            for (AsyncEvent ev; (ev = ctx.getAsyncEvent(Duration.ZERO)) != null; ) {
                ctx.ackAsyncEvent(ev);
            }
            if (ahToPeer != null) {
                ahToPeer.close();
            }
            qp.close();
            mr.close();
            scq.close();
            rcq.close();
            pd.close();
            ctx.close();
        }
    }

    final Config cfg;
    final long seed;
    final ManualClock clock;
    final SoftFabric fabric;
    final FaultInjectingLink link;
    final Side a;
    final Side b;
    /** Whether this pair made the fabric (and closes it): false for pairs sharing one ({@link #on}). */
    private final boolean ownsFabric;
    private final Arena arena = Arena.ofShared();

    LossyPair(Config cfg, long seed, FaultInjectingLink.Faults faults) {
        this(cfg, seed, faults, 8192);
    }

    /** @param recvCqe the size of B's receive CQ (A's holds 8192) */
    LossyPair(Config cfg, long seed, FaultInjectingLink.Faults faults, int recvCqe) {
        this(cfg, seed, faults, recvCqe, MEM);
    }

    /**
     * @param recvCqe  the size of B's receive CQ (A's holds 8192)
     * @param memBytes the size of each side's region ({@link #MEM} unless a run needs more)
     */
    LossyPair(Config cfg, long seed, FaultInjectingLink.Faults faults, int recvCqe, int memBytes) {
        this(cfg, seed, newFabric(), null, null, null, faults, recvCqe, memBytes);
    }

    private static SoftFabric newFabric() {
        return new SoftFabric(new ManualClock(), true);
    }

    /**
     * Another pair of QPs on the devices and lossy link of {@code first}: several pairs share one fabric, its
     * link and its clock, each driven by a thread of its own (SoftLossyConcurrentRcPropertiesTest).
     *
     * @param first a pair that made the fabric
     * @param cfg   this pair's QP parameters
     * @return the new pair; close it before {@code first}
     */
    static LossyPair on(LossyPair first, Config cfg) {
        return new LossyPair(cfg, first.seed, first.fabric, first.link, first.a.dev, first.b.dev, null, 8192, MEM);
    }

    private LossyPair(Config cfg, long seed, SoftFabric fabric, FaultInjectingLink shared, SoftDevice devA,
                      SoftDevice devB, FaultInjectingLink.Faults faults, int recvCqe, int memBytes) {
        this.cfg = cfg;
        this.seed = seed;
        this.fabric = fabric;
        this.clock = (ManualClock) fabric.clock();
        this.ownsFabric = shared == null;
        SoftDevice da = devA != null ? devA : fabric.addDevice("lossy0");
        SoftDevice db = devB != null ? devB : fabric.addDevice("lossy1");
        if (shared == null) {
            link = new FaultInjectingLink(fabric, fabric.inProcess, seed, faults);
            fabric.setLink(link);
        } else {
            link = shared;
        }
        a = new Side("A", da, arena, cfg, 8192, memBytes);
        b = new Side("B", db, arena, cfg, recvCqe, memBytes);
        SplittableRandom r = new SplittableRandom(seed ^ 0x5DEECE66DL);
        for (Side s : List.of(a, b)) {
            for (long i = 0; i < s.mem.byteSize(); i += 8) {
                s.mem.set(java.lang.foreign.ValueLayout.JAVA_LONG, i, r.nextLong());
            }
        }
        if (cfg.type() == QpType.UD) {
            activateUd(a.qp, cfg.psnA());
            activateUd(b.qp, cfg.psnB());
            a.ahToPeer = a.pd.createAh(new AhAttributes().dgid(b.ctx.queryGid(1, 0)).portNum(1));
            b.ahToPeer = b.pd.createAh(new AhAttributes().dgid(a.ctx.queryGid(1, 0)).portNum(1));
        } else {
            connect(a, b, cfg.psnA(), cfg.psnB());
            connect(b, a, cfg.psnB(), cfg.psnA());
        }
    }

    private void connect(Side s, Side peer, int sqPsn, int rqPsn) {
        boolean rc = cfg.type() == QpType.RC;
        s.qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1).accessFlags(rc
                ? EnumSet.of(AccessFlag.REMOTE_WRITE, AccessFlag.REMOTE_READ, AccessFlag.REMOTE_ATOMIC)
                : EnumSet.of(AccessFlag.REMOTE_WRITE)));
        QpAttributes rtr = new QpAttributes().state(QpState.RTR).av(new AhAttributes().dgid(peer.ctx.queryGid(1, 0)))
                .pathMtu(cfg.mtu()).destQpNum(peer.qp.qpNum()).rqPsn(rqPsn);
        if (rc) {
            rtr.maxDestRdAtomic(cfg.rdAtomic()).minRnrTimer(cfg.minRnrTimer());
        }
        s.qp.modify(rtr);
        QpAttributes rts = new QpAttributes().state(QpState.RTS).sqPsn(sqPsn);
        if (rc) {
            rts.timeout(cfg.timeout()).retryCnt(cfg.retryCnt()).rnrRetry(cfg.rnrRetry()).maxRdAtomic(cfg.rdAtomic());
        }
        s.qp.modify(rts);
    }

    private static void activateUd(QueuePair qp, int psn) {
        qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1).qkey(QKEY));
        qp.modify(new QpAttributes().state(QpState.RTR));
        qp.modify(new QpAttributes().state(QpState.RTS).sqPsn(psn));
    }

    /** @return the local ACK timeout in nanoseconds */
    long timeoutNs() {
        return Aeth.retransmitTimeoutNs(cfg.timeout());
    }

    private long stepNs;

    /** @return a clock step: a quarter of the ACK timeout unless {@link #stepNs(long)} set another */
    long stepNs() {
        return stepNs > 0 ? stepNs : Math.max(1_000, timeoutNs() / 4);
    }

    /** Sets the clock step of {@link #step()} (for a link with a latency: a fraction of it). */
    void stepNs(long ns) {
        stepNs = ns;
    }

    /** Moves the clock one step. */
    void step() {
        clock.advance(stepNs());
    }

    /**
     * Polls the CQs, stepping the clock while something is missing, until each has given its count.
     *
     * @param want     per CQ, how many completions are expected
     * @param maxSteps bound on clock steps
     * @return the completions per CQ, in order
     */
    List<List<WorkCompletion>> collect(CompletionQueue[] cqs, int[] want, int maxSteps) {
        List<List<WorkCompletion>> got = new ArrayList<>();
        for (int i = 0; i < cqs.length; i++) {
            got.add(new ArrayList<>());
        }
        WorkCompletion wc = new WorkCompletion();
        for (int stepNo = 0; ; stepNo++) {
            boolean done = true;
            for (int i = 0; i < cqs.length; i++) {
                while (got.get(i).size() < want[i] && cqs[i].poll(wc)) {
                    got.get(i).add(new WorkCompletion().copyFrom(wc));
                }
                done &= got.get(i).size() >= want[i];
            }
            if (done) {
                return got;
            }
            if (stepNo >= maxSteps) {
                StringBuilder sb = new StringBuilder("completions missing after " + maxSteps + " clock steps of "
                        + stepNs() + " ns:");
                for (int i = 0; i < cqs.length; i++) {
                    sb.append("\n  cq#").append(i).append(": ").append(got.get(i).size()).append('/').append(want[i]);
                }
                throw new AssertionError(sb.append('\n').append(describe()).toString());
            }
            step();
        }
    }

    /** Steps the clock {@code steps} times and returns whatever completions appear meanwhile. */
    List<WorkCompletion> quiesce(int steps) {
        List<WorkCompletion> extra = new ArrayList<>();
        WorkCompletion wc = new WorkCompletion();
        for (int i = 0; i <= steps; i++) {
            for (CompletionQueue cq : List.of(a.scq, a.rcq, b.scq, b.rcq)) {
                while (cq.poll(wc)) {
                    extra.add(new WorkCompletion().copyFrom(wc));
                }
            }
            if (i < steps) {
                step();
            }
        }
        return extra;
    }

    /** @return everything needed to understand and repeat a failure */
    String describe() {
        StringBuilder sb = new StringBuilder("seed=").append(seed).append(' ').append(cfg).append('\n').append(link);
        for (Side s : List.of(a, b)) {
            sb.append('\n').append(s.name).append(" qpn 0x").append(Integer.toHexString(s.qp.qpNum())).append(' ')
                    .append(s.qp.state()).append(':');
            for (SoftCounter c : SoftCounter.values()) {
                long v = s.dev.counter(c);
                if (v != 0) {
                    sb.append(' ').append(c).append('=').append(v);
                }
            }
        }
        return sb.toString();
    }

    @Override
    public void close() {
        a.close();
        b.close();
        if (ownsFabric) {
            fabric.close();
        }
        arena.close();
    }
}
