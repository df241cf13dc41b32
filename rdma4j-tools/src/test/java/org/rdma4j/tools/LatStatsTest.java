// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** perftest's print_report_lat definitions on samples whose answers are known. */
class LatStatsTest {
    /** Posts whose gaps are the given nanoseconds, in that order. */
    private static long[] posts(long... gaps) {
        long[] t = new long[gaps.length + 1];
        t[0] = 1_000_000;
        for (int i = 0; i < gaps.length; i++) {
            t[i + 1] = t[i] + gaps[i];
        }
        return t;
    }

    @Test
    void oddCountMedianTailAndPercentiles() {
        // 7 gaps (8 posts), READ (rtt factor 1): sorted 1..7 us; the 2 largest (6, 7) are the tail, m = 5.
        long[] t = posts(3000, 7000, 1000, 5000, 2000, 6000, 4000);
        LatStats s = LatStats.of(2, t, t.length, 1);
        assertEquals(8, s.iters());
        assertEquals(1.0, s.min());
        assertEquals(6.0, s.max(), "t_max is the first sample of the dropped tail");
        assertEquals(3.0, s.typical(), "median of 1,2,3,4,5");
        assertEquals(3.0, s.avg());
        // deviations 2,1,0,-1,-2 -> sqrt(10/5)
        assertEquals(Math.sqrt(2), s.stdev(), 1e-12);
        // ceil(5*0.99) = 5 and ceil(5*0.999) = 5: index 5 is 6 us
        assertEquals(6.0, s.p99());
        assertEquals(6.0, s.p999());
    }

    @Test
    void evenCountMedianIsTheIntegerMeanOfTheMiddleTwoAndRttHalves() {
        // 6 gaps, WRITE ping-pong (factor 2): sorted 1000,2000,3001,4000 (+ tail 9000, 9500), m = 4
        long[] t = posts(9000, 3001, 1000, 4000, 9500, 2000);
        LatStats s = LatStats.of(64, t, t.length, 2);
        // (2000 + 3001) / 2 = 2500 ns in integer arithmetic -> 1.25 us one way
        assertEquals(1.25, s.typical(), 1e-12);
        assertEquals(0.5, s.min(), 1e-12);
        assertEquals(4.5, s.max(), 1e-12);
        assertEquals((0.5 + 1.0 + 1.5005 + 2.0) / 4, s.avg(), 1e-12);
        // perftest truncates each deviation to an int of usec before squaring: every |deviation| here is
        // below 1 us, so its t_stdev is 0 (the exact value would be about 0.56)
        assertEquals(0.0, s.stdev(), 1e-12);
    }

    @Test
    void percentilesIndexTheSortedSamplesAsPerftest() {
        // 1003 posts -> 1002 gaps of 1..1002 us; m = 1000; 99% = index ceil(1000*0.99) = 990 -> 991 us;
        // 99.9% = index ceil(1000*0.999) = 999 (the double product is 999.0) -> 1000 us; t_max = index m
        long[] gaps = new long[1002];
        for (int i = 0; i < gaps.length; i++) {
            gaps[i] = (gaps.length - i) * 1000L;
        }
        LatStats s = LatStats.of(2, posts(gaps), 1003, 1);
        assertEquals(991.0, s.p99());
        assertEquals(1000.0, s.p999());
        assertEquals(1001.0, s.max());
        assertEquals(500.5, s.typical(), "m = 1000 is even: the mean of the 500th and 501st samples");
    }

    @Test
    void durationModeAveragesTheWindow() {
        LatStats s = LatStats.ofDuration(2, 1000, 2_000_000, 2);
        assertTrue(s.duration());
        assertEquals(1.0, s.avg(), 1e-12);
        assertEquals(500_000, s.tps(), 1e-6);
    }

    @Test
    void samplesPrintLikePercentG() {
        long[] t = posts(1500, 2_000_000, 700);
        assertEquals("#, usec\n1, 0.75\n2, 1000\n3, 0.35\n", LatStats.samples(t, t.length, 2, false));
        assertEquals("#, usec\n1, 0.35\n", LatStats.samples(t, t.length, 2, true));
        assertEquals("1.23457e+06", CFormat.general(1234567.0));
        assertEquals("0.0001", CFormat.general(0.0001));
        assertEquals("1e-05", CFormat.general(0.00001));
    }
}
