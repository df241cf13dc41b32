// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.rdma4j.common.ManualClock;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Errno;
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
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * The RoCE receive agents run under an {@code AgentRunner} with the idle strategy of
 * {@code -Drdma4j.soft.roceRxIdle} (issue 15): a loopback exchange whose every packet only a receive agent can take
 * (an RDMA WRITE's target has no poller; a receiver blocked on a completion channel hands receiving back to the
 * agent) works with each choice; a fault in the agent's own work is reported and the agent carries on; closing the
 * link ends the agents without an error. Two hosts (two fabrics) on 127.0.0.1 and 127.0.0.2, as
 * {@link SoftRoceTestFabric}. Waits are bounded loops on a condition.
 */
class SoftRoceRxIdleTest {
    private static final Duration BOUND = Duration.ofSeconds(60);
    private final List<AutoCloseable> open = new ArrayList<>();
    private final Arena arena = Arena.ofShared();

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

    /** One RC QP with a CQ on a completion channel and a registered buffer. */
    private final class Ep {
        final Context ctx;
        final CompletionChannel ch;
        final CompletionQueue cq;
        final MemoryRegion mr;
        final QueuePair qp;
        final MemorySegment buf;

        Ep(SoftDevice dev) {
            ctx = keep(dev.open());
            ProtectionDomain pd = keep(ctx.allocPd());
            ch = keep(ctx.createCompChannel());
            cq = keep(ctx.createCq(64, ch, 0));
            buf = arena.allocate(4096, 64);
            mr = keep(pd.regMr(buf, EnumSet.allOf(AccessFlag.class)));
            qp = keep(pd.createQp(new QpInitAttributes().type(QpType.RC).sendCq(cq).recvCq(cq)
                    .cap(new QpCapabilities(16, 16, 1, 1, 0))));
        }

