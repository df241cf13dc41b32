// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.util.Arrays;

/**
 * One line of a latency table, computed as perftest's {@code print_report_lat} computes it, with
 * nanoseconds as the cycle unit:
 * <ul>
 * <li>samples are the gaps between consecutive post times ({@code tposted[i+1] - tposted[i]}), so
 * {@code iters} posts give {@code iters - 1} samples; each is divided by the round-trip factor (2 for
 * SEND and WRITE, whose gap is a full ping-pong; 1 for READ and ATOMIC);</li>
 * <li>the samples are sorted and the 2 largest dropped ({@code LAT_MEASURE_TAIL}); of the remaining
 * {@code m}: t_min = the smallest, t_typical = the median ({@code get_median}: the middle one for
 * odd {@code m}, the integer mean of the two middle ones for even {@code m}), t_avg = their mean,
 * t_max = the first dropped sample (index {@code m}), 99% = index {@code ceil(m·0.99)}, 99.9% = index
 * {@code ceil(m·0.999)};</li>
 * <li>t_stdev = the square root of the mean squared deviation, where perftest truncates each
 * deviation to an int of microseconds before squaring it (its {@code int temp_var}). Kept as perftest
 * has it, so numbers compare; it makes sub-microsecond jitter read as 0.00.</li>
 * </ul>
 *
 * @param size     message size
 * @param iters    iterations (posts)
 * @param min      t_min, µs
 * @param max      t_max, µs
 * @param typical  t_typical (median), µs
 * @param avg      t_avg, µs
 * @param stdev    t_stdev, µs
 * @param p99      99th percentile, µs
 * @param p999     99.9th percentile, µs
 * @param duration duration mode: only avg and tps are meaningful
 * @param tps      transactions per second (duration mode)
 */
public record LatStats(long size, long iters, double min, double max, double typical, double avg, double stdev,
                       double p99, double p999, boolean duration, double tps) {
    /** perftest LAT_MEASURE_TAIL: the largest samples left out. */
    static final int MEASURE_TAIL = 2;

    /**
     * Iterations mode.
     *
     * @param size      message size
     * @param tposted   post times in ns; the first {@code n} are used
     * @param n         number of posts (at least 5)
     * @param rttFactor 2 for SEND/WRITE ping-pong, 1 for READ/ATOMIC
     * @return the statistics
     */
    public static LatStats of(long size, long[] tposted, int n, int rttFactor) {
        long[] delta = deltas(tposted, n);
        Arrays.sort(delta);
        int m = delta.length - MEASURE_TAIL;
        if (m < 1) {
            throw new IllegalArgumentException("need at least " + (MEASURE_TAIL + 2) + " posts, got " + n);
        }
        double q = 1000.0 * rttFactor;
        long median = (m - 1) % 2 != 0 ? (delta[m / 2] + delta[m / 2 - 1]) / 2 : delta[m / 2];
        double sum = 0;
        for (int i = 0; i < m; i++) {
            sum += delta[i] / q;
        }
        double avg = sum / m;
        double varSum = 0;
        for (int i = 0; i < m; i++) {
            int d = (int) (avg - delta[i] / q);
            varSum += (double) d * d;
        }
        int i99 = (int) Math.ceil(m * 0.99);
        int i999 = (int) Math.ceil(m * 0.999);
        return new LatStats(size, n, delta[0] / q, delta[m] / q, median / q, avg, Math.sqrt(varSum / m),
                delta[i99] / q, delta[i999] / q, false, 0);
    }

    /**
     * Duration mode (print_report_lat_duration): the average over the sampled window.
     *
     * @param size      message size
     * @param iters     round trips (or operations) completed in the window
     * @param windowNs  the window
     * @param rttFactor 2 for SEND/WRITE, 1 for READ/ATOMIC
     * @return the statistics
     */
    public static LatStats ofDuration(long size, long iters, long windowNs, int rttFactor) {
        double us = Math.max(windowNs, 1) / 1000.0;
        double lat = iters == 0 ? 0 : us / rttFactor / iters;
        double tps = iters / (us / 1e6);
        return new LatStats(size, iters, 0, 0, 0, lat, 0, 0, 0, true, tps);
    }

    /**
     * The samples as {@code -U} (unsorted) or {@code -H} (histogram: sorted, tail dropped) print them:
     * {@code "#, usec"} then {@code "%d, %g"} per sample.
     *
     * @param tposted   post times, ns
     * @param n         number of posts
     * @param rttFactor round-trip factor
     * @param sorted    {@code -H}: sorted and without the tail
     * @return the lines
     */
    public static String samples(long[] tposted, int n, int rttFactor, boolean sorted) {
        long[] delta = deltas(tposted, n);
        int count = delta.length;
        if (sorted) {
            Arrays.sort(delta);
            count -= MEASURE_TAIL;
        }
        StringBuilder sb = new StringBuilder(count * 12 + 10);
        sb.append("#, usec\n");
        for (int i = 0; i < count; i++) {
            sb.append(i + 1).append(", ").append(CFormat.general(delta[i] / (1000.0 * rttFactor))).append('\n');
        }
        return sb.toString();
    }

    private static long[] deltas(long[] tposted, int n) {
        long[] delta = new long[Math.max(n - 1, 0)];
        for (int i = 0; i < delta.length; i++) {
            delta[i] = tposted[i + 1] - tposted[i];
        }
        return delta;
    }
}
