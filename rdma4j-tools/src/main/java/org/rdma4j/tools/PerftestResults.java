// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.rdma4j.tools.Perftest.RunException;

/**
 * What a perftest side measured, and what follows its table: the {@code --json} document on stdout, the
 * {@code --out_json} file and the {@code --chart} PNG.
 */
final class PerftestResults {
    /** The bandwidth table's lines, in order. */
    final List<PerftestFormat.Report> reports = new ArrayList<>();
    /** The latency table's lines, in order. */
    final List<LatStats> lats = new ArrayList<>();
    private final PerftestOptions o;
    private final PrintStream text;
    private final PrintStream err;
    private final boolean reportErrors;

    PerftestResults(PerftestOptions o, PrintStream text, PrintStream err, boolean reportErrors) {
        this.o = o;
        this.text = text;
        this.err = err;
        this.reportErrors = reportErrors;
    }

    /** JSON document, chart, --out_json file: what follows the table. */
    void finish(PerftestFormat.TestInfo info) {
        text.flush();
        String doc = null;
        if (o.lat && !lats.isEmpty()) {
            doc = PerftestFormat.jsonLat(info, lats);
        } else if (!o.lat && !reports.isEmpty()) {
            doc = PerftestFormat.json(info, reports, o.reportGbits);
        }
        if (doc != null && o.json) {
            text.print(doc);
        }
        if (doc != null && (o.outJson || o.outJsonFile != null) && reportErrors) {
            Path p = Path.of(o.outJsonFile != null ? o.outJsonFile : "perftest_out.json");
            try {
                Files.writeString(p, doc);
            } catch (IOException e) {
                throw new RunException("Couldn't write " + p + ": " + e.getMessage());
            }
        }
        if (o.chart != null && reportErrors) {
            writeChart(info);
        }
        text.flush();
    }

    private void writeChart(PerftestFormat.TestInfo info) {
        int n = o.lat ? lats.size() : reports.size();
        if (n < 2) {
            err.println(" --chart needs at least two sizes (use -a); no chart written");
            return;
        }
        long[] xs = new long[n];
        double[][] ys = new double[o.lat ? 3 : 2][n];
        for (int i = 0; i < n; i++) {
            if (o.lat) {
                LatStats s = lats.get(i);
                xs[i] = s.size();
                ys[0][i] = s.duration() ? s.avg() : s.typical();
                ys[1][i] = s.p99();
                ys[2][i] = s.avg();
            } else {
                PerftestFormat.Report r = reports.get(i);
                xs[i] = r.size();
                ys[0][i] = r.bwAvg();
                ys[1][i] = r.bwPeak();
            }
        }
        String unit = o.lat ? "usec" : o.reportGbits ? "Gb/sec" : "MiB/sec";
        String title = PerftestOptions.toolName(o.verb, o.lat) + " on " + info.device()
                + (o.loopback ? " (--loopback, in-process)" : "");
        String[] names = o.lat ? new String[] {"t_typical", "99% percentile", "t_avg"}
                : new String[] {"BW average", "BW peak"};
        try {
            Chart.write(Path.of(o.chart), title, (o.lat ? "latency" : "bandwidth") + " [" + unit + "]", xs, ys,
                    names, o.lat);
            err.println(" chart: " + o.chart);
        } catch (IOException e) {
            throw new RunException("Couldn't write the chart " + o.chart + ": " + e.getMessage());
        }
    }
}
