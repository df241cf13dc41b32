// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.IbSocketAddress;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * What the librdmacm examples of rdma-core share ({@code librdmacm/examples/common.c}): address lookup as
 * {@code get_rdma_addr} does it with {@code rdma_getaddrinfo}, {@code perror}-style error lines, C's
 * {@code atoi}/{@code strtoul}, and bounded event waits that Ctrl-C ends.
 */
final class CmExamples {
    /** How long one wait for a CM event lasts before the loop looks at Ctrl-C again. */
    static final Duration EVENT_SLICE = Duration.ofMillis(100);
    /** A wait for completions ends after this long without one (the C examples would wait forever). */
    static final long STALL_NS = Duration.ofSeconds(20).toNanos();
    /** EINTR: the result of a wait that Ctrl-C ended. */
    static final int EINTR = 4;

    private CmExamples() {
    }

    /**
     * What a librdmacm example program is made of in Java: its providers and streams, the run wrapper (Ctrl-C
     * makes it exit 130, the exit status is C's {@code ret} cut to 8 bits), the IDs of rejected requests (closed
     * once their events are acknowledged, as the C examples leave them to the exit), and quiet cleanup.
     */
    abstract static class Tool {
        final String name;
        final RdmaCm cm;
        final PrintStream out;
        final PrintStream err;
        final StopSignal stop;
        private final List<CmId> rejected = new ArrayList<>();

        Tool(String name, RdmaCm cm, PrintStream out, PrintStream err, StopSignal stop) {
            this.name = name;
            this.cm = cm;
            this.out = out;
            this.err = err;
            this.stop = stop;
        }

        /** @return false after printing the usage for bad flags */
        abstract boolean parse(String[] args);

        /** @return the C program's {@code ret} */
        abstract int run();

        /** Parses and runs: the exit status. */
        final int exec(String[] args) {
            stop.enter();
            try {
                if (!parse(args)) {
                    return 1;
                }
                int rc = run();
                return stop.stopped() ? 130 : rc & 0xFF;
            } finally {
                out.flush();
                stop.exit();
            }
        }

        /** {@code -f}: "ip" and "name" are IP addresses (false), "gid" AF_IB (true); anything else warns. */
        boolean addressFormat(String f, boolean current) {
            String v = f.toLowerCase(Locale.ROOT);
            if (v.startsWith("ip")) {
                return false;
            }
            if (v.startsWith("gid")) {
                return true;
            }
            if (!v.startsWith("name")) {
                err.println("Warning: unknown address format");
            }
            return current;
        }

        /** Keeps the ID of a rejected request until its event is acknowledged. */
        void rejected(CmId id) {
            rejected.add(id);
        }

        /** Closes the IDs of rejected requests (after their events were acknowledged). */
        void closeRejected() {
            for (CmId id : rejected) {
                try {
                    id.close();
                } catch (VerbsException e) {
                    perror(err, name + ": rdma_destroy_id", e);
                }
            }
            rejected.clear();
        }

        /** Closes each resource that is not null, reporting (not throwing) a failure. */
        void quiet(AutoCloseable... cs) {
            for (AutoCloseable c : cs) {
                if (c == null) {
                    continue;
                }
                try {
                    c.close();
                } catch (Exception e) {
                    err.println(name + ": cleanup: " + e.getMessage());
                }
            }
        }

        /** Destroys the ID's QP (if any), then the resources, then the ID, as the examples' destroy_node. */
        void destroy(CmId id, AutoCloseable... resources) {
            try {
                if (id.qp() != null) {
                    id.destroyQp();
                }
            } catch (VerbsException e) {
                perror(err, name + ": rdma_destroy_qp", e);
            }
            quiet(resources);
            if (id != null) {
                try {
                    id.close();
                } catch (VerbsException e) {
                    perror(err, name + ": rdma_destroy_id", e);
                }
            }
        }
    }

    /** A failed address lookup, with {@code gai_strerror}'s text. */
    static final class GaiException extends Exception {
        private static final long serialVersionUID = 1L;

        GaiException(String message) {
            super(message, null, false, false);
        }
    }

    /**
     * The source and destination of {@code rdma_getaddrinfo} as {@code get_rdma_addr} uses it: for a passive
     * side ({@code RAI_PASSIVE}) the address to bind (the wildcard 0.0.0.0 when no node is given, as glibc's
     * {@code getaddrinfo(NULL, port, AI_PASSIVE)} returns first), for an active side the destination and the
     * optional source.
     *
     * @param src source (active) or bind (passive) address text, or null
     * @param dst destination address text (active), null for a passive side
     * @param port the port (a number)
     * @param ps the port space (an AF_IB address carries the service ID {@code ps << 16 | port})
     * @param ib {@code -f gid}: the texts are GIDs and the addresses AF_IB ({@link IbSocketAddress})
     * @return {src (may be null), dst (null for a passive side)}
     * @throws GaiException with gai_strerror's text for a name that does not resolve or a bad port
     */
    static SocketAddress[] rdmaAddr(String src, String dst, String port, PortSpace ps, boolean ib) throws GaiException {
        int p = portNumber(port);
        SocketAddress s = null;
        if (src != null) {
            // an active side connects from the port the CM picks (get_rdma_addr looks the source up without one)
            s = address(src, dst == null ? p : 0, ps, ib);
        } else if (dst == null) {
            s = ib ? new IbSocketAddress(Gid.ZERO, ps.serviceId(p))
                    : new InetSocketAddress(InetAddress.ofLiteral("0.0.0.0"), p);
        }
        SocketAddress d = dst == null ? null : address(dst, p, ps, ib);
        return new SocketAddress[] {s, d};
    }

