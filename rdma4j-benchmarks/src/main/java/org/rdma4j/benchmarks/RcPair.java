// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.benchmarks;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.PortAttributes;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.Verbs;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;

/**
 * Two RC queue pairs on two in-process software devices, connected to each other
 * (RESET -> INIT -> RTR -> RTS), each side with its own PD, send CQ and receive CQ.
 * Device names default to {@code soft0} / {@code soft1}; override with
 * {@code -Drdma4j.bench.devA=... -Drdma4j.bench.devB=...} (pass them to JMH with {@code -jvmArgsAppend}).
 */
class RcPair implements AutoCloseable {
    static final int PORT = 1;
    /** Give up on a completion after this long instead of spinning forever inside JMH. */
    static final long POLL_TIMEOUT_NS = 10_000_000_000L;

    final Side a;
    final Side b;

    /** One end: context, PD, CQs, QP and the MRs registered on it. */
    static final class Side {
        final Context ctx;
        final ProtectionDomain pd;
        final CompletionQueue sendCq;
        final CompletionQueue recvCq;
        final QueuePair qp;
        final List<MemoryRegion> mrs = new ArrayList<>();
        /** Resources a subclass added (a CQ with a channel, the channel), closed after the QP. */
        private final List<AutoCloseable> extras = new ArrayList<>();

        Side(Device device, int cqe, QpCapabilities cap) {
            this(device, cqe, cap, null, false);
        }

        Side(Device device, int cqe, QpCapabilities cap, RcPair owner, boolean server) {
            ctx = device.open();
            pd = ctx.allocPd();
            sendCq = ctx.createCq(cqe, null, 0);
            QpInitAttributes attrs = new QpInitAttributes().type(QpType.RC).sendCq(sendCq).cap(cap).sqSigAll(false);
            CompletionQueue rcq;
            if (owner != null && server) {
                attrs = owner.serverAttributes(this, attrs);
            }
            if (attrs.recvCq() == null) {
                attrs.recvCq(ctx.createCq(cqe, null, 0));
            }
            rcq = attrs.recvCq();
            recvCq = rcq;
            qp = pd.createQp(attrs);
        }

        void extra(AutoCloseable c) {
            extras.add(c);
        }

        MemoryRegion reg(MemorySegment seg) {
            MemoryRegion mr = pd.regMr(seg, EnumSet.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE,
                    AccessFlag.REMOTE_READ));
            mrs.add(mr);
            return mr;
        }

        void close() {
            closeQuietly(qp);
            for (MemoryRegion mr : mrs) {
                closeQuietly(mr);
            }
            closeQuietly(sendCq);
            if (!extras.contains(recvCq)) {
                closeQuietly(recvCq);
            }
            for (AutoCloseable c : extras) {
                closeQuietly(c);
            }
            closeQuietly(pd);
            closeQuietly(ctx);
        }
    }

    RcPair(int cqe, QpCapabilities cap) {
        this(Verbs.device(System.getProperty("rdma4j.bench.devA", "soft0")),
                Verbs.device(System.getProperty("rdma4j.bench.devB", "soft1")), cqe, cap);
    }

    /** A pair between two given devices (e.g. of a fabric built with particular DMA modes). */
    RcPair(Device devA, Device devB, int cqe, QpCapabilities cap) {
        a = new Side(devA, cqe, cap, this, false);
        b = new Side(devB, cqe, cap, this, true);
        connect(a, b, 0x1000);
        connect(b, a, 0x2000);
    }

    /**
     * Lets a subclass change the server side's (b's) QP attributes before the QP is made, e.g. give it a
     * receive CQ with a completion channel (register what it creates with {@link Side#extra}).
     *
     * @param side  the server side being built (its context and PD exist)
     * @param attrs the attributes so far (send CQ set, receive CQ not)
     * @return the attributes to create the QP with
     */
    QpInitAttributes serverAttributes(Side side, QpInitAttributes attrs) {
        return attrs;
    }

    /** Brings {@code local} to RTS, pointing at {@code remote}. */
    private static void connect(Side local, Side remote, int psnBase) {
        PortAttributes lp = local.ctx.queryPort(PORT);
        PortAttributes rp = remote.ctx.queryPort(PORT);
        Gid dgid = remote.ctx.queryGid(PORT, 0);
        int localSqPsn = psnBase;
        int remoteSqPsn = psnBase ^ 0x3000; // what connect(remote, local, ...) uses as its SQ PSN
        local.qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(PORT)
                .accessFlags(EnumSet.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE, AccessFlag.REMOTE_READ)));
        AhAttributes av = new AhAttributes().dgid(dgid).sgidIndex(0).hopLimit(64).portNum(PORT).global(true)
                .dlid(rp.lid());
        int mtu = Math.min(lp.activeMtu().bytes(), rp.activeMtu().bytes());
        local.qp.modify(new QpAttributes().state(QpState.RTR).av(av)
                .pathMtu(lp.activeMtu().bytes() == mtu ? lp.activeMtu() : rp.activeMtu())
                .destQpNum(remote.qp.qpNum()).rqPsn(remoteSqPsn).maxDestRdAtomic(1).minRnrTimer(12));
        local.qp.modify(new QpAttributes().state(QpState.RTS).timeout(14).retryCnt(7).rnrRetry(7)
                .sqPsn(localSqPsn).maxRdAtomic(1));
    }

    /**
     * Spins on {@code cq} until one completion arrives; fails on a non-success status or after
     * {@link #POLL_TIMEOUT_NS}.
     */
    static void pollOne(CompletionQueue cq, WorkCompletion wc) {
        int spins = 0;
        long deadline = 0;
        while (!cq.poll(wc)) {
            if (++spins == 1 << 20) {
                spins = 0;
                long now = System.nanoTime();
                if (deadline == 0) {
                    deadline = now + POLL_TIMEOUT_NS;
                } else if (now - deadline > 0) {
                    throw new IllegalStateException("no completion within " + POLL_TIMEOUT_NS / 1_000_000 + " ms");
                }
            }
            // no Thread.onSpinWait(): PAUSE costs ~100+ cycles and can trigger pause-loop exits on a KVM guest
        }
        check(wc);
    }

    static void check(WorkCompletion wc) {
        if (wc.status() != WcStatus.SUCCESS) {
            throw new IllegalStateException("completion failed: " + wc);
        }
    }

    @Override
    public void close() {
        a.close();
        b.close();
    }

    static void closeQuietly(AutoCloseable c) {
        try {
            c.close();
        } catch (Exception e) {
            System.err.println("close " + c + ": " + e);
        }
    }
}
