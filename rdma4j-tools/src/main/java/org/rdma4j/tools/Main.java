// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.PrintStream;
import java.util.Arrays;

import org.rdma4j.verbs.Verbs;

/**
 * Entry point of the {@code rdma4j} launcher: {@code rdma4j <subcommand> [options]}, with the
 * subcommands named as rdma-core and perftest name them.
 */
public final class Main {
    private Main() {
    }

    /**
     * Runs one subcommand and exits with its status.
     *
     * @param args subcommand and its arguments
     */
    public static void main(String[] args) {
        // Ctrl-C: a running tool stops, prints what it measured, and the JVM exits after that. A command
        // that has returned is no longer running, so System.exit below does not wait for anything.
        StopSignal.installShutdownHook();
        int rc = run(args, System.out, System.err);
        System.out.flush();
        if (System.getProperty("rdma4j.soft.counters") != null) {
            printCounters(System.err);
        }
        System.exit(rc);
    }

    /**
     * {@code -Drdma4j.soft.counters}: each device's non-zero port counters when the tool ends (where a
     * benchmark's packets went: retransmissions, drops, GSO/GRO use), as rxe shows them in its hw_counters.
     * {@code rdma4j statistic show} reads them while a process runs.
     */
    private static void printCounters(PrintStream err) {
        for (org.rdma4j.verbs.Device d : Verbs.devices()) {
            try (org.rdma4j.verbs.Context ctx = d.open()) {
                StringBuilder b = new StringBuilder("rdma4j counters ").append(d.name()).append(':');
                ctx.queryPortCounters(1).forEach((name, v) -> {
                    if (v != 0) {
                        b.append(' ').append(name).append('=').append(v);
                    }
                });
                err.println(b);
            } catch (RuntimeException e) {
                err.println("rdma4j counters " + d.name() + ": " + e.getMessage());
            }
        }
        err.flush();
    }

    /**
     * Runs a subcommand.
     *
     * @param args subcommand and its arguments
     * @param out  standard output
     * @param err  standard error
     * @return the exit status
     */
    public static int run(String[] args, PrintStream out, PrintStream err) {
        if (args.length == 0) {
            usage(err);
            return 1;
        }
        String cmd = args[0];
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        switch (cmd) {
            case "ib_send_bw", "ib_write_bw", "ib_read_bw", "ib_atomic_bw",
                 "ib_send_lat", "ib_write_lat", "ib_read_lat", "ib_atomic_lat":
                return perftest(cmd, rest, out, err);
            case "rc_pingpong", "uc_pingpong", "ud_pingpong", "srq_pingpong",
                 "ibv_rc_pingpong", "ibv_uc_pingpong", "ibv_ud_pingpong", "ibv_srq_pingpong":
                return PingPong.main(cmd, rest, out, err, StopSignal.PROCESS);
            case "devices":
            case "ibv_devices":
                out.print(DevInfo.devices(Verbs.devices()));
                return 0;
            case "devinfo":
            case "ibv_devinfo":
                return DevInfo.devinfoMain(rest, out, err);
            case "link":
                return LinkCommand.main(rest, out, err);
            case "statistic":
            case "stat":
                return StatisticCommand.main(rest, out, err);
            case "rping":
                return Rping.main(rest, out, err, StopSignal.PROCESS);
            case "ucmatose":
                return Ucmatose.main(rest, out, err, StopSignal.PROCESS);
            case "udaddy":
                return Udaddy.main(rest, out, err, StopSignal.PROCESS);
            case "rdma_server":
                return RdmaServerClient.server(rest, out, err, StopSignal.PROCESS);
            case "rdma_client":
                return RdmaServerClient.client(rest, out, err, StopSignal.PROCESS);
            case "cmtime":
                return Cmtime.main(rest, out, err, StopSignal.PROCESS);
            case "ipoib":
                return IpoibCommand.main(rest, out, err, StopSignal.PROCESS);
            case "impair":
                return ImpairCommand.main(rest, out, err, StopSignal.PROCESS);
            case "help":
            case "-h":
            case "--help":
                usage(out);
                return 0;
            default:
                err.println("rdma4j: unknown subcommand '" + cmd + "'");
                usage(err);
                return 1;
        }
    }

