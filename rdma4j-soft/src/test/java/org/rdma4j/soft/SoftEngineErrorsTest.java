// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.net.InetAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
import org.rdma4j.common.NanoClock;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.AsyncEventType;
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
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * No engine thread dies silently (issue 16, item 6): a fault injected into one QP's processing (a link that
 * throws while that QP's packet goes out) is caught where the unit of work runs, on whichever thread runs
 * it (the poster's, the timer agent's, a RoCE receive agent's), and takes only that QP to ERR with flushed
 * completions, a QP_FATAL event and {@link SoftCounter#ENGINE_ERRORS}; the thread carries on and the other
 * QP of the same devices keeps working. Waits are bounded.
 */
class SoftEngineErrorsTest {
    private static final Duration BOUND = Duration.ofSeconds(60);
    private final List<AutoCloseable> open = new ArrayList<>();
    private final Arena arena = Arena.ofShared();

    /** Throws while the victim QP sends, once armed; everything else passes to the real link. */
    private static final class FaultyLink implements Link {
        final Link next;
        volatile Predicate<Packet> throwIf = p -> false;
        volatile int thrown;

        FaultyLink(Link next) {
            this.next = next;
        }

        @Override
        public void send(SoftDevice from, Packet p) {
            if (throwIf.test(p)) {
                thrown++;
                throw new IllegalStateException("injected fault for QP 0x" + Integer.toHexString(p.srcQpn));
            }
            next.send(from, p);
        }

        @Override
        public void close() {
            next.close();
        }
    }

    /** One QP with its CQs and an MR. */
    private final class Ep {
        final Context ctx;
        final ProtectionDomain pd;
        final CompletionQueue cq;
        final MemoryRegion mr;
        final QueuePair qp;

        Ep(SoftDevice dev) {
            ctx = keep(dev.open());
            pd = keep(ctx.allocPd());
            cq = keep(ctx.createCq(256, null, 0));
            mr = keep(pd.regMr(arena.allocate(4096, 64), EnumSet.allOf(AccessFlag.class)));
            qp = keep(pd.createQp(new QpInitAttributes().type(QpType.RC).sendCq(cq).recvCq(cq)
                    .cap(new QpCapabilities(64, 64, 1, 1, 0))));
        }

        /** Connects with a generous timeout (16: 268 ms): the clock follows wall time, and this machine is loaded. */
        void connect(Ep peer, int retryCnt) {
            connect(peer, retryCnt, 16);
        }

        void connect(Ep peer, int retryCnt, int timeout) {
            qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1)
                    .accessFlags(EnumSet.of(AccessFlag.REMOTE_WRITE, AccessFlag.REMOTE_READ)));
            qp.modify(new QpAttributes().state(QpState.RTR).av(new AhAttributes().dgid(peer.ctx.queryGid(1, 0)))
                    .pathMtu(Mtu.MTU_1024).destQpNum(peer.qp.qpNum()).rqPsn(0).maxDestRdAtomic(1).minRnrTimer(1));
            qp.modify(new QpAttributes().state(QpState.RTS).sqPsn(0).timeout(timeout).retryCnt(retryCnt).rnrRetry(7)
                    .maxRdAtomic(1));
        }

        void recv(long id) {
            RecvWorkRequest r = new RecvWorkRequest().wrId(id).singleSge(mr.address() + 2048, 1024, mr.lkey());
            assertTrue(qp.postRecv(r), () -> "postRecv: " + r.postErrorMessage());
        }

        void send(long id) {
            SendWorkRequest w = new SendWorkRequest().wrId(id).opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                    .singleSge(mr.address(), 64, mr.lkey());
            assertTrue(qp.postSend(w), () -> "postSend: " + w.postErrorMessage());
        }

        /**
         * Polls until a completion with this wr_id comes, others being skipped. A manual {@code clock} is moved
         * on as wall time passes, so retransmit timers run at the pace packets really travel.
         */
        WorkCompletion await(long id, ManualClock clock) {
            return ClockedPoll.await(cq, id, clock, BOUND);
        }

        AsyncEvent event(AsyncEventType type) {
            long deadline = System.nanoTime() + BOUND.toNanos();
            while (System.nanoTime() - deadline < 0) {
                AsyncEvent ev = ctx.getAsyncEvent(Duration.ofMillis(10));
                if (ev != null) {
                    ctx.ackAsyncEvent(ev);
                    if (ev.type() == type) {
                        return ev;
                    }
                }
            }
            throw new AssertionError("no " + type + " within " + BOUND);
        }
    }

    private <T extends AutoCloseable> T keep(T c) {
        open.add(c);
        return c;
    }

    @AfterEach
    void tearDown() throws Exception {
        for (int i = open.size() - 1; i >= 0; i--) {
            open.get(i).close();
        }
        arena.close();
    }

    /** A SEND that works, both ways, on the pair that was not faulted. */
    private static void stillWorks(Ep a, Ep b, long id, ManualClock clock) {
        b.recv(id);
        a.send(id);
        assertEquals(WcStatus.SUCCESS, a.await(id, clock).status(), "send on the healthy pair");
        assertEquals(WcStatus.SUCCESS, b.await(id, clock).status(), "receive on the healthy pair");
    }

    private static void assertFaulted(Ep victim, SoftDevice dev, long errorsBefore) {
        assertEquals(QpState.ERR, victim.qp.state(), "the QP whose work failed");
        assertTrue(dev.counter(SoftCounter.ENGINE_ERRORS) > errorsBefore, "ENGINE_ERRORS counted");
        AsyncEvent ev = victim.event(AsyncEventType.QP_FATAL);
        assertEquals(victim.qp, ev.qp(), "QP_FATAL names the QP");
    }

    @Test
    void aFaultInTheResponderOfOneQpLeavesTheOtherWorkingInProcess() {
        assertTimeoutPreemptively(BOUND, () -> {
            ManualClock clock = new ManualClock();
            SoftFabric f = keep(new SoftFabric(clock, true));
            SoftDevice d0 = f.addDevice("e0");
            SoftDevice d1 = f.addDevice("e1");
            FaultyLink faulty = new FaultyLink(d1.link());
            d1.link(faulty);
            Ep a1 = new Ep(d0);
            Ep b1 = new Ep(d1);
            Ep a2 = new Ep(d0);
            Ep b2 = new Ep(d1);
            a1.connect(b1, 2, 10);
            b1.connect(a1, 2, 10);
            a2.connect(b2, 6);
            b2.connect(a2, 6);
            stillWorks(a2, b2, 1, clock);
            // b1's ACK throws: inside b1's receive processing, which runs on the posting thread in process
            faulty.throwIf = p -> p.srcQpn == b1.qp.qpNum();
            long before = d1.counter(SoftCounter.ENGINE_ERRORS);
            b1.recv(5);
            a1.send(5);
            assertEquals(WcStatus.SUCCESS, b1.await(5, clock).status(), "b1 received before its ACK failed");
            assertFaulted(b1, d1, before);
            assertTrue(faulty.thrown > 0, "the fault was injected");
            // a1 never got its ACK: it retries into an ERR QP and gives up
            assertEquals(WcStatus.RETRY_EXC_ERR, a1.await(5, clock).status(), "a1");
            stillWorks(a2, b2, 2, clock);
            stillWorks(b2, a2, 3, clock);
        });
    }

    @Test
    void aFaultInOneQpsTimerLeavesTheTimerAgentServingTheOthers() {
        assertTimeoutPreemptively(BOUND, () -> {
            SoftFabric f = keep(new SoftFabric(NanoClock.SYSTEM));
            SoftDevice d0 = f.addDevice("t0");
            SoftDevice d1 = f.addDevice("t1");
            FaultyLink faulty = new FaultyLink(d0.link());
            d0.link(faulty);
            Ep a1 = new Ep(d0);
            Ep b1 = new Ep(d1);
            Ep a2 = new Ep(d0);
            Ep b2 = new Ep(d1);
            a1.connect(b1, 7, 8);
            b1.connect(a1, 7, 8);
            a2.connect(b2, 7);
            b2.connect(a2, 7);
            // a1's peer does not answer: its SEND is retransmitted by the timer agent, which then throws
            b1.qp.modify(new QpAttributes().state(QpState.RESET));
            long before = d0.counter(SoftCounter.ENGINE_ERRORS);
            a1.send(5);
            faulty.throwIf = p -> p.srcQpn == a1.qp.qpNum();
            assertEquals(WcStatus.WR_FLUSH_ERR, a1.await(5, null).status(), "a1's SEND is flushed");
            assertFaulted(a1, d0, before);
            // a2 waits on an RNR NAK (no receive posted): only the timer agent can send its retry
            a2.send(6);
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(50);
            while (System.nanoTime() - deadline < 0 && d0.counter(SoftCounter.RCV_RNR_ERR) == 0) {
                Thread.onSpinWait();
            }
            b2.recv(6);
            assertEquals(WcStatus.SUCCESS, a2.await(6, null).status(), "a2's SEND, retried by the timer agent");
            assertEquals(WcStatus.SUCCESS, b2.await(6, null).status());
            stillWorks(a2, b2, 7, null);
        });
    }

    @Test
    void aFaultInOneQpsReceiveOverRoceLeavesTheReceiveAgentServingTheOthers() {
        assertTimeoutPreemptively(BOUND, () -> {
            ManualClock clock = new ManualClock();
            int port = SoftRoceTestFabric.freeUdpPort();
            SoftFabric fa = keep(new SoftFabric(clock));
            SoftFabric fb = keep(new SoftFabric(clock));
            SoftDevice d0 = fa.addRoceDevice("rxe0", new RoceConfig(List.of(InetAddress.ofLiteral("127.0.0.1")), port,
                    null));
            SoftDevice d1 = fb.addRoceDevice("rxe1", new RoceConfig(List.of(InetAddress.ofLiteral("127.0.0.2")), port,
                    null));
            FaultyLink faulty = new FaultyLink(d1.link());
            d1.link(faulty);
            Ep a1 = new Ep(d0);
            Ep b1 = new Ep(d1);
            Ep a2 = new Ep(d0);
            Ep b2 = new Ep(d1);
            a1.connect(b1, 2, 10);
            b1.connect(a1, 2, 10);
            a2.connect(b2, 6);
            b2.connect(a2, 6);
            stillWorks(a2, b2, 1, clock);
            // b1's ACK throws inside b1's receive processing: on rxe1's receive agent (nobody polls b1's CQ)
            faulty.throwIf = p -> p.srcQpn == b1.qp.qpNum();
            long before = d1.counter(SoftCounter.ENGINE_ERRORS);
            b1.recv(5);
            a1.send(5);
            assertEquals(WcStatus.RETRY_EXC_ERR, a1.await(5, clock).status(), "a1 never got an ACK");
            assertFaulted(b1, d1, before);
            stillWorks(a2, b2, 2, clock);
            stillWorks(b2, a2, 3, clock);
        });
    }
}
