// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.util.ArrayList;
import java.util.List;

/**
 * The command line of ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong and ibv_srq_pingpong, parsed as their
 * getopt_long does: short options with the value attached or separate ({@code -n10}, {@code -n 10}),
 * clustered flags ({@code -ec}), long options with {@code =} or a separate value, and an optional
 * server name. Defaults are rdma-core's. Numbers take C's {@code strtol(.., 0)} forms (decimal,
 * {@code 0x} hex, leading-0 octal); unlike C, a value that is not a number is refused instead of
 * read as 0.
 *
 * <p>rdma4j adds {@code --loopback} (server and client in this process), {@code --server-ib-dev}
 * (the server's device in loopback) and {@code --verify} (the client checks every echo byte for byte
 * against a fresh pattern, see {@link EchoPattern}); rdma-core's programs have none of these.
 */
public final class PingPongOptions {
    /** srq_pingpong's MAX_QP: the number of addresses always exchanged. */
    public static final int MAX_QP = 256;
    /** rdma-core's default TCP port. */
    public static final int DEFAULT_PORT = 18515;

    /** Which program. */
    public enum Kind {
        /** ibv_rc_pingpong. */
        RC("rc_pingpong", "p:d:i:s:m:r:n:l:eg:oOPtcjNU"),
        /** ibv_uc_pingpong (its usage, seen in the VM's rdma-core 44: rc's options without -o -O -P -t -j -N -U). */
        UC("uc_pingpong", "p:d:i:s:m:r:n:l:eg:c"),
        /** ibv_ud_pingpong. */
        UD("ud_pingpong", "p:d:i:s:r:n:l:eg:c"),
        /** ibv_srq_pingpong. */
        SRQ("srq_pingpong", "p:d:i:s:m:q:r:n:l:eog:c");

        private final String command;
        private final String optstring;

        Kind(String command, String optstring) {
            this.command = command;
            this.optstring = optstring;
        }

        /** {@return the rdma4j subcommand, e.g. {@code rc_pingpong}} */
        public String command() {
            return command;
        }

        /**
         * {@return the kind, or null}
         *
         * @param cmd a subcommand, with or without the {@code ibv_} prefix
         */
        public static Kind of(String cmd) {
            String c = cmd.startsWith("ibv_") ? cmd.substring(4) : cmd;
            for (Kind k : values()) {
                if (k.command.equals(c)) {
                    return k;
                }
            }
            return null;
        }

        boolean has(char opt) {
            return optstring.indexOf(opt) >= 0;
        }

        boolean takesValue(char opt) {
            int i = optstring.indexOf(opt);
            return i >= 0 && i + 1 < optstring.length() && optstring.charAt(i + 1) == ':';
        }
    }

