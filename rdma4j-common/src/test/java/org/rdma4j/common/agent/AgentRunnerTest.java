// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

class AgentRunnerTest {
    private static final long WAIT_NS = 30_000_000_000L;

    /** Counts cycles; throws on the cycles a test asks for; records the threads of its callbacks. */
    private static final class TestAgent implements Agent {
        final AtomicInteger cycles = new AtomicInteger();
        final AtomicInteger work = new AtomicInteger();
        final AtomicReference<Thread> startThread = new AtomicReference<>();
        final AtomicReference<Thread> workThread = new AtomicReference<>();
        final AtomicReference<Thread> closeThread = new AtomicReference<>();
        volatile int throwEvery;

        @Override
        public int doWork() {
            workThread.set(Thread.currentThread());
            int c = cycles.incrementAndGet();
            if (throwEvery > 0 && c % throwEvery == 0) {
                throw new IllegalStateException("cycle " + c + " fails");
            }
            return work.getAndSet(0);
        }

        @Override
        public String roleName() {
            return "test-agent";
        }

        @Override
        public void onStart() {
            startThread.set(Thread.currentThread());
        }

        @Override
        public void onClose() {
            closeThread.set(Thread.currentThread());
        }
    }

    private static void await(java.util.function.BooleanSupplier c, String what) {
        long end = System.nanoTime() + WAIT_NS;
        while (!c.getAsBoolean()) {
            if (System.nanoTime() - end > 0) {
                throw new AssertionError("timed out waiting for " + what);
            }
            Thread.yield();
        }
    }

    @Test
    void shouldKeepRunningWhenACycleThrowsAndReportEveryError() {
        TestAgent a = new TestAgent();
        a.throwEvery = 3;
        List<Throwable> seen = new CopyOnWriteArrayList<>();
        try (AgentRunner r = AgentRunner.start(a, new ParkingIdleStrategy(1_000, 100_000), (ag, t) -> {
            assertSame(a, ag);
            seen.add(t);
        })) {
            await(() -> a.cycles.get() >= 30, "30 cycles");
            assertTrue(r.isRunning());
            assertTrue(r.errors() >= 9, "errors counted: " + r.errors());
            assertTrue(seen.size() >= 9);
            assertTrue(seen.get(0) instanceof IllegalStateException);
            assertEquals("rdma4j-test-agent", r.thread().getName());
            assertTrue(r.thread().isDaemon());
        }
        assertSame(a.startThread.get(), a.workThread.get(), "onStart and doWork on the runner's thread");
        assertSame(a.workThread.get(), a.closeThread.get(), "onClose on the runner's thread");
    }

    @Test
    void shouldSurviveAnErrorHandlerThatThrows() {
        TestAgent a = new TestAgent();
        a.throwEvery = 1;
        try (AgentRunner r = AgentRunner.start(a, new ParkingIdleStrategy(1_000, 10_000), (ag, t) -> {
            throw new RuntimeException("bad handler");
        })) {
            await(() -> r.errors() >= 5, "5 errors");
            assertTrue(r.thread().isAlive());
        }
    }

    @Test
    void shouldEndTheThreadOnClose() {
        TestAgent a = new TestAgent();
        AgentRunner r = AgentRunner.start(a, new ParkingIdleStrategy(1_000_000, 1_000_000_000L), (ag, t) -> { });
        await(() -> a.cycles.get() > 0, "a cycle");
        r.close();
        assertFalse(r.thread().isAlive(), "close waits for the thread");
        assertFalse(r.isRunning());
        assertTrue(a.closeThread.get() != null);
    }

    @Test
    void shouldCutAParkShortWhenWoken() {
        TestAgent a = new TestAgent();
        // parks of up to an hour: only wake() can bring the next cycle
        try (AgentRunner r = AgentRunner.start(a, new ParkingIdleStrategy(3_600_000_000_000L, 3_600_000_000_000L),
                (ag, t) -> { })) {
            await(() -> a.cycles.get() >= 1 && r.thread().getState() == Thread.State.TIMED_WAITING, "the first park");
            int before = a.cycles.get();
            r.wake();
            await(() -> a.cycles.get() > before, "a cycle after wake");
        }
    }

    @Test
    void shouldNotParkLongerThanTheAgentsIdleBudget() {
        AtomicInteger cycles = new AtomicInteger();
        Agent a = new Agent() {
            @Override
            public int doWork() {
                cycles.incrementAndGet();
                return 0;
            }

            @Override
            public String roleName() {
                return "budget";
            }

            @Override
            public long idleBudgetNs() {
                return 1_000_000; // 1 ms, against a strategy that would park for an hour
            }
        };
        try (AgentRunner r = AgentRunner.start(a, new ParkingIdleStrategy(3_600_000_000_000L, 3_600_000_000_000L),
                (ag, t) -> { })) {
            await(() -> cycles.get() >= 5, "5 cycles within the budget of " + r);
        }
    }
}