    private static SocketAddress address(String text, int port, PortSpace ps, boolean ib) throws GaiException {
        if (ib) {
            InetAddress a;
            try {
                a = InetAddress.ofLiteral(text);
            } catch (IllegalArgumentException e) {
                throw new GaiException("Name or service not known");
            }
            return new IbSocketAddress(Gid.ofInetAddress(a), ps.serviceId(port));
        }
        try {
            return new InetSocketAddress(InetAddress.getByName(text), port);
        } catch (UnknownHostException e) {
            throw new GaiException("Name or service not known");
        }
    }

    private static int portNumber(String port) throws GaiException {
        try {
            int p = Integer.parseInt(port.strip());
            if (p < 0 || p > 65535) {
                throw new GaiException("Servname not supported for ai_socktype");
            }
            return p;
        } catch (NumberFormatException e) {
            throw new GaiException("Servname not supported for ai_socktype");
        }
    }

    /**
     * {@code perror(prefix)}: "prefix: strerror(errno)", then on a second line what rdma4j knows about the
     * failure and what to do (Linux prints only the first line).
     *
     * @param err    standard error
     * @param prefix the text before the colon
     * @param e      the failure
     */
    static void perror(PrintStream err, String prefix, VerbsException e) {
        Errno n = e.errno();
        err.println(prefix + ": " + (n == null ? "Unknown error" : n.message()));
        if (e.getMessage() != null && !e.getMessage().isEmpty()) {
            err.println("\t(" + e.getMessage() + ")");
        }
    }

    /** {@return the negative errno of a failure, as librdmacm calls return it through errno} */
    static int negErrno(VerbsException e) {
        return e.errno() == null ? -1 : -e.errno().value();
    }

    /**
     * C's {@code atoi}: leading blanks, a sign, digits; 0 when there are none.
     *
     * @param s the text
     * @return its value
     */
    static int atoi(String s) {
        return (int) strtol(s, 10);
    }

    /**
     * C's {@code strtoul(s, NULL, 0)} truncated as the examples cast it: a 0x prefix is hex, a leading 0 octal.
     *
     * @param s the text
     * @return its value (0 when there are no digits)
     */
    static long strtoul0(String s) {
        String t = s.strip();
        boolean neg = t.startsWith("-");
        if (neg || t.startsWith("+")) {
            t = t.substring(1);
        }
        long v;
        if (t.startsWith("0x") || t.startsWith("0X")) {
            v = strtol(t.substring(2), 16);
        } else if (t.startsWith("0") && t.length() > 1) {
            v = strtol(t.substring(1), 8);
        } else {
            v = strtol(t, 10);
        }
        return neg ? -v : v;
    }

    private static long strtol(String s, int radix) {
        String t = s.strip();
        int i = 0;
        boolean neg = false;
        if (i < t.length() && (t.charAt(i) == '-' || t.charAt(i) == '+')) {
            neg = t.charAt(i) == '-';
            i++;
        }
        long v = 0;
        while (i < t.length() && Character.digit(t.charAt(i), radix) >= 0 && v < Integer.MAX_VALUE * 16L) {
            v = v * radix + Character.digit(t.charAt(i), radix);
            i++;
        }
        v = Math.min(v, 0xFFFF_FFFFL);
        return neg ? -v : v;
    }

    /** What {@link #pollUntil} hands over for each non-empty poll. */
    interface Batch {
        /**
         * @param wc the completions
         * @param n  how many of them are valid
         * @return 0 to go on, or a non-zero result that ends the wait
         */
        int polled(WorkCompletion[] wc, int n);
    }

    /**
     * The examples' {@code poll_cqs} loop: polls 8 at a time until {@code count} completions of any status
     * arrived (a flushed receive counts, so a peer that disconnected ends the wait), spinning, then
     * yielding as every tool does ({@link BusyPoll}).
     *
     * @param cq    the CQ
     * @param count how many completions to wait for
     * @param stop  Ctrl-C
     * @param batch told about each non-empty poll (may be null)
     * @return 0, -EINTR when stopped, -ETIMEDOUT after {@link #STALL_NS} without a completion, a polling
     *         error's negative errno, or what {@code batch} returned
     */
    static int pollUntil(CompletionQueue cq, int count, StopSignal stop, Batch batch) {
        WorkCompletion[] wc = new WorkCompletion[8];
        for (int i = 0; i < wc.length; i++) {
            wc[i] = new WorkCompletion();
        }
        long last = System.nanoTime();
        int spins = 0;
        for (int done = 0; done < count; ) {
            int got;
            try {
                got = cq.poll(wc, wc.length);
            } catch (VerbsException e) {
                return negErrno(e);
            }
            if (got > 0) {
                done += got;
                last = System.nanoTime();
                spins = 0;
                if (batch != null) {
                    int r = batch.polled(wc, got);
                    if (r != 0) {
                        return r;
                    }
                }
                continue;
            }
            spins = BusyPoll.idle(spins);
            if (BusyPoll.yields(spins) && (spins & 255) == 0) {
                if (stop.stopped()) {
                    return -EINTR;
                }
                if (System.nanoTime() - last > STALL_NS) {
                    return -Errno.ETIMEDOUT.value();
                }
            }
        }
        return 0;
    }

    /**
     * rdma_get_cm_event that Ctrl-C ends: waits in slices of {@link #EVENT_SLICE}.
     *
     * @param ch   the channel
     * @param stop the stop signal
     * @return the event, or null when stopped
     */
    static CmEvent getEvent(CmEventChannel ch, StopSignal stop) {
        while (!stop.stopped()) {
            CmEvent e = ch.getEvent(EVENT_SLICE);
            if (e != null) {
                return e;
            }
        }
        return null;
    }
}
