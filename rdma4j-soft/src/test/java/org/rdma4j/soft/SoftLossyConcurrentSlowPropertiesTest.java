// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import org.junit.jupiter.api.Tag;

/**
 * The long runs of {@link SoftLossyConcurrentRcPropertiesTest}, for {@code ./rdma4j test -Pslow}: four RC QP
 * pairs on one lossy fabric, each driven by a thread of its own through up to 120 random operations, 500
 * runs (the default tier: three pairs, up to 40 operations, 30 runs). Every pair must deliver exactly once and
 * in order while the others run on their own executors. The seed (printed by jqwik) fixes the plans and the
 * faults; the interleaving of the threads is the scheduler's.
 */
@Tag("slow")
class SoftLossyConcurrentSlowPropertiesTest {
    @Property(tries = 500)
    void fourPairsOnFourThreadsDeliverExactlyOnceAndInOrder(@ForAll long seed) throws InterruptedException {
        SoftLossyConcurrentRcPropertiesTest.check(seed, 4, 120);
    }
}