        void connect(Ep peer) {
            qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1)
                    .accessFlags(EnumSet.of(AccessFlag.REMOTE_WRITE, AccessFlag.REMOTE_READ)));
            qp.modify(new QpAttributes().state(QpState.RTR).av(new AhAttributes().dgid(peer.ctx.queryGid(1, 0)))
                    .pathMtu(Mtu.MTU_1024).destQpNum(peer.qp.qpNum()).rqPsn(0).maxDestRdAtomic(1).minRnrTimer(1));
            qp.modify(new QpAttributes().state(QpState.RTS).sqPsn(0).timeout(16).retryCnt(7).rnrRetry(7)
                    .maxRdAtomic(1));
        }

        /** Writes {@code value} into the peer's buffer at {@code off}; only the peer's receive agent takes it. */
        void write(Ep peer, long id, int off, long value) {
            buf.set(ValueLayout.JAVA_LONG, 0, value);
            SendWorkRequest w = new SendWorkRequest().wrId(id).opcode(WrOpcode.RDMA_WRITE)
                    .sendFlags(SendFlags.SIGNALED).singleSge(mr.address(), 8, mr.lkey())
                    .remoteAddr(peer.mr.address() + off).rkey(peer.mr.rkey());
            assertTrue(qp.postSend(w), () -> "postSend: " + w.postErrorMessage());
        }

        void recv(long id) {
            RecvWorkRequest r = new RecvWorkRequest().wrId(id).singleSge(mr.address() + 2048, 1024, mr.lkey());
            assertTrue(qp.postRecv(r), () -> "postRecv: " + r.postErrorMessage());
        }

        void send(long id, long value) {
            buf.set(ValueLayout.JAVA_LONG, 8, value);
            SendWorkRequest w = new SendWorkRequest().wrId(id).opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                    .singleSge(mr.address() + 8, 8, mr.lkey());
            assertTrue(qp.postSend(w), () -> "postSend: " + w.postErrorMessage());
        }

        /** Polls for the completion {@code id}; the manual clock follows wall time, so timers run. */
        WorkCompletion await(long id, ManualClock clock) {
            return ClockedPoll.await(cq, id, clock, BOUND);
        }

        /**
         * Waits for the completion {@code id} blocked on the channel: this thread then receives nothing, so the
         * device's receive agent must deliver the packet.
         */
        WorkCompletion awaitOnChannel(long id) {
            WorkCompletion wc = new WorkCompletion();
            long deadline = System.nanoTime() + BOUND.toNanos();
            while (System.nanoTime() - deadline < 0) {
                cq.reqNotify(false);
                while (cq.poll(wc)) {
                    if (wc.wrId() == id) {
                        return wc;
                    }
                }
                CompletionQueue ev = ch.getCqEvent(Duration.ofMillis(100));
                if (ev != null) {
                    assertSame(cq, ev);
                    cq.ackEvents(1);
                }
            }
            throw new AssertionError("no completion for wr_id " + id + " on the channel within " + BOUND);
        }
    }

    /** Two RoCE devices on two fabrics, made while {@code -Drdma4j.soft.roceRxIdle} is {@code idle} (null: unset). */
    private SoftDevice[] devices(ManualClock clock, String idle) {
        String before = System.getProperty(RoceEndpoint.RX_IDLE_PROPERTY);
        try {
            if (idle == null) {
                System.clearProperty(RoceEndpoint.RX_IDLE_PROPERTY);
            } else {
                System.setProperty(RoceEndpoint.RX_IDLE_PROPERTY, idle);
            }
            int port = SoftRoceTestFabric.freeUdpPort();
            SoftFabric fa = keep(new SoftFabric(clock));
            SoftFabric fb = keep(new SoftFabric(clock));
            return new SoftDevice[] {
                fa.addRoceDevice("rxe0", new RoceConfig(List.of(InetAddress.ofLiteral("127.0.0.1")), port, null)),
                fb.addRoceDevice("rxe1", new RoceConfig(List.of(InetAddress.ofLiteral("127.0.0.2")), port, null)) };
        } finally {
            if (before == null) {
                System.clearProperty(RoceEndpoint.RX_IDLE_PROPERTY);
            } else {
                System.setProperty(RoceEndpoint.RX_IDLE_PROPERTY, before);
            }
        }
    }

    private static RoceEndpoint endpoint(SoftDevice d) {
        List<RoceEndpoint> eps = d.roceLink().receiveEndpoints();
        assertEquals(1, eps.size(), "one address, one endpoint");
        return eps.get(0);
    }

    private static void waitFor(BooleanSupplier condition, String what) {
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError(what + " within " + BOUND);
            }
            Thread.onSpinWait();
        }
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(nullValues = "unset", value = {
        "unset, block",
        "busy-spin, spin",
        "yield, yield",
        "backoff, backoff:1000:100:50us:1ms" })
    void aLoopbackExchangeGoesThroughTheReceiveAgentsWithEachIdleStrategy(String property, String alias) {
        assertTimeoutPreemptively(BOUND, () -> {
            ManualClock clock = new ManualClock();
            SoftDevice[] d = devices(clock, property);
            for (int i = 0; i < 2; i++) {
                RoceEndpoint e = endpoint(d[i]);
                assertEquals("rdma4j-roce-rx-rxe" + i + "-v4", e.agent.getName(), "the thread's name is unchanged");
                assertTrue(e.runner.toString().contains("idle=" + alias + ","), e.runner::toString);
                assertTrue(e.agent.isAlive(), "started with the device");
            }
            Ep a = new Ep(d[0]);
            Ep b = new Ep(d[1]);
            a.connect(b);
            b.connect(a);
            for (int round = 0; round < 20; round++) {
                long v = 0x1000L + round;
                // nobody polls the target's CQ: its receive agent takes the WRITE and sends the ACK
                a.write(b, 2L * round, 64, v);
                assertEquals(WcStatus.SUCCESS, a.await(2L * round, clock).status(), "a's WRITE " + round);
                assertEquals(v, b.buf.get(ValueLayout.JAVA_LONG, 64), "the WRITE landed on b");
                b.write(a, 2L * round + 1, 128, ~v);
                assertEquals(WcStatus.SUCCESS, b.await(2L * round + 1, clock).status(), "b's WRITE " + round);
                assertEquals(~v, a.buf.get(ValueLayout.JAVA_LONG, 128), "the WRITE landed on a");
            }
            // b, which polled a moment ago, blocks on its channel: its agent takes over from the poller at once
            for (int round = 0; round < 5; round++) {
                long id = 100 + round;
                b.recv(id);
                a.send(id, 0x5EEDL + round);
                WorkCompletion wc = b.awaitOnChannel(id);
                assertEquals(WcStatus.SUCCESS, wc.status(), "b's receive " + round);
                assertEquals(0x5EEDL + round, b.buf.get(ValueLayout.JAVA_LONG, 2048));
                assertEquals(WcStatus.SUCCESS, a.await(id, clock).status(), "a's SEND " + round);
            }
            for (int i = 0; i < 2; i++) {
                assertEquals(0, endpoint(d[i]).runner.errors(), "no cycle failed");
            }
        });
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(nullValues = "unset", value = { "unset", "busy-spin", "park:50us:1ms" })
    void aFaultInTheReceiveAgentsOwnWorkIsReportedAndTheAgentCarriesOn(String property) {
        assertTimeoutPreemptively(BOUND, () -> {
            ManualClock clock = new ManualClock();
            SoftDevice[] d = devices(clock, property);
            Ep a = new Ep(d[0]);
            Ep b = new Ep(d[1]);
            a.connect(b);
            b.connect(a);
            a.write(b, 1, 64, 1);
            assertEquals(WcStatus.SUCCESS, a.await(1, clock).status(), "before the fault");
            RoceEndpoint e = endpoint(d[1]);
            long before = d[1].counter(SoftCounter.ENGINE_ERRORS);
            AtomicInteger thrown = new AtomicInteger();
            e.cycleHook = () -> {
                if (thrown.get() < 3) {
                    thrown.incrementAndGet();
                    throw new IllegalStateException("injected fault in the receive agent's cycle");
                }
            };
            waitFor(() -> e.runner.errors() >= 3, "three failed cycles reported");
            e.cycleHook = null;
            assertEquals(3, thrown.get());
            assertEquals(3, e.runner.errors(), "each failure went to the runner's error handler");
            assertTrue(d[1].counter(SoftCounter.ENGINE_ERRORS) >= before + 3, "EngineErrors.agentFailed counted them");
            assertTrue(e.agent.isAlive(), "the agent's thread did not die");
            for (int round = 0; round < 5; round++) {
                a.write(b, 10 + round, 64, 42 + round);
                assertEquals(WcStatus.SUCCESS, a.await(10 + round, clock).status(), "after the fault " + round);
                assertEquals(42 + round, b.buf.get(ValueLayout.JAVA_LONG, 64), "b's agent still receives");
            }
        });
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(nullValues = "unset", value = { "unset", "yield", "park:100ms:100ms" })
    void closingTheLinkEndsTheAgentsCleanly(String property) {
        assertTimeoutPreemptively(BOUND, () -> {
            SoftDevice[] d = devices(new ManualClock(), property);
            RoceLink link = d[0].roceLink();
            RoceEndpoint e = endpoint(d[0]);
            assertTrue(e.agent.isAlive());
            long start = System.nanoTime();
            link.close();
            assertFalse(e.agent.isAlive(), "the agent ended within close");
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(2),
                    "close did not wait out its join (the agent saw the closed link or socket)");
            assertTrue(e.batchFreed(), "the receive batch is freed");
            assertEquals(0, e.runner.errors(), "a closed socket or link is the agent's end, not an error");
            assertFalse(e.runner.isRunning());
        });
    }

    @Test
    void anUnknownIdleStrategyIsRefusedWithTheAcceptedForms() {
        VerbsException ex = assertThrows(VerbsException.class, () -> devices(new ManualClock(), "sleepy"));
        assertEquals(Errno.EINVAL, ex.errno());
        assertNotNull(ex.getMessage());
        assertTrue(ex.getMessage().contains(RoceEndpoint.RX_IDLE_PROPERTY) && ex.getMessage().contains("block")
                && ex.getMessage().contains("backoff"), ex.getMessage());
    }
}
