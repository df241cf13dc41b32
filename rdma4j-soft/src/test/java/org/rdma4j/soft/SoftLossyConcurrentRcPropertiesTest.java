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
        SplittableRandom r = new SplittableRandom(seed);
        double p = 0.05;
        FaultInjectingLink.Faults faults = new FaultInjectingLink.Faults(r.nextDouble() * p, r.nextDouble() * p,
                r.nextDouble() * p, r.nextDouble() * p, r.nextDouble() * p, 1 + r.nextLong(3_000_000));
        List<LossyPair> pairs = new ArrayList<>();
        List<SplittableRandom> plans = new ArrayList<>();
        List<int[]> shapes = new ArrayList<>();
        try {
            for (int i = 0; i < PAIRS; i++) {
                Mtu mtu = new Mtu[] {Mtu.MTU_256, Mtu.MTU_512, Mtu.MTU_1024, Mtu.MTU_4096}[r.nextInt(4)];
                int psnA = r.nextBoolean() ? 0xFF_FFFF - r.nextInt(64) : r.nextInt(1 << 24);
                int psnB = r.nextBoolean() ? 0xFF_FFFF - r.nextInt(64) : r.nextInt(1 << 24);
                LossyPair.Config cfg = LossyPair.Config.of(QpType.RC).mtu(mtu).psns(psnA, psnB)
                        .rdAtomic(1 + r.nextInt(8));
                pairs.add(i == 0 ? new LossyPair(cfg, seed, faults) : LossyPair.on(pairs.get(0), cfg));
                plans.add(r.split());
                shapes.add(new int[] {1 + r.nextInt(40), r.nextInt(4) == 0 ? 1 : 0});
            }
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < PAIRS; i++) {
                LossyPair pair = pairs.get(i);
                SplittableRandom plan = plans.get(i);
                int[] shape = shapes.get(i);
                int n = i;
                threads.add(Thread.ofPlatform().name("lossy-pair-" + i).start(() -> {
                    try {
                        new SoftLossyRcPropertiesTest().run(pair, plan, shape[0], shape[1] == 1);
                    } catch (Throwable t) {
                        failure.compareAndSet(null, new AssertionError("pair " + n + " (seed " + seed + ", "
                                + shape[0] + " operations, " + PAIRS + " pairs at once) failed", t));
                    }
                }));
            }
            for (Thread t : threads) {
                t.join(JOIN_MS);
                if (t.isAlive()) {
                    failure.compareAndSet(null, new AssertionError(t.getName() + " did not finish within " + JOIN_MS
                            + " ms (seed " + seed + ")\n" + pairs.get(0).describe()));
                }
            }
            if (failure.get() != null) {
                throw new AssertionError(failure.get());
            }
        } finally {
            for (int i = pairs.size() - 1; i >= 0; i--) {
                pairs.get(i).close();
            }
        }
    }
}
