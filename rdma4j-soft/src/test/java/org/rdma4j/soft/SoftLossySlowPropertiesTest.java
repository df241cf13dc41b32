// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tag;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.statistics.Statistics;

import org.rdma4j.verbs.QpType;

/**
 * The long runs of the lossy-link properties, for {@code ./rdma4j test -Pslow} (issue 16 item 15): the same
 * checks as the default tier's {@link SoftLossyRcPropertiesTest}, {@link SoftLossyUcUdPropertiesTest} and
 * {@link SoftLossyRecvCqOverflowPropertiesTest}, with many more tries, and on RC longer runs of larger
 * messages under every fault at once:
 * <ul>
 *   <li>RC: up to 200 operations per run, SENDs up to 16 KiB and RDMA WRITEs and READs up to 64 KiB (64
 *       packets at path MTU 1024, 256 at 256), drops, duplicates, reordering, delays and corruption each
 *       with probability 1..5 % at once;</li>
 *   <li>UC and UD: up to 250 messages per run;</li>
 *   <li>the receive CQ overflow property of issue 16 item 1: no message that completed SUCCESS at the
 *       sender is missing at the receiver.</li>
 * </ul>
 * Every run derives from the seed jqwik prints on failure (each check's message has the link's seed
 * and counters too). Timers run on the manual clock, so a run's length is CPU work, not waiting.
 */
@Tag("slow")
class SoftLossySlowPropertiesTest {
    @Property(tries = 10_000)
    void rcUnderEveryFaultAtOnceDeliversLargeMessagesExactlyOnceAndInOrder(@ForAll long seed) {
        Statistics.label("retried").collect(SoftLossyRcPropertiesTest.check(seed, SoftLossyRcPropertiesTest.Scale.LONG));
    }

    @Property(tries = 10_000)
    void rcDefaultShapesManyMoreTimes(@ForAll long seed) {
        Statistics.label("retried").collect(SoftLossyRcPropertiesTest.check(seed));
    }

    @Property(tries = 10_000)
    void ucAndUdLoseWholeMessagesOnly(@ForAll long seed, @ForAll("types") QpType type,
                                      @ForAll @IntRange(min = 1, max = 250) int n) {
        int delivered = SoftLossyUcUdPropertiesTest.check(seed, type, n);
        Statistics.label("delivered").collect(delivered == n ? "all" : delivered == 0 ? "none" : "some");
    }

    @Property(tries = 20_000)
    void noMessageThatCompletedSuccessAtTheSenderIsMissingAtTheReceiver(@ForAll long seed) {
        Statistics.label("receive CQ overflowed").collect(SoftLossyRecvCqOverflowPropertiesTest.check(seed));
    }

    @Provide
    Arbitrary<QpType> types() {
        return Arbitraries.of(QpType.UC, QpType.UD);
    }
}
