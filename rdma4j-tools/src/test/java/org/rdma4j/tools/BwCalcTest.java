// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class BwCalcTest {
    @Test
    void peakIsTheBestWindowAverageIsOverTheWholeRun() {
        long mib = 1 << 20;
        long[] posted = {0, 10, 20, 30};
        int[] idx = {1, 3};
        long[] done = {100, 140};
        var r = BwCalc.withPeak(mib, 4, posted, idx, done, 2, PerftestFormat.MBS);
        assertEquals(4, r.iters());
        // best window: posts 0..3 completed at 140 -> 35 ns per 1 MiB message
        assertEquals(1e9 / 35, r.bwPeak(), 1e-6);
        assertEquals(4 * 1e9 / 140, r.bwAvg(), 1e-6);
        assertEquals(4 * 1e9 / 140 / 1e6, r.msgRateMpps(), 1e-12);
    }

    @Test
    void gbitsUnitIs125MillionBytes() {
        var r = BwCalc.noPeak(125_000_000L, 1, 1_000_000_000L, PerftestFormat.GBS);
        assertEquals(1.0, r.bwAvg(), 1e-12);
        assertEquals(0.0, r.bwPeak());
        assertEquals(1e-6, r.msgRateMpps(), 1e-15);
    }
}
