// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicReference;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;

import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.QpType;

/**
 * The lossy RC properties of {@link SoftLossyRcPropertiesTest} with several threads at once (issue 15): three
 * RC QP pairs on the same two devices, over one fault-injecting link and one clock, each pair driven by a
 * thread of its own that posts its random SENDs, WRITEs, READs and atomics, polls, and steps the shared clock
 * while completions are missing. Every pair must see exactly-once, in-order delivery, correct READ data and
 * atomics, as alone. The QPs run in parallel on their own executors (docs/engine.md); the link and the
 * devices' tables, counters and timers are shared. The seed (printed by jqwik) fixes each pair's plan and the
 * faults' probabilities; the interleaving of the threads, and so the faults' placement, is the scheduler's.
 */
class SoftLossyConcurrentRcPropertiesTest {
    private static final int PAIRS = 3;
    private static final long JOIN_MS = 120_000;

    @Property(tries = 30)
    void everyPairDeliversExactlyOnceAndInOrderWhileTheOthersRun(@ForAll long seed) throws InterruptedException {
        check(seed, PAIRS, 40);
    }

    /**
     * One run: {@code pairs} RC QP pairs on one lossy fabric, each driven by its own thread through up to
     * {@code maxOps} random operations (the slow tier runs more pairs and longer plans).
     *
     * @param seed   the run's seed (the faults' probabilities and each pair's plan)
     * @param pairs  how many QP pairs, each with a thread of its own
     * @param maxOps the most operations one pair's plan has
     * @throws InterruptedException if interrupted while joining the threads
     */
    static void check(long seed, int pairs, int maxOps) throws InterruptedException {
        SplittableRandom r = new SplittableRandom(seed);
        double p = 0.05;
        FaultInjectingLink.Faults faults = new FaultInjectingLink.Faults(r.nextDouble() * p, r.nextDouble() * p,
                r.nextDouble() * p, r.nextDouble() * p, r.nextDouble() * p, 1 + r.nextLong(3_000_000));
        List<LossyPair> qps = new ArrayList<>();
        List<SplittableRandom> plans = new ArrayList<>();
        List<int[]> shapes = new ArrayList<>();
        try {
            for (int i = 0; i < pairs; i++) {
                Mtu mtu = new Mtu[] {Mtu.MTU_256, Mtu.MTU_512, Mtu.MTU_1024, Mtu.MTU_4096}[r.nextInt(4)];
                int psnA = r.nextBoolean() ? 0xFF_FFFF - r.nextInt(64) : r.nextInt(1 << 24);
                int psnB = r.nextBoolean() ? 0xFF_FFFF - r.nextInt(64) : r.nextInt(1 << 24);
                LossyPair.Config cfg = LossyPair.Config.of(QpType.RC).mtu(mtu).psns(psnA, psnB)
                        .rdAtomic(1 + r.nextInt(8));
                qps.add(i == 0 ? new LossyPair(cfg, seed, faults) : LossyPair.on(qps.get(0), cfg));
                plans.add(r.split());
                shapes.add(new int[] {1 + r.nextInt(maxOps), r.nextInt(4) == 0 ? 1 : 0});
            }
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < pairs; i++) {
                LossyPair pair = qps.get(i);
                SplittableRandom plan = plans.get(i);
                int[] shape = shapes.get(i);
                int n = i;
                threads.add(Thread.ofPlatform().name("lossy-pair-" + i).start(() -> {
                    try {
                        new SoftLossyRcPropertiesTest().run(pair, plan, shape[0], shape[1] == 1);
                    } catch (Throwable t) {
                        failure.compareAndSet(null, new AssertionError("pair " + n + " (seed " + seed + ", "
                                + shape[0] + " operations, " + pairs + " pairs at once) failed", t));
                    }
                }));
            }
            for (Thread t : threads) {
                t.join(JOIN_MS);
                if (t.isAlive()) {
                    failure.compareAndSet(null, new AssertionError(t.getName() + " did not finish within " + JOIN_MS
                            + " ms (seed " + seed + ")\n" + qps.get(0).describe()));
                }
            }
            if (failure.get() != null) {
                throw new AssertionError(failure.get());
            }
        } finally {
            for (int i = qps.size() - 1; i >= 0; i--) {
                qps.get(i).close();
            }
        }
    }
}
