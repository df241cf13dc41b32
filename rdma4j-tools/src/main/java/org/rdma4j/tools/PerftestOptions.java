// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.util.ArrayList;
import java.util.List;

/**
 * The command line of the eight perftest tools ({@code ib_{send,write,read,atomic}_{bw,lat}}), parsed
 * the way perftest's getopt_long does: short options with the value attached or separate
 * ({@code -s65536}, {@code -s 65536}), long options with {@code =} or a separate value
 * ({@code --size=65536}, {@code --size 65536}), clusters of flags ({@code -aF}), and an optional
 * server name. Defaults depend on the test, as in perftest's {@code init_perftest_params}.
 */
public final class PerftestOptions {
    /** perftest's MAX_SIZE: the largest message of a run over all sizes (-a). */
    public static final int MAX_SIZE = 8_388_608;
    /** perftest DEF_PORT. */
    public static final int DEFAULT_PORT = 18515;

    /** The operation a test measures (perftest's {@code enum verb}, without the _imm variants). */
    public enum Verb {
        /** ib_send_*: SEND into posted receives. */
        SEND("Send", "send"),
        /** ib_write_*: RDMA WRITE. */
        WRITE("RDMA_Write", "write"),
        /** ib_read_*: RDMA READ. */
        READ("RDMA_Read", "read"),
        /** ib_atomic_*: fetch-and-add or compare-and-swap. */
        ATOMIC("Atomic", "atomic");

        private final String title;
        private final String cmd;

        Verb(String title, String cmd) {
            this.title = title;
            this.cmd = cmd;
        }

        /** {@return perftest's testsStr entry} */
        public String title() {
            return title;
        }

        /** {@return the word in the command name} */
        public String cmd() {
            return cmd;
        }
    }

    final Verb verb;
    final boolean lat;
    String ibDev;
    String serverIbDev;
    int ibPort = 1;
    long size;
    boolean sizeGiven;
    boolean all;
    long iters;
    boolean itersGiven;
    int duration;
    int margin = -1;
    int txDepth;
    boolean txDepthGiven;
    int rxDepth = 512;
    int cqMod = 100;
    boolean cqModGiven;
    int numQps = 1;
    String connection = "RC";
    int inlineSize = -1;
    boolean reportGbits;
    int gidIndex = -1;
    int mtu;
    boolean noPeak;
    boolean json;
    String outJsonFile;
    boolean outJson;
    boolean loopback;
    boolean warmUp;
    String serverName;
    int port = DEFAULT_PORT;
    int qpTimeout = 14;
    int postList = 1;
    int outReads;
    boolean cmpAndSwap;
    boolean unsorted;
    boolean histogram;
    String chart;
    boolean progress;
    boolean noProgress;
    boolean help;
    boolean version;
    /** -R: connect the QPs with rdma_cm (and run the exchange over rdma_cm too, as perftest does). */
    boolean rdmaCm;
    /**
     * --retry_count: the REQ's retry count under -R (it sets both sides' QPs). 6 by default where perftest has 7:
     * rxe and the soft device retry forever on 7 (docs/perftest.md).
     */
    int retryCount = 6;
    /** --source_ip / -j: the local address of the rdma_cm connections (server: the one it listens on). */
    String sourceIp;

    private PerftestOptions(Verb verb, boolean lat) {
        this.verb = verb;
        this.lat = lat;
        this.size = verb == Verb.ATOMIC ? 8 : lat ? 2 : 65536;
        this.iters = !lat && verb == Verb.WRITE ? 5000 : 1000;
        this.txDepth = lat ? 1 : 128;
    }

