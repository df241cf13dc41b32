// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.PrintStream;
import java.nio.file.Path;
import java.util.List;

import org.rdma4j.common.CounterFiles;

/**
 * {@code rdma4j statistic [show] [link DEV[/PORT]] [-p PID] [-j]}: the port counters of every rdma4j
 * process running on this host, read while they run, printed as iproute2's {@code rdma statistic show}
 * prints a kernel device's ({@code link rxe0/1 sent_pkts 12 rcvd_pkts 10 ...}) with the process's
 * {@code pid} after the link. The counters come from the files each process publishes
 * ({@link CounterFiles}; {@code -Drdma4j.counters.dir} or {@code RDMA4J_COUNTERS_DIR} to look elsewhere).
 */
final class StatisticCommand {
    private StatisticCommand() {
    }

    static int main(String[] args, PrintStream out, PrintStream err) {
        String link = null;
        Long pid = null;
        boolean json = false;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "show", "list" -> {
                    // the only action
                }
                case "link" -> {
                    if (i + 1 >= args.length) {
                        err.println("rdma4j statistic: 'link' needs DEV or DEV/PORT");
                        return 1;
                    }
                    link = args[++i];
                }
                case "-p", "--pid" -> {
                    if (i + 1 >= args.length) {
                        err.println("rdma4j statistic: '" + a + "' needs a process id");
                        return 1;
                    }
                    try {
                        pid = Long.parseLong(args[++i]);
                    } catch (NumberFormatException e) {
                        err.println("rdma4j statistic: not a process id: " + args[i]);
                        return 1;
                    }
                }
                case "-j", "--json" -> json = true;
                case "-h", "--help", "help" -> {
                    usage(out);
                    return 0;
                }
                default -> {
                    err.println("rdma4j statistic: unknown argument '" + a + "'");
                    usage(err);
                    return 1;
                }
            }
        }
        Path dir = CounterFiles.directory();
        List<CounterFiles.Group> groups = CounterFiles.read(dir);
        final String wanted = link;
        final Long wantedPid = pid;
        groups = groups.stream()
                .filter(g -> wantedPid == null || g.pid() == wantedPid)
                .filter(g -> wanted == null || g.label().equals(wanted) || g.label().startsWith(wanted + "/"))
                .toList();
        if (json) {
            out.println(json(groups));
        } else {
            for (CounterFiles.Group g : groups) {
                StringBuilder b = new StringBuilder("link ").append(g.label()).append(" pid ").append(g.pid());
                for (int i = 0; i < g.names().size(); i++) {
                    b.append(' ').append(g.names().get(i)).append(' ').append(g.values().get(i));
                }
                out.println(b);
            }
        }
        if (groups.isEmpty() && wanted != null) {
            err.println("rdma4j statistic: no running rdma4j process has link " + wanted + " (looked in " + dir + ")");
            return 1;
        }
        return 0;
    }

    private static String json(List<CounterFiles.Group> groups) {
        StringBuilder b = new StringBuilder("[");
        for (int k = 0; k < groups.size(); k++) {
            CounterFiles.Group g = groups.get(k);
            String label = g.label();
            int slash = label.lastIndexOf('/');
            String dev = slash < 0 ? label : label.substring(0, slash);
            String port = slash < 0 ? "1" : label.substring(slash + 1);
            b.append(k == 0 ? "" : ",").append("{\"ifname\":\"").append(escape(dev)).append("\",\"port\":")
                    .append(port.matches("\\d+") ? port : "\"" + escape(port) + "\"").append(",\"pid\":").append(g.pid());
            for (int i = 0; i < g.names().size(); i++) {
                b.append(",\"").append(escape(g.names().get(i))).append("\":").append(g.values().get(i));
            }
            b.append('}');
        }
        return b.append(']').toString();
    }

    private static String escape(String s) {
        return s.replace("\\", "\\\\").replace("\"", "\\\"");
    }

    private static void usage(PrintStream p) {
        p.println("usage: rdma4j statistic [show] [link DEV[/PORT]] [-p PID] [-j|--json]");
        p.println("  the port counters of every running rdma4j process on this host, as 'rdma statistic show' prints them");
    }
}