    /** The eight perftest tools: one engine ({@link Perftest}), the verb and bw/lat from the name. */
    private static int perftest(String cmd, String[] rest, PrintStream out, PrintStream err) {
        try {
            var o = PerftestOptions.parse(PerftestOptions.verbOf(cmd), cmd.endsWith("_lat"), rest);
            return new Perftest(o, out, err, StopSignal.PROCESS).run();
        } catch (PerftestOptions.UsageException e) {
            err.println(cmd + ": " + e.getMessage());
            return 1;
        }
    }

    private static void usage(PrintStream s) {
        s.println("Usage: rdma4j <command> [options]");
        s.println();
        s.println("Commands:");
        s.println("  ib_{send,write,read,atomic}_{bw,lat} [opts] [host]");
        s.println("                                 perftest's tests: server without a host, client with the server's");
        s.println("                                 host name, or --loopback for both in this process");
        s.println("                                 (e.g. ib_write_bw --loopback -a; <tool> --help lists the flags)");
        s.println("  devices                        list RDMA devices (ibv_devices)");
        s.println("  devinfo [-v] [-d dev] [-i port]");
        s.println("                                 show device and port attributes (ibv_devinfo)");
        s.println("  rc_pingpong|uc_pingpong|ud_pingpong|srq_pingpong [opts] [host]");
        s.println("                                 ibv_*_pingpong: server, or client of <host>; --loopback runs both");
        s.println("                                 here (rc_pingpong --help lists the flags)");
        s.println("  rping -s|-c [-vVd] [-S size] [-C count] [-a addr] [-I addr] [-p port] [-P] [-q]");
        s.println("                                 rdma-core's rping: connects with rdma_cm (the IB CM on the wire)");
        s.println("  ucmatose [-s server] [-b bind] [-c conns] [-C count] [-S size] [-p port] [-P tcp|ib] [-m] [-t tos] [-a t]");
        s.println("                                 rdma-core's ucmatose: several RC connections through rdma_cm");
        s.println("  udaddy [-s server] [-b bind] [-c conns] [-C count] [-S size] [-t tos] [-P udp]");
        s.println("                                 rdma-core's udaddy: UD peers resolved through rdma_cm (SIDR)");
        s.println("  rdma_server|rdma_client [-s addr] [-p port]");
        s.println("                                 rdma-core's synchronous librdmacm examples (16 bytes each way)");
        s.println("  cmtime [-s server] [-b bind] [-c conns] [-p port] [-r retries] [-t timeout_ms]");
        s.println("                                 rdma-core's cmtime: times each step of setting up -c connections");
        s.println("  link [add|delete|show]         configure RoCEv2 devices bound to IP addresses (like rdma link)");
        s.println("  statistic [show] [link DEV[/P]] port counters of running rdma4j processes (like rdma statistic)");
        s.println("  ipoib -d dev --ifname ib0 --addr 10.200.0.1/24");
        s.println("                                 IP over InfiniBand (RFC 4391 datagram mode) on a TUN interface, until");
        s.println("                                 Ctrl-C (root; ipoib --help lists the options)");
        s.println("  impair [--queue N] [--seed S] [netem parameters]");
        s.println("                                 impair the packets an iptables NFQUEUE rule queues, as netem would");
        s.println("                                 (a test tool for kernels without netem; root; impair --help)");
        s.println("  test [mvn args]                run the whole test suite (mvn test; handled by the launcher script)");
        s.println("  build                          rebuild (mvn -DskipTests package; handled by the launcher script)");
        s.println("  java-home                      print the JDK 25 the launcher uses");
        s.println("  help                           this text");
    }
}