    /** A command line the program refuses; the message says why. */
    public static final class UsageException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UsageException(String message) {
            super(message);
        }
    }

    final Kind kind;
    String serverName;
    int port = DEFAULT_PORT;
    boolean portGiven;
    String ibDev;
    String serverIbDev;
    int ibPort = 1;
    long size;
    int mtu = 1024;
    int rxDepth = 500;
    long iters = 1000;
    int sl;
    boolean events;
    int gidIndex = -1;
    boolean gidGiven;
    int numQp = 16;
    boolean validate;
    boolean newSend;
    /** An rc/srq option for a capability the verbs API does not offer (-o -O -P -t -j -U), or 0. */
    char unsupported;
    boolean loopback;
    /** --verify: every message a new pattern, every echo compared with it (client side). */
    boolean verify;
    boolean help;

    private PingPongOptions(Kind kind) {
        this.kind = kind;
        // ud_pingpong's code default is 1024 although its usage text says 2048 (roce-wire.md 5.1).
        this.size = kind == Kind.UD ? 1024 : 4096;
    }

    /**
     * {@return the options}
     *
     * @param kind which program
     * @param args the arguments after the subcommand
     * @throws UsageException for an unknown option, a missing or malformed value, or a value the
     *                        program refuses
     */
    public static PingPongOptions parse(Kind kind, String... args) {
        PingPongOptions o = new PingPongOptions(kind);
        List<String> positional = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("--")) {
                positional.addAll(List.of(args).subList(i + 1, args.length));
                break;
            }
            if (a.startsWith("--")) {
                int eq = a.indexOf('=');
                String name = eq < 0 ? a.substring(2) : a.substring(2, eq);
                String value = eq < 0 ? null : a.substring(eq + 1);
                Character opt = longToShort(kind, name);
                if (opt == null) {
                    throw new UsageException("unrecognized option '--" + name + "'");
                }
                char c = opt;
                boolean takes = c == 'L' || c == 'V' ? false : c == 'S' || kind.takesValue(c);
                if (takes && value == null) {
                    if (i + 1 >= args.length) {
                        throw new UsageException("option '--" + name + "' requires an argument");
                    }
                    value = args[++i];
                } else if (!takes && value != null) {
                    throw new UsageException("option '--" + name + "' doesn't allow an argument");
                }
                o.apply(c, value, "--" + name);
            } else if (a.startsWith("-") && a.length() > 1) {
                for (int j = 1; j < a.length(); j++) {
                    char c = a.charAt(j);
                    if (c == 'h') {
                        o.help = true;
                        continue;
                    }
                    if (!kind.has(c) || c == ':') {
                        throw new UsageException("invalid option -- '" + c + "'");
                    }
                    if (kind.takesValue(c)) {
                        String value;
                        if (j + 1 < a.length()) {
                            value = a.substring(j + 1);
                        } else if (i + 1 < args.length) {
                            value = args[++i];
                        } else {
                            throw new UsageException("option requires an argument -- '" + c + "'");
                        }
                        o.apply(c, value, "-" + c);
                        break;
                    }
                    o.apply(c, null, "-" + c);
                }
            } else {
                positional.add(a);
            }
        }
        if (positional.size() > 1) {
            throw new UsageException("one server name expected, got " + positional);
        }
        if (!positional.isEmpty()) {
            o.serverName = positional.get(0);
        }
        if (o.loopback && o.serverName != null) {
            throw new UsageException("--loopback runs both sides in this process: drop the server name '"
                    + o.serverName + "'");
        }
        if (o.verify && !o.help) {
            if (o.serverName == null && !o.loopback) {
                throw new UsageException("--verify checks the echoes the client receives: give a server name or"
                        + " --loopback (a server echoes as rdma-core's does)");
            }
            if (kind == Kind.SRQ && o.numQp != 1) {
                // The server's QPs share one receive buffer, so with several QPs an echo may carry
                // another QP's message.
                throw new UsageException("--verify needs -q 1: the server's QPs share one buffer");
            }
        }
        if (kind == Kind.SRQ && !o.help) {
            if (o.numQp > o.rxDepth) {
                throw new UsageException("rx_depth " + o.rxDepth + " is too small for " + o.numQp
                        + " QPs -- must have at least one receive per QP.");
            }
            if (o.numQp >= MAX_QP) {
                // rdma-core prints MAX_QP - 1 here although the check is num_qp >= MAX_QP.
                throw new UsageException("num_qp " + o.numQp + " must be less than " + (MAX_QP - 1));
            }
        }
        return o;
    }

    /** Long options; 'L' is --loopback, 'S' --server-ib-dev, 'V' --verify, 'h' --help (rdma4j additions). */
    private static Character longToShort(Kind kind, String name) {
        Character c = switch (name) {
            case "port" -> 'p';
            case "ib-dev" -> 'd';
            case "ib-port" -> 'i';
            case "size" -> 's';
            case "mtu" -> 'm';
            case "num-qp" -> 'q';
            case "rx-depth" -> 'r';
            case "iters" -> 'n';
            case "sl" -> 'l';
            case "events" -> 'e';
            case "gid-idx" -> 'g';
            case "chk" -> 'c';
            case "odp" -> 'o';
            case "iodp" -> 'O';
            case "prefetch" -> 'P';
            case "ts" -> 't';
            case "dm" -> 'j';
            case "new_send" -> 'N';
            case "allow-cc-unprotected" -> 'U';
            case "loopback" -> 'L';
            case "server-ib-dev" -> 'S';
            case "verify" -> 'V';
            case "help" -> 'h';
            default -> null;
        };
        if (c == null || c == 'L' || c == 'S' || c == 'V' || c == 'h') {
            return c;
        }
        return kind.has(c) ? c : null;
    }

    private void apply(char c, String v, String opt) {
        switch (c) {
            case 'p' -> {
                long p = number(v, opt);
                if (p < 0 || p > 65535) {
                    throw new UsageException("port " + v + " out of range (0..65535)");
                }
                port = (int) p;
                portGiven = true;
            }
            case 'd' -> ibDev = v;
            case 'S' -> serverIbDev = v;
            case 'i' -> {
                long p = number(v, opt);
                if (p < 1 || p > 255) {
                    throw new UsageException("IB port " + v + " out of range (1..255)");
                }
                ibPort = (int) p;
            }
            case 's' -> {
                long s = number(v, opt);
                if (s < 1 || s > Integer.MAX_VALUE - 40) {
                    throw new UsageException("size " + v + " out of range (1.." + (Integer.MAX_VALUE - 40) + ")");
                }
                size = s;
            }
            case 'm' -> {
                long m = number(v, opt);
                if (m != 256 && m != 512 && m != 1024 && m != 2048 && m != 4096) {
                    throw new UsageException("MTU " + v + " (expected 256, 512, 1024, 2048 or 4096)");
                }
                mtu = (int) m;
            }
            case 'q' -> {
                long q = number(v, opt);
                if (q < 1) {
                    throw new UsageException("num_qp " + v + " must be at least 1");
                }
                numQp = (int) Math.min(q, Integer.MAX_VALUE);
            }
            case 'r' -> {
                long r = number(v, opt);
                if (r < 1 || r > 1 << 20) {
                    throw new UsageException("rx-depth " + v + " out of range (1.." + (1 << 20) + ")");
                }
                rxDepth = (int) r;
            }
            case 'n' -> {
                long n = number(v, opt);
                if (n < 1 || n > 0xFFFF_FFFFL) {
                    throw new UsageException("iters " + v + " out of range (1..4294967295)");
                }
                iters = n;
            }
            case 'l' -> {
                long l = number(v, opt);
                if (l < 0 || l > 15) {
                    throw new UsageException("service level " + v + " out of range (0..15)");
                }
                sl = (int) l;
            }
            case 'e' -> events = true;
            case 'g' -> {
                long g = number(v, opt);
                if (g < -1 || g > Integer.MAX_VALUE) {
                    throw new UsageException("GID index " + v + " out of range");
                }
                gidIndex = (int) g;
                gidGiven = g >= 0;
            }
            case 'c' -> validate = true;
            case 'N' -> newSend = true;
            case 'o', 'O', 'P', 't', 'j', 'U' -> {
                if (unsupported == 0) {
                    unsupported = c;
                }
            }
            case 'L' -> loopback = true;
            case 'V' -> verify = true;
            case 'h' -> help = true;
            default -> throw new UsageException("invalid option -- '" + c + "'");
        }
    }

    /** C strtol(v, NULL, 0): optional sign, then 0x hex, 0 octal or decimal; the whole text must be used. */
    static long number(String v, String opt) {
        String s = v.strip();
        boolean neg = false;
        if (s.startsWith("-") || s.startsWith("+")) {
            neg = s.charAt(0) == '-';
            s = s.substring(1);
        }
        int radix = 10;
        if (s.length() > 2 && (s.startsWith("0x") || s.startsWith("0X"))) {
            radix = 16;
            s = s.substring(2);
        } else if (s.length() > 1 && s.startsWith("0")) {
            radix = 8;
            s = s.substring(1);
        }
        try {
            long n = Long.parseLong(s, radix);
            if (n < 0) {
                throw new NumberFormatException();
            }
            return neg ? -n : n;
        } catch (NumberFormatException e) {
            throw new UsageException("invalid number '" + v + "' for " + opt);
        }
    }

    /**
     * The usage text, rdma-core's lines for this program followed by rdma4j's additions.
     *
     * @param kind which program
     * @return the text
     */
    public static String usage(Kind kind) {
        String argv0 = "rdma4j " + kind.command();
        StringBuilder sb = new StringBuilder();
        sb.append("Usage:\n");
        sb.append("  ").append(argv0).append("            start a server and wait for connection\n");
        sb.append("  ").append(argv0).append(" <host>     connect to server at <host>\n");
        sb.append("  ").append(argv0).append(" --loopback server and client in this process\n");
        sb.append('\n');
        sb.append("Options:\n");
        sb.append("  -p, --port=<port>      listen on/connect to port <port> (default 18515)\n");
        sb.append("  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n");
        sb.append("  -i, --ib-port=<port>   use port <port> of IB device (default 1)\n");
        switch (kind) {
            case RC -> {
                connectedOptions(sb);
                sb.append("  -N, --new_send         use new post send WR API (same requests here)\n");
                sb.append("  -o, -O, -P, -t, -j, -U are rdma-core's ODP, timestamp, device-memory and CoCo options;\n");
                sb.append("                         the verbs API offers none of these, so they are refused\n");
            }
            case UC -> connectedOptions(sb);
            case UD -> {
                sb.append("  -s, --size=<size>      size of message to exchange (default 1024)\n");
                sb.append("  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)\n");
                sb.append("  -n, --iters=<iters>    number of exchanges (default 1000)\n");
                sb.append("  -l, --sl=<SL>          send messages with service level <SL> (default 0)\n");
                sb.append("  -e, --events           sleep on CQ events (default poll)\n");
                sb.append("  -g, --gid-idx=<gid index> local port gid index\n");
                sb.append("  -c, --chk              validate received buffer\n");
            }
            case SRQ -> {
                sb.append("  -s, --size=<size>      size of message to exchange (default 4096)\n");
                sb.append("  -m, --mtu=<size>       path MTU (default 1024)\n");
                sb.append("  -q, --num-qp=<num>     number of QPs to use (default 16)\n");
                sb.append("  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)\n");
                sb.append("  -n, --iters=<iters>    number of exchanges per QP(default 1000)\n");
                sb.append("  -l, --sl=<sl>          service level value\n");
                sb.append("  -e, --events           sleep on CQ events (default poll)\n");
                sb.append("  -g, --gid-idx=<gid index> local port gid index\n");
                sb.append("  -o, --odp              use on demand paging (refused: the verbs API has no ODP)\n");
                sb.append("  -c, --chk              validate received buffer\n");
            }
            default -> throw new IllegalStateException();
        }
        sb.append('\n');
        sb.append("rdma4j additions:\n");
        sb.append("  --loopback             run the server and the client in this process, on two devices,\n");
        sb.append("                         exchanging addresses over 127.0.0.1 (an ephemeral port unless -p);\n");
        sb.append("                         -g defaults to 0 here. Output lines are prefixed [server]/[client]\n");
        sb.append("  --server-ib-dev=<dev>  the server's device in loopback (default: the first device\n");
        sb.append("                         other than the client's -d)\n");
        sb.append("  --verify               client: each message carries a new pseudo-random pattern and the\n");
        sb.append("                         server's echo must equal it byte for byte (rdma-core's servers echo\n");
        sb.append("                         their buffer); a difference is reported and the exit status is 1\n");
        sb.append("  -h, --help             this text\n");
        return sb.toString();
    }

    /** The options rc_pingpong and uc_pingpong share, in the order both print them. */
    private static void connectedOptions(StringBuilder sb) {
        sb.append("  -s, --size=<size>      size of message to exchange (default 4096)\n");
        sb.append("  -m, --mtu=<size>       path MTU (default 1024)\n");
        sb.append("  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)\n");
        sb.append("  -n, --iters=<iters>    number of exchanges (default 1000)\n");
        sb.append("  -l, --sl=<sl>          service level value\n");
        sb.append("  -e, --events           sleep on CQ events (default poll)\n");
        sb.append("  -g, --gid-idx=<gid index> local port gid index\n");
        sb.append("  -c, --chk              validate received buffer\n");
    }
}
