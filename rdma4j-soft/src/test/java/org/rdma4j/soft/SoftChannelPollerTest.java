// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.WorkCompletion;

/**
 * Receiver-driven delivery leaves a packet to the thread that polls the target's CQ (docs/engine.md, "Active
 * poller"). A thread that then blocks on a completion channel polls nothing: if senders kept leaving it packets,
 * the completion that would raise its event is never made, and only the engine agent's check (about 1 ms later)
 * would run them. That was the in-process event-driven round trip of 2 ms against 3 us busy-polling
 * (docs/benchmarks.md). Once the thread waits, it must be nobody's poller, whichever of its CQs it polled last
 * (the event-driven server polls its send CQ too).
 */
class SoftChannelPollerTest {
    private static final long BOUND_NS = 10_000_000_000L;

    @Test
    void aThreadWaitingOnAChannelIsThePollerOfNoCq() throws Exception {
        try (SoftFabric fabric = new SoftFabric()) { // system clock: hand-over to pollers is on
            SoftDevice dev = fabric.addDevice("d0");
            try (Context ctx = dev.open(); CompletionChannel ch = ctx.createCompChannel();
                 CompletionQueue armedCq = ctx.createCq(4, ch, 0); CompletionQueue plainCq = ctx.createCq(4, null, 0)) {
                SoftCq armed = (SoftCq) armedCq;
                SoftCq plain = (SoftCq) plainCq;
                // a time before the waiter's polls: "active since then" holds for any poll it records, however
                // long this thread takes to look (no timing in the test)
                long before = System.nanoTime();
                AtomicReference<Throwable> failed = new AtomicReference<>();
                Thread waiter = new Thread(() -> {
                    try {
                        WorkCompletion wc = new WorkCompletion();
                        armedCq.reqNotify(false);
                        assertFalse(armedCq.poll(wc)); // the event-driven server's drain after re-arming
                        assertFalse(plainCq.poll(wc)); // and its reap of the send CQ
                        assertNull(ch.getCqEvent(Duration.ofSeconds(30))); // ended by the interrupt below
                    } catch (Throwable t) {
                        failed.set(t);
                    }
                }, "channel-waiter");
                waiter.start();
                long deadline = System.nanoTime() + BOUND_NS;
                while (waiter.getState() != Thread.State.TIMED_WAITING && waiter.isAlive()) {
                    assertTrue(System.nanoTime() - deadline < 0, "the waiter never blocked on the channel");
                    Thread.onSpinWait();
                }
                try {
                    assertFalse(armed.pollerActive(before), "the waiter still counts as the armed CQ's poller");
                    assertFalse(plain.pollerActive(before), "the waiter still counts as its other CQ's poller");
                } finally {
                    waiter.interrupt();
                    waiter.join(BOUND_NS / 1_000_000);
                }
                assertFalse(waiter.isAlive(), "the waiter did not leave getCqEvent when interrupted");
                if (failed.get() != null) {
                    throw new AssertionError("the waiter failed", failed.get());
                }
            }
        }
    }
}
