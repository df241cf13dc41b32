package org.rdma4j.tools;

import java.util.ArrayList;
import java.util.List;

/**
 * ib_write_bw's command line, parsed the way perftest's getopt_long does: short options with the
 * value attached or separate ({@code -s65536}, {@code -s 65536}), long options with {@code =} or a
 * separate value ({@code --size=65536}, {@code --size 65536}), and an optional server name.
 */
public final class WriteBwOptions {
    /** perftest's MAX_SIZE: the largest message of a run over all sizes (-a). */
    public static final int MAX_SIZE = 8_388_608;

    String ibDev;
    String serverIbDev;
    int ibPort = 1;
    long size = 65536;
    boolean sizeGiven;
    boolean all;
    long iters = 5000;
    boolean itersGiven;
    int duration;
    int margin = -1;
    int txDepth = 128;
    int cqMod = 100;
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
    int port = 18515;
    boolean help;
    boolean version;

    private WriteBwOptions() {
    }

    /** Thrown for a command line perftest would refuse; the message says what is wrong. */
    public static final class UsageException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UsageException(String message) {
            super(message);
        }
    }

    /**
     * @param args the arguments after the subcommand name
     * @return the options
     * @throws UsageException for an unknown option, a missing or malformed value
     */
    public static WriteBwOptions parse(String... args) {
        WriteBwOptions o = new WriteBwOptions();
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
                // A cluster of flags such as -aF: re-parse the rest as flags.
                String rest = value;
                value = null;
                List<String> expanded = new ArrayList<>();
                for (char ch : rest.toCharArray()) {
                    expanded.add("-" + ch);
                }
                o.apply(name, null);
                for (String e : expanded) {
                    String n = e.substring(1);
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
        return o;
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
            case "cq-mod" -> "Q";
            case "qp" -> "q";
            case "connection" -> "c";
            case "inline_size" -> "I";
            case "CPU-freq" -> "F";
            case "gid-index" -> "x";
            case "mtu" -> "m";
            case "noPeak" -> "N";
            case "port" -> "p";
            case "help" -> "h";
            case "version" -> "V";
            default -> name;
        };
    }

    private static boolean takesValue(String name) {
        return switch (name) {
            case "d", "i", "s", "n", "D", "f", "t", "Q", "q", "c", "I", "x", "m", "p", "out_json_file",
                 "server-ib-dev" -> true;
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
            case "t" -> txDepth = intIn(name, value, 1, 1 << 15);
            case "Q" -> cqMod = intIn(name, value, 1, 1024);
            case "q" -> numQps = intIn(name, value, 1, 1 << 14);
            case "c" -> {
                if (!value.equals("RC") && !value.equals("UC")) {
                    throw new UsageException("connection type " + value
                            + " is not supported by ib_write_bw here (RC or UC)");
                }
                connection = value;
            }
            case "I" -> inlineSize = intIn(name, value, 0, 1 << 16);
            case "report_gbits" -> reportGbits = true;
            case "F" -> {
                // perftest: do not warn about CPU frequency scaling. rdma4j measures with System.nanoTime.
            }
            case "x" -> gidIndex = intIn(name, value, 0, 1 << 16);
            case "m" -> {
                mtu = intIn(name, value, 256, 4096);
                if (Integer.bitCount(mtu) != 1) {
                    throw new UsageException("Invalid MTU " + value + " - Valid values are 256,512,1024,2048,4096");
                }
            }
            case "N" -> noPeak = true;
            case "json" -> json = true;
            case "out_json" -> outJson = true;
            case "out_json_file" -> outJsonFile = value;
            case "loopback" -> loopback = true;
            case "perform_warm_up" -> warmUp = true;
            case "p" -> port = intIn(name, value, 1, 65535);
            case "h" -> help = true;
            case "V" -> version = true;
            default -> throw new UsageException("unrecognized option '" + (name.length() == 1 ? "-" : "--") + name
                    + "' (see ib_write_bw --help)");
        }
    }

    private static int intIn(String name, String value, int min, int max) {
        long v = longIn(name, value, min, max);
        return (int) v;
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

    /** @return the usage text */
    public static String usage() {
        return """
                Usage:
                  ib_write_bw --loopback [options]   run server and client in this process on the software devices

                rdma4j runs both sides in one process (a TCP server/client mode is not there yet), so
                --loopback is required. The client side uses -d (default: the first device), the server
                side --server-ib-dev (default: a second device if there is one, else the same device).
                The output is what perftest's ib_write_bw client prints.

                Options:
                  -a, --all                 Run sizes from 2 till 2^23
                  -c, --connection=<RC/UC>  Connection type RC/UC (default RC)
                  -d, --ib-dev=<dev>        Use IB device <dev> for the client (default first device found)
                      --server-ib-dev=<dev> Use IB device <dev> for the server (default second device found)
                  -D, --duration            Run test for a customized period of seconds
                  -f, --margin              Measure results within margins (default duration/4 s)
                  -F, --CPU-freq            Do not fail even if cpufreq_ondemand module is loaded (accepted, no effect)
                  -h, --help                Show this help screen
                  -i, --ib-port=<port>      Use port <port> of IB device (default 1)
                  -I, --inline_size=<size>  Max size of message to be sent in inline (default 0)
                  -m, --mtu=<mtu>           MTU size: 256 - 4096 (default port mtu)
                  -n, --iters=<iters>       Number of exchanges (at least 5, default 5000)
                  -N, --noPeak              Cancel peak-bw calculation (default with peak up to iters=20000)
                  -p, --port=<port>         Listen on/connect to port <port> (accepted, unused in loopback)
                  -q, --qp=<num of qp's>    Num of qp's (default 1)
                  -Q, --cq-mod              Generate Cqe only after <--cq-mod> completion (default 100)
                  -s, --size=<size>         Size of message to exchange (default 65536)
                  -t, --tx-depth=<dep>      Size of tx queue (default 128)
                  -V, --version             Display version number
                  -x, --gid-index=<index>   Test uses GID with GID index (default: first non-zero GID on Ethernet)
                      --report_gbits        Report Max/Average BW of test in Gbit/sec (instead of MiB/sec)
                      --perform_warm_up     Run each size once untimed first (in Java this also warms up the JIT)
                      --loopback            Server and client in this process (required for now)
                      --json                Print perftest's --out_json document on stdout instead of the table
                      --out_json --out_json_file=<file>  Also write that document to <file>, as perftest does
                """;
    }
}