    /** Thrown for a command line perftest would refuse; the message says what is wrong. */
    public static final class UsageException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UsageException(String message) {
            super(message);
        }
    }

    /** {@return the tool's name, e.g. {@code ib_write_bw}} */
    public String toolName() {
        return toolName(verb, lat);
    }

    static String toolName(Verb verb, boolean lat) {
        return "ib_" + verb.cmd() + (lat ? "_lat" : "_bw");
    }

    /**
     * The test a tool name stands for.
     *
     * @param tool e.g. {@code ib_read_lat}
     * @return the verb, or null when the name is not one of the eight tools
     */
    public static Verb verbOf(String tool) {
        for (Verb v : Verb.values()) {
            if (tool.equals(toolName(v, false)) || tool.equals(toolName(v, true))) {
                return v;
            }
        }
        return null;
    }

    /**
     * ib_write_bw's command line (kept for callers of the first tool).
     *
     * @param args the arguments after the subcommand name
     * @return the options
     */
    public static PerftestOptions parse(String... args) {
        return parse(Verb.WRITE, false, args);
    }

    /**
     * {@return the options}
     *
     * @param verb the tested operation
     * @param lat  a latency test ({@code _lat}), else bandwidth ({@code _bw})
     * @param args the arguments after the subcommand name
     * @throws UsageException for an unknown option, a missing or malformed value
     */
    public static PerftestOptions parse(Verb verb, boolean lat, String... args) {
        PerftestOptions o = new PerftestOptions(verb, lat);
        List<String> positional = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            String name;
            String value = null;
            if (a.startsWith("--") && a.length() > 2) {
                int eq = a.indexOf('=');
                name = eq < 0 ? a.substring(2) : a.substring(2, eq);
                if (eq >= 0) {
                    value = a.substring(eq + 1);
                }
                name = longToShort(name);
            } else if (a.startsWith("-") && a.length() > 1) {
                name = a.substring(1, 2);
                if (a.length() > 2) {
                    value = a.substring(2);
                }
            } else {
                positional.add(a);
                continue;
            }
            if (takesValue(name)) {
                if (value == null) {
                    if (i + 1 >= args.length) {
                        throw new UsageException("option '" + a + "' requires an argument");
                    }
                    value = args[++i];
                }
            } else if (value != null && name.length() > 1) {
                throw new UsageException("option '--" + name + "' doesn't allow an argument");
            } else if (value != null) {
                // A cluster of flags such as -aF: apply each letter as a flag.
                o.apply(name, null);
                for (char ch : value.toCharArray()) {
                    String n = String.valueOf(ch);
                    if (takesValue(n)) {
                        throw new UsageException("option '-" + n + "' requires an argument (in '" + a + "')");
                    }
                    o.apply(n, null);
                }
                continue;
            }
            o.apply(name, value);
        }
        if (positional.size() > 1) {
            throw new UsageException("more than one server name: " + positional);
        }
        if (!positional.isEmpty()) {
            o.serverName = positional.get(0);
        }
        o.check();
        return o;
    }

    /** perftest's parser checks that need every option (check_link_and_mtu's cousins in parser()). */
    private void check() {
        if (verb == Verb.ATOMIC && (all || size != 8)) {
            // perftest: with -a the size becomes MAX_SIZE, which the atomic tests refuse the same way.
            throw new UsageException("Message size cannot be changed for Atomic tests");
        }
        if ((verb == Verb.READ || verb == Verb.ATOMIC) && !connection.equals("RC")) {
            throw new UsageException(verb.title() + " needs RC (connection type " + connection + " has no "
                    + (verb == Verb.READ ? "RDMA READ" : "atomics") + ")");
        }
        if (duration > 0 && all) {
            throw new UsageException("Duration mode currently doesn't support running on all sizes.");
        }
        if (loopback && serverName != null) {
            throw new UsageException("--loopback runs server and client in this process: drop the server name '"
                    + serverName + "'");
        }
        if (postList > 1 && (iters % postList != 0)) {
            throw new UsageException("Number of iterations (" + iters + ") must be a multiple of the post list ("
                    + postList + ")");
        }
        if (lat && numQps > 1) {
            throw new UsageException("Latency tests run on one QP (-q " + numQps + ")");
        }
        if (rdmaCm && connection.equals("UC")) {
            throw new UsageException("UC is not supported in librdmacm");
        }
    }

    private static String longToShort(String name) {
        return switch (name) {
            case "ib-dev" -> "d";
            case "ib-port" -> "i";
            case "size" -> "s";
            case "all" -> "a";
            case "iters" -> "n";
            case "duration" -> "D";
            case "margin" -> "f";
            case "tx-depth" -> "t";
            case "rx-depth" -> "r";
            case "cq-mod" -> "Q";
            case "qp" -> "q";
            case "connection" -> "c";
            case "inline_size" -> "I";
            case "CPU-freq" -> "F";
            case "gid-index" -> "x";
            case "mtu" -> "m";
            case "noPeak" -> "N";
            case "port" -> "p";
            case "qp-timeout" -> "u";
            case "post_list" -> "l";
            case "outs" -> "o";
            case "atomic_type" -> "A";
            case "report-unsorted" -> "U";
            case "report-histogram" -> "H";
            case "report-cycles" -> "C";
            case "help" -> "h";
            case "version" -> "V";
            case "rdma_cm" -> "R";
            case "source_ip" -> "j";
            default -> name;
        };
    }

    private static boolean takesValue(String name) {
        return switch (name) {
            case "d", "i", "s", "n", "D", "f", "t", "r", "Q", "q", "c", "I", "x", "m", "p", "u", "l", "o", "A", "j",
                 "out_json_file", "server-ib-dev", "chart", "retry_count" -> true;
            default -> false;
        };
    }

    private void apply(String name, String value) {
        switch (name) {
            case "d" -> ibDev = value;
            case "server-ib-dev" -> serverIbDev = value;
            case "i" -> ibPort = intIn(name, value, 1, 255);
            case "s" -> {
                size = longIn(name, value, 1, MAX_SIZE * 2L);
                sizeGiven = true;
            }
            case "a" -> all = true;
            case "n" -> {
                iters = longIn(name, value, 5, 4_294_967_296L);
                itersGiven = true;
            }
            case "D" -> duration = intIn(name, value, 1, Integer.MAX_VALUE);
            case "f" -> margin = intIn(name, value, 0, Integer.MAX_VALUE);
            case "t" -> {
                txDepth = intIn(name, value, 1, 15000);
                txDepthGiven = true;
            }
            case "r" -> rxDepth = intIn(name, value, 1, 16384);
            case "Q" -> {
                cqMod = intIn(name, value, 1, 1024);
                cqModGiven = true;
            }
            case "q" -> numQps = intIn(name, value, 1, 16384);
            case "c" -> {
                if (!value.equals("RC") && !value.equals("UC")) {
                    throw new UsageException("connection type " + value + " is not supported here (RC or UC)");
                }
                connection = value;
            }
            case "I" -> inlineSize = intIn(name, value, 0, 1024);
            case "report_gbits" -> reportGbits = true;
            case "F" -> {
                // perftest: do not warn about CPU frequency scaling. rdma4j measures with System.nanoTime.
            }
            case "x" -> gidIndex = intIn(name, value, 0, 64);
            case "m" -> {
                mtu = intIn(name, value, 256, 4096);
                if (Integer.bitCount(mtu) != 1) {
                    throw new UsageException("Invalid MTU " + value + " - Valid values are 256,512,1024,2048,4096");
                }
            }
            case "N" -> noPeak = true;
            case "u" -> qpTimeout = intIn(name, value, 0, 31);
            case "l" -> postList = intIn(name, value, 1, 1024);
            case "o" -> outReads = intIn(name, value, 1, 1024);
            case "A" -> {
                if (value.equals("CMP_AND_SWAP")) {
                    cmpAndSwap = true;
                } else if (value.equals("FETCH_AND_ADD")) {
                    cmpAndSwap = false;
                } else {
                    throw new UsageException("Invalid Atomic type " + value + " (CMP_AND_SWAP or FETCH_AND_ADD)");
                }
            }
            case "U" -> unsorted = true;
            case "H" -> histogram = true;
            case "C" -> throw new UsageException("-C (report in CPU cycles) is not available: rdma4j measures with"
                    + " System.nanoTime, and reports in usec");
            case "json" -> json = true;
            case "out_json" -> outJson = true;
            case "out_json_file" -> outJsonFile = value;
            case "loopback" -> loopback = true;
            case "perform_warm_up" -> warmUp = true;
            case "chart" -> chart = value;
            case "progress" -> progress = true;
            case "no-progress" -> noProgress = true;
            case "p" -> port = intIn(name, value, 1, 65535);
            case "h" -> help = true;
            case "V" -> version = true;
            case "R" -> rdmaCm = true;
            case "retry_count" -> retryCount = intIn(name, value, 0, 7);
            case "j" -> sourceIp = value;
            default -> throw new UsageException("unrecognized option '" + (name.length() == 1 ? "-" : "--") + name
                    + "' (see --help)");
        }
        if ((name.equals("U") || name.equals("H")) && !lat) {
            throw new UsageException("-" + name + " is a latency-test option");
        }
    }

    private static int intIn(String name, String value, int min, int max) {
        return (int) longIn(name, value, min, max);
    }

    private static long longIn(String name, String value, long min, long max) {
        long v;
        try {
            v = Long.decode(value.trim());
        } catch (NumberFormatException e) {
            throw new UsageException("option -" + name + ": '" + value + "' is not a number");
        }
        if (v < min || v > max) {
            throw new UsageException("option -" + name + ": " + v + " is out of range [" + min + ", " + max + "]");
        }
        return v;
    }

    /** {@return the usage text of this tool} */
    public String usage() {
        String t = toolName();
        return "Usage:\n"
                + "  " + t + "            start a server and wait for connection\n"
                + "  " + t + " <host>     connect to server at <host> (perftest's TCP exchange, port 18515)\n"
                + "  " + t + " --loopback server and client in this process, on two in-process devices\n"
                + "\n"
                + "Options:\n"
                + "  -a, --all                 Run sizes from 2 till 2^23" + (verb == Verb.ATOMIC ? " (not for atomics)" : "")
                + "\n"
                + (verb == Verb.ATOMIC ? "  -A, --atomic_type=<type>  CMP_AND_SWAP or FETCH_AND_ADD (default FETCH_AND_ADD)\n" : "")
                + "  -c, --connection=<RC/UC>  Connection type RC/UC (default RC; READ and ATOMIC need RC)\n"
                + "  -d, --ib-dev=<dev>        Use IB device <dev> (default first device found)\n"
                + "      --server-ib-dev=<dev> --loopback: device of the server side (default another device)\n"
                + "  -D, --duration            Run test for a customized period of seconds\n"
                + "  -f, --margin              Measure results within margins (default duration/4 s)\n"
                + "  -F, --CPU-freq            Do not fail even if cpufreq_ondemand module is loaded (accepted, no effect)\n"
                + "  -h, --help                Show this help screen\n"
                + (lat ? "  -H, --report-histogram    Print out all results (default print summary only)\n" : "")
                + "  -i, --ib-port=<port>      Use port <port> of IB device (default 1)\n"
                + "  -I, --inline_size=<size>  Max size of message to be sent in inline\n"
                + (lat ? "" : "  -l, --post_list=<list>    Post list of WQEs of <list> size (instead of single post)\n")
                + "  -m, --mtu=<mtu>           MTU size: 256 - 4096 (default port mtu)\n"
                + "  -n, --iters=<iters>       Number of exchanges (at least 5, default " + iters + ")\n"
                + (lat ? "" : "  -N, --noPeak              Cancel peak-bw calculation (default with peak up to iters=20000)\n")
                + (verb == Verb.READ || verb == Verb.ATOMIC
                        ? "  -o, --outs=<num>          Num of outstanding read/atom (default max of device)\n" : "")
                + "  -p, --port=<port>         Listen on/connect to port <port> (default 18515)\n"
                + "  -R, --rdma_cm             Connect QPs with rdma_cm and run test on those QPs\n"
                + "      --retry_count=<n>     Set retry count value in rdma_cm mode (default 6; perftest has 7)\n"
                + "  -j, --source_ip=<ip>      Source IP of the rdma_cm connections (-R)\n"
                + (lat ? "" : "  -q, --qp=<num of qp's>    Num of qp's (default 1)\n")
                + (lat ? "" : "  -Q, --cq-mod              Generate Cqe only after <--cq-mod> completion (default 100)\n")
                + (verb == Verb.SEND ? "  -r, --rx-depth=<dep>      Rx queue size (default 512)\n" : "")
                + "  -s, --size=<size>         Size of message to exchange (default " + size + ")\n"
                + "  -t, --tx-depth=<dep>      Size of tx queue (default " + txDepth + ")\n"
                + "  -u, --qp-timeout=<timeout> QP timeout, timeout value is 4 usec * 2 ^(timeout), default 14\n"
                + (lat ? "  -U, --report-unsorted     (implies -H) print out unsorted results\n" : "")
                + "  -V, --version             Display version number\n"
                + "  -x, --gid-index=<index>   Test uses GID with GID index (default: the best GID on Ethernet)\n"
                + (lat ? "" : "      --report_gbits        Report Max/Average BW of test in Gbit/sec (instead of MiB/sec)\n")
                + "      --perform_warm_up     Run each size once untimed first (in Java this also warms up the JIT)\n"
                + "      --loopback            Server and client in this process (in-process devices)\n"
                + "      --json                Print perftest's --out_json document on stdout instead of the table\n"
                + "      --out_json --out_json_file=<file>  Also write that document to <file>, as perftest does\n"
                + "      --chart=<file.png>    With -a: draw " + (lat ? "latency" : "bandwidth")
                + " against message size into a PNG\n"
                + "      --progress / --no-progress  Progress line on stderr (default: on a terminal, for long runs)\n";
    }
}
