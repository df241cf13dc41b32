// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

/**
 * perftest's print_report_bw arithmetic, with nanoseconds as the cycle unit.
 * <ul>
 * <li>average = size · iters / (last completion − first post), in the report unit;</li>
 * <li>message rate = iters / that time, in Mpps;</li>
 * <li>peak = the best per-message time over every window from a post {@code i} to a recorded
 * completion {@code j ≥ i}: {@code (tcompleted[j] − tposted[i]) / (j − i + 1)}. Not computed
 * (0) in duration mode or above 20000 iterations, as in perftest.</li>
 * </ul>
 */
public final class BwCalc {
    private BwCalc() {
    }

    /**
     * Iterations mode with peak: every post time and the completion times recorded at the
     * completion indices in {@code completedIdx[0..completions)} (ascending).
     *
     * @param size          message size
     * @param iters         messages in total (all QPs)
     * @param tposted       post time of message i, ns
     * @param completedIdx  index of the last message covered by each completion
     * @param completedTime time each completion was polled, ns
     * @param completions   number of completions recorded
     * @param unit          {@link PerftestFormat#MBS} or {@link PerftestFormat#GBS}
     * @return the report
     */
    public static PerftestFormat.Report withPeak(long size, long iters, long[] tposted, int[] completedIdx,
                                                 long[] completedTime, int completions, double unit) {
        double best = Double.POSITIVE_INFINITY;
        int c0 = 0;
        for (int i = 0; i < iters; i++) {
            while (c0 < completions && completedIdx[c0] < i) {
                c0++;
            }
            long tp = tposted[i];
            for (int c = c0; c < completions; c++) {
                int j = completedIdx[c];
                double t = (double) (completedTime[c] - tp) / (j - i + 1);
                if (t < best) {
                    best = t;
                }
            }
        }
        long total = completedTime[completions - 1] - tposted[0];
        double peak = best > 0 && best != Double.POSITIVE_INFINITY ? size * 1e9 / best / unit : 0;
        return report(size, iters, total, unit, peak);
    }

    /**
     * Without peak (duration mode, more than 20000 iterations, or {@code -N}).
     *
     * @param size    message size
     * @param iters   messages counted
     * @param totalNs the measured time
     * @param unit    {@link PerftestFormat#MBS} or {@link PerftestFormat#GBS}
     * @return the report, with a zero peak
     */
    public static PerftestFormat.Report noPeak(long size, long iters, long totalNs, double unit) {
        return report(size, iters, totalNs, unit, 0);
    }

    private static PerftestFormat.Report report(long size, long iters, long totalNs, double unit, double peak) {
        double t = Math.max(totalNs, 1);
        double avg = (double) size * iters * 1e9 / (t * unit);
        double rate = (double) iters * 1e9 / (t * 1e6);
        return new PerftestFormat.Report(size, iters, peak, avg, rate);
    }
}
