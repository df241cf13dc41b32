// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.WcOpcode;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;

/**
 * Arming a CQ races with a completion (issue 15, docs/benchmarks.md "event-driven round trip"): a thread arms the
 * CQ ({@code reqNotify}) and polls it once more, as verbs require, while a QP's executor posts a completion to
 * it. Either the poll finds the completion or the post sees the arm and raises an event: never neither, or an
 * event-driven server waits for ever beside a completion it was never told of. rxe orders the two with the CQ's
 * lock (rxe_cq.c rxe_cq_post advances the producer under cq_lock; rxe_verbs.c rxe_req_notify_cq writes
 * cq->notify under it). Before the fix {@link SoftCq#post} published the slot with a release store and then read
 * {@code armed}: a store-load pair that x86 (and the JMM) may reorder, so both sides could miss.
 *
 * <p>A stress loop in the manner of jcstress, bounded in rounds and time: per round, the two threads start
 * together (a spin barrier) on a batch of CQs, one posting a completion to each, the other arming each and
 * polling it. After the round (both threads joined) every CQ is checked, then reset through the product's own
 * path (a second completion consumes a left-over arm; everything is drained).
 */
class SoftCqArmRaceTest {
    private static final int CQS = 64;
    private static final int MAX_ROUNDS = 40_000;
    private static final long MAX_NS = 8_000_000_000L;
    /** Enough trials where the two sides overlapped (the post saw the arm, the poll found the completion). */
    private static final int ENOUGH_MEETINGS = 100_000;

    @Test
    void anArmedCqWhosePollMissedACompletionRaisesItsEvent() throws Exception {
        try (SoftFabric fabric = new SoftFabric()) {
            SoftDevice dev = fabric.addDevice("d0");
            try (Context ctx = dev.open(); CompletionChannel ch = ctx.createCompChannel()) {
                SoftCq[] cqs = new SoftCq[CQS];
                CompletionQueue[] opened = new CompletionQueue[CQS];
                try {
                    for (int i = 0; i < CQS; i++) {
                        opened[i] = ctx.createCq(4, ch, 0);
                        cqs[i] = (SoftCq) opened[i];
                    }
                    run(cqs, (SoftChannel) ch);
                } finally {
                    for (CompletionQueue cq : opened) {
                        if (cq != null) {
                            cq.close();
                        }
                    }
                }
            }
        }
    }

    private static void run(SoftCq[] cqs, SoftChannel ch) throws Exception {
        boolean[] seen = new boolean[CQS];
        boolean[] evented = new boolean[CQS];
        WorkCompletion wc = new WorkCompletion();
        RoundBarrier barrier = new RoundBarrier();
        AtomicReference<Throwable> producerFailed = new AtomicReference<>();
        Thread producer = new Thread(() -> {
            try {
                for (int r = 1; barrier.awaitStart(r); r++) {
                    for (SoftCq cq : cqs) {
                        assertTrue(cq.post(r, WcStatus.SUCCESS, WcOpcode.RECV, 8, 0, 1, 0, 0, false));
                    }
                    barrier.partnerDone(r);
                }
            } catch (Throwable t) {
                producerFailed.set(t);
                barrier.partnerDone(Integer.MAX_VALUE);
            }
        }, "cq-producer");
        producer.setDaemon(true);
        producer.start();
        long start = System.nanoTime();
        long trials = 0;
        long meetings = 0;
        int round = 0;
        try {
            while (round < MAX_ROUNDS && System.nanoTime() - start < MAX_NS && meetings < ENOUGH_MEETINGS) {
                round++;
                barrier.start(round);
                for (int i = 0; i < CQS; i++) {
                    SoftCq cq = cqs[i];
                    cq.reqNotify(false);
                    seen[i] = cq.poll(wc);
                }
                barrier.awaitPartner(round, start + MAX_NS + 10_000_000_000L, "producer");
                if (producerFailed.get() != null) {
                    throw new AssertionError("the producer failed", producerFailed.get());
                }
                Arrays.fill(evented, false);
                for (CompletionQueue e; (e = ch.getCqEvent(Duration.ZERO)) != null; ) {
                    e.ackEvents(1);
                    evented[indexOf(cqs, e)] = true;
                }
                for (int i = 0; i < CQS; i++) {
                    trials++;
                    if (!seen[i] && !evented[i]) {
                        fail("round " + round + ", CQ " + i + ": the CQ was armed and polled empty, its completion"
                                + " is in it (" + cqs[i].count() + " queued) and no event was raised: an event-driven"
                                + " waiter would never be woken (lost after " + trials + " trials, " + meetings
                                + " of them with both sides meeting)");
                    }
                    if (seen[i] && evented[i]) {
                        meetings++; // the post read the arm, the poll read the completion: they overlapped
                    }
                }
                reset(cqs, ch, wc, round);
            }
        } finally {
            barrier.stop();
            producer.join(10_000);
        }
        assertTrue(!producer.isAlive(), "the producer did not stop");
        System.out.println("SoftCqArmRaceTest: " + round + " rounds, " + trials + " trials, " + meetings
                + " with the two sides overlapping, none lost");
    }

    /** Every CQ back to unarmed and empty: a completion consumes an arm the round's post did not see. */
    private static void reset(SoftCq[] cqs, SoftChannel ch, WorkCompletion wc, int round) {
        for (SoftCq cq : cqs) {
            assertTrue(cq.post(-round, WcStatus.SUCCESS, WcOpcode.RECV, 8, 0, 1, 0, 0, false));
        }
        for (CompletionQueue e; (e = ch.getCqEvent(Duration.ZERO)) != null; ) {
            e.ackEvents(1);
        }
        for (SoftCq cq : cqs) {
            while (cq.poll(wc)) {
                // drained
            }
            assertEquals(0, cq.count());
        }
    }

    private static int indexOf(SoftCq[] cqs, CompletionQueue cq) {
        for (int i = 0; i < cqs.length; i++) {
            if (cqs[i] == cq) {
                return i;
            }
        }
        throw new AssertionError("an event for a CQ of no round: " + cq);
    }
}
