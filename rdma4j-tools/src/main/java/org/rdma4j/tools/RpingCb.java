// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

import org.rdma4j.tools.Rping.State;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.verbs.cm.CmId;

/**
 * rping's control block of one connection ({@code struct rping_cb}): its PD, completion channel, CQ, QP and
 * the four registered buffers, and the CQ thread ({@code cq_thread} with {@code rping_cq_event_handler}) that
 * moves its {@link Rping.State} on each completion and wakes the test loop through its semaphore.
 */
final class RpingCb implements AutoCloseable {
    private static final int INFO = 16;
    private static final ValueLayout.OfLong BE64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfInt BE32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private final Rping rping;
    private final int size;
    private final boolean selfQp;
    private final PrintStream err;
    private final StopSignal stop;
    final boolean isServer;
    final CmId id;
    final Arena arena = Arena.ofShared();
    final Semaphore sem = new Semaphore(0);
    volatile State state = State.IDLE;
    ProtectionDomain pd;
    CompletionChannel channel;
    CompletionQueue cq;
    QueuePair qp;
    MemoryRegion recvMr;
    MemoryRegion sendMr;
    MemoryRegion rdmaMr;
    MemoryRegion startMr;
    int remoteRkey;
    long remoteAddr;
    int remoteLen;
    Thread cqThread;
    volatile boolean cqStop;

    RpingCb(Rping rping, boolean isServer, CmId id) {
        this.rping = rping;
        this.size = rping.size;
        this.selfQp = rping.selfQp;
        this.err = rping.err;
        this.stop = rping.stop;
        this.isServer = isServer;
        this.id = id;
    }

    void setupQp() {
        pd = id.context().allocPd();
        rping.debug("created pd %s\n", pd);
        channel = id.context().createCompChannel();
        rping.debug("created channel %s\n", channel);
        cq = id.context().createCq(Rping.SQ_DEPTH * 2, channel, 0);
        rping.debug("created cq %s\n", cq);
        cq.reqNotify(false);
        QpInitAttributes init = new QpInitAttributes().type(QpType.RC).sendCq(cq).recvCq(cq)
                .cap(new QpCapabilities(Rping.SQ_DEPTH, 2, 1, 1, 0));
        if (selfQp) {
            qp = pd.createQp(init);
            qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(id.portNum()).accessFlags(0));
        } else {
            qp = id.createQp(pd, init);
        }
        rping.debug("created qp %s\n", qp);
    }

    void setupBuffers() {
        recvMr = pd.regMr(arena.allocate(INFO, 8), AccessFlag.of(AccessFlag.LOCAL_WRITE));
        sendMr = pd.regMr(arena.allocate(INFO, 8), AccessFlag.of());
        rdmaMr = pd.regMr(arena.allocate(size, 8), AccessFlag.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_READ,
                AccessFlag.REMOTE_WRITE));
        if (!isServer) {
            startMr = pd.regMr(arena.allocate(size, 8), AccessFlag.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_READ,
                    AccessFlag.REMOTE_WRITE));
        }
        rping.debug("allocated & registered buffers...\n");
    }

    boolean postRecv() {
        return qp.postRecv(new RecvWorkRequest().singleSge(recvMr.address(), INFO, recvMr.lkey()));
    }

    boolean postSendInfo() {
        return qp.postSend(new SendWorkRequest().opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                .singleSge(sendMr.address(), INFO, sendMr.lkey()));
    }

    void formatSend(MemoryRegion mr) {
        MemorySegment s = sendMr.segment();
        s.set(BE64, 0, mr.address());
        s.set(BE32, 8, mr.rkey());
        s.set(BE32, 12, size);
        rping.debug("RDMA addr %x rkey %x len %d\n", mr.address(), mr.rkey(), size);
    }

    void startCq() {
        cqThread = Thread.ofPlatform().daemon().name("rping-cq").start(this::cqLoop);
    }

    /** cq_thread with rping_cq_event_handler. */
    private void cqLoop() {
        WorkCompletion wc = new WorkCompletion();
        while (!cqStop) {
            CompletionQueue ev = channel.getCqEvent(Duration.ofMillis(100));
            if (ev == null) {
                continue;
            }
            cq.reqNotify(false);
            int ret = 0;
            while (cq.poll(wc)) {
                if (wc.status() != WcStatus.SUCCESS) {
                    if (wc.status() == WcStatus.WR_FLUSH_ERR) {
                        continue;
                    }
                    err.printf("cq completion failed status %d\n", wc.status().value());
                    ret = -1;
                    break;
                }
                switch (wc.opcode()) {
                    case SEND -> rping.debug("send completion\n");
                    case RDMA_WRITE -> {
                        rping.debug("rdma write completion\n");
                        state = State.RDMA_WRITE_COMPLETE;
                        sem.release();
                    }
                    case RDMA_READ -> {
                        rping.debug("rdma read completion\n");
                        state = State.RDMA_READ_COMPLETE;
                        sem.release();
                    }
                    case RECV -> {
                        rping.debug("recv completion\n");
                        if (wc.byteLen() != INFO) {
                            err.printf("Received bogus data, size %d\n", wc.byteLen());
                            err.printf("recv wc error: %d\n", -1);
                            ret = -1;
                            break;
                        }
                        if (isServer) {
                            MemorySegment r = recvMr.segment();
                            remoteRkey = r.get(BE32, 8);
                            remoteAddr = r.get(BE64, 0);
                            remoteLen = r.get(BE32, 12);
                            rping.debug("Received rkey %x addr %x len %d from peer\n", remoteRkey, remoteAddr, remoteLen);
                            state = state.value <= State.CONNECTED.value || state == State.RDMA_WRITE_COMPLETE
                                    ? State.RDMA_READ_ADV : State.RDMA_WRITE_ADV;
                        } else {
                            state = state == State.RDMA_READ_ADV ? State.RDMA_WRITE_ADV : State.RDMA_WRITE_COMPLETE;
                        }
                        if (!postRecv()) {
                            err.printf("post recv error: %d\n", 12);
                            ret = -1;
                            break;
                        }
                        sem.release();
                    }
                    default -> {
                        rping.debug("unknown!!!!! completion\n");
                        ret = -1;
                    }
                }
                if (ret != 0) {
                    break;
                }
            }
            cq.ackEvents(1);
            if (ret != 0) {
                state = State.ERROR;
                sem.release();
                return;
            }
        }
    }

    boolean waitSem() {
        try {
            while (!sem.tryAcquire(100, TimeUnit.MILLISECONDS)) {
                if (stop.stopped()) {
                    state = State.ERROR;
                    return false;
                }
            }
            return true;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            state = State.ERROR;
            return false;
        }
    }

    void disconnect() {
        if (selfQp && qp != null) {
            try {
                qp.modify(new QpAttributes().state(QpState.ERR));
            } catch (VerbsException e) {
                return;
            }
        }
        try {
            id.disconnect();
        } catch (VerbsException e) {
            err.println("rdma_disconnect: " + e.getMessage());
        }
    }

    @Override
    public void close() {
        cqStop = true;
        if (cqThread != null) {
            try {
                cqThread.join(2_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        for (MemoryRegion m : new MemoryRegion[] {recvMr, sendMr, rdmaMr, startMr}) {
            if (m != null) {
                m.close();
            }
        }
        if (selfQp && qp != null) {
            qp.close();
        } else {
            id.destroyQp();
        }
        if (cq != null) {
            cq.close();
        }
        if (channel != null) {
            channel.close();
        }
        if (pd != null) {
            pd.close();
        }
        arena.close();
    }
}
