// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.PrintStream;
import java.net.SocketAddress;
import java.time.Duration;
import java.util.Locale;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerArray;

import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * {@code rdma4j cmtime}: rdma-core's {@code cmtime} ({@code librdmacm/examples/cmtime.c}), which times each step
 * of setting up and tearing down {@code -c} connections (default 100): create id, bind, resolve address, resolve
 * route, create QP, connect, disconnect, destroy; every step is started for all connections, then waited for, so
 * "us / conn" is the step's total over the connections and "min us" the fastest single one. The server accepts
 * every request (a thread creates the QP and accepts) and tears down on DISCONNECTED (another thread), until
 * Ctrl-C. Same flags ({@code -s -b -c -p -r -t}) and table as cmtime, so that the two compare line by line.
 */
public final class Cmtime extends CmExamples.Tool {
    private enum Step {
        CREATE_ID("create id"), BIND("bind addr"), RESOLVE_ADDR("resolve addr"), RESOLVE_ROUTE("resolve route"),
        CREATE_QP("create qp"), CONNECT("connect"), DISCONNECT("disconnect"), DESTROY("destroy");

        final String label;

        Step(String label) {
            this.label = label;
        }
    }

    private static final int STEPS = Step.values().length;
    private static final QpCapabilities CAP = new QpCapabilities(1, 1, 1, 1, 0);

    private String port = "7471";
    private String dstAddr;
    private String srcAddr;
    private int timeoutMs = 2000;
    private int retries = 2;
    private int connections = 100;

    private CmEventChannel channel;
    private Node[] nodes;
    /** Per step: wall-clock start and end of the whole step. */
    private final long[][] times = new long[STEPS][2];
    private final AtomicIntegerArray started = new AtomicIntegerArray(STEPS);
    private final AtomicIntegerArray completed = new AtomicIntegerArray(STEPS);
    private SocketAddress src;
    private SocketAddress dst;
    private final ConcurrentHashMap<Context, ProtectionDomain> pds = new ConcurrentHashMap<>();

    /** One connection ({@code struct node}): its ID and each step's start and end. */
    private static final class Node {
        CmId id;
        final long[][] times = new long[STEPS][2];
        volatile boolean error;
        int retries;
    }

    private Cmtime(RdmaCm cm, PrintStream out, PrintStream err, StopSignal stop) {
        super("cmtime", cm, out, err, stop);
    }

    /**
     * Runs cmtime on the process's CM providers.
     *
     * @param args its arguments
     * @param out  standard output
     * @param err  standard error
     * @param stop stops a run (Ctrl-C; the server runs until then)
     * @return the exit status
     */
    public static int main(String[] args, PrintStream out, PrintStream err, StopSignal stop) {
        return main(args, RdmaCm.system(), out, err, stop);
    }

    /**
     * Runs cmtime on the given CM providers.
     *
     * @param args its arguments
     * @param cm   the providers
     * @param out  standard output
     * @param err  standard error
     * @param stop stops a run
     * @return the exit status
     */
    public static int main(String[] args, RdmaCm cm, PrintStream out, PrintStream err, StopSignal stop) {
        return new Cmtime(cm, out, err, stop).exec(args);
    }

    @Override
    boolean parse(String[] args) {
        Getopt g = new Getopt(args, "s:b:c:p:r:t:");
        int op;
        while ((op = g.next()) != -1) {
            switch (op) {
                case 's' -> dstAddr = g.arg();
                case 'b' -> srcAddr = g.arg();
                case 'c' -> connections = CmExamples.atoi(g.arg());
                case 'p' -> port = g.arg();
                case 'r' -> retries = CmExamples.atoi(g.arg());
                case 't' -> timeoutMs = CmExamples.atoi(g.arg());
                default -> {
                    out.println("usage: cmtime");
                    out.println("\t[-s server_address]");
                    out.println("\t[-b bind_address]");
                    out.println("\t[-c connections]");
                    out.println("\t[-p port_number]");
                    out.println("\t[-r retries]");
                    out.println("\t[-t timeout_ms]");
                    return false;
                }
            }
        }
        return true;
    }

    private static void startPerf(Node n, Step s) {
        n.times[s.ordinal()][0] = System.nanoTime();
    }

    private static void endPerf(Node n, Step s) {
        n.times[s.ordinal()][1] = System.nanoTime();
    }

    private void startTime(Step s) {
        times[s.ordinal()][0] = System.nanoTime();
    }

    private void endTime(Step s) {
        times[s.ordinal()][1] = System.nanoTime();
    }

    @Override
    int run() {
        connections = Math.max(connections, 0);
        try {
            channel = cm.createEventChannel();
        } catch (VerbsException e) {
            CmExamples.perror(err, "failed to create RDMA CM event channel", e);
            return 1;
        }
        int ret;
        try {
            if (dstAddr != null) {
                if (!allocNodes()) {
                    return 1;
                }
                ret = runClient();
                cleanupNodes();
                showPerf();
            } else {
                nodes = new Node[0];
                ret = runServer();
            }
        } finally {
            for (CmEvent e; (e = channel.pollEvent()) != null; ) {
                e.ack();
            }
            for (ProtectionDomain pd : pds.values()) {
                quiet(pd);
            }
            try {
                channel.close();
            } catch (VerbsException e) {
                // IDs of the server's connections still open at Ctrl-C: the JVM's exit takes them
            }
        }
        return ret;
    }

    private ProtectionDomain pdOf(CmId id) {
        return pds.computeIfAbsent(id.context(), Context::allocPd); // librdmacm's per-device PD (NULL pd)
    }

    private boolean allocNodes() {
        nodes = new Node[connections];
        out.println("creating id");
        startTime(Step.CREATE_ID);
        for (int i = 0; i < connections; i++) {
            nodes[i] = new Node();
            startPerf(nodes[i], Step.CREATE_ID);
            try {
                nodes[i].id = channel.createId(PortSpace.TCP);
                nodes[i].id.attach(nodes[i]);
            } catch (VerbsException e) {
                CmExamples.perror(err, "rdma_create_id", e);
                return false;
            }
            endPerf(nodes[i], Step.CREATE_ID);
        }
        endTime(Step.CREATE_ID);
        return true;
    }

    private void cleanupNodes() {
        out.println("destroying id");
        for (CmEvent e; (e = channel.pollEvent()) != null; ) {
            e.ack(); // events that came after the last wait (TIMEWAIT_EXIT)
        }
        startTime(Step.DESTROY);
        for (Node n : nodes) {
            startPerf(n, Step.DESTROY);
            if (n.id != null) {
                try {
                    n.id.close();
                } catch (VerbsException e) {
                    CmExamples.perror(err, "rdma_destroy_id", e);
                }
            }
            endPerf(n, Step.DESTROY);
        }
        endTime(Step.DESTROY);
    }

    private void showPerf() {
        out.print("step              total ms     max ms     min us  us / conn\n");
        for (Step s : Step.values()) {
            int i = s.ordinal();
            if (s == Step.BIND && srcAddr == null) {
                continue;
            }
            double max = 0;
            double min = 999999999.;
            for (Node n : nodes) {
                if (n.times[i][0] != 0 && n.times[i][1] != 0) {
                    double us = (n.times[i][1] - n.times[i][0]) / 1e3;
                    max = Math.max(max, us);
                    min = Math.min(min, us);
                }
            }
            double us = (times[i][1] - times[i][0]) / 1e3;
            out.printf(Locale.ROOT, "%-13s: %11.2f%11.2f%11.2f%11.2f\n", s.label, us / 1000., max / 1000., min,
                    connections == 0 ? 0 : us / connections);
        }
    }

    // ------------------------------------------------------------------ events (cma_handler)

    private final LinkedBlockingQueue<CmId> reqWork = new LinkedBlockingQueue<>();
    private final LinkedBlockingQueue<CmId> discWork = new LinkedBlockingQueue<>();

    private void cmaHandler(CmEvent e) {
        CmId id = e.id();
        Node n = id.attachment() instanceof Node x ? x : null;
        switch (e.type()) {
            case ADDR_RESOLVED -> complete(n, Step.RESOLVE_ADDR);
            case ROUTE_RESOLVED -> complete(n, Step.RESOLVE_ROUTE);
            case CONNECT_REQUEST -> reqWork.add(id);
            case ESTABLISHED -> {
                if (n != null) {
                    complete(n, Step.CONNECT);
                }
            }
            case ADDR_ERROR -> {
                if (n.retries-- > 0 && retry(() -> n.id.resolveAddr(src, dst, Duration.ofMillis(timeoutMs)))) {
                    break;
                }
                out.printf("RDMA_CM_EVENT_ADDR_ERROR, error: %d\n", e.status());
                n.error = true;
                complete(n, Step.RESOLVE_ADDR);
            }
            case ROUTE_ERROR -> {
                if (n.retries-- > 0 && retry(() -> n.id.resolveRoute(Duration.ofMillis(timeoutMs)))) {
                    break;
                }
                out.printf("RDMA_CM_EVENT_ROUTE_ERROR, error: %d\n", e.status());
                n.error = true;
                complete(n, Step.RESOLVE_ROUTE);
            }
            case CONNECT_ERROR, UNREACHABLE, REJECTED -> {
                out.printf("event: %s, error: %d\n", e.type().rdmaName(), e.status());
                n.error = true;
                complete(n, Step.CONNECT);
            }
            case DISCONNECTED -> {
                if (n == null) {
                    discWork.add(id);
                } else {
                    complete(n, Step.DISCONNECT);
                }
            }
            default -> {
                // DEVICE_REMOVAL, TIMEWAIT_EXIT: nothing (cleanup at the end)
            }
        }
    }

    private static boolean retry(Runnable r) {
        try {
            r.run();
            return true;
        } catch (VerbsException e) {
            return false;
        }
    }

    private void complete(Node n, Step s) {
        endPerf(n, s);
        completed.incrementAndGet(s.ordinal());
    }

    /** process_events: the event thread of both sides. */
    private Thread startEvents() {
        return Thread.ofPlatform().daemon().name("cmtime-events").start(() -> {
            while (!stop.stopped() && !Thread.currentThread().isInterrupted()) {
                CmEvent e;
                try {
                    e = channel.getEvent(CmExamples.EVENT_SLICE);
                } catch (VerbsException closed) {
                    return;
                }
                if (e == null) {
                    continue;
                }
                try {
                    cmaHandler(e);
                } catch (RuntimeException ex) {
                    err.println("cmtime: event " + e + ": " + ex.getMessage());
                } finally {
                    e.ack();
                }
            }
        });
    }

    /** Waits until every started operation of the step completed (cmtime: sched_yield in a loop). */
    private boolean await(Step s) {
        int i = s.ordinal();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (started.get(i) != completed.get(i)) {
            if (stop.stopped() || System.nanoTime() > deadline) {
                err.printf("cmtime: %s: %d of %d completed%s\n", s.label, completed.get(i), started.get(i),
                        stop.stopped() ? " (stopped)" : " after 120 s");
                return false;
            }
            Thread.yield();
        }
        return true;
    }

    // ------------------------------------------------------------------ server and client

    private int runServer() {
        Thread reqs = Thread.ofPlatform().daemon().name("cmtime-req").start(() -> work(reqWork, id -> {
            try {
                id.createQp(pdOf(id), new QpInitAttributes().type(QpType.RC).cap(CAP));
                id.accept(null);
            } catch (VerbsException e) {
                CmExamples.perror(err, "failure accepting", e);
                out.println("failing connection request");
                if (id.qp() != null) {
                    id.destroyQp();
                }
                id.reject(null);
                rejectedLater(id);
            }
        }));
        Thread discs = Thread.ofPlatform().daemon().name("cmtime-disc").start(() -> work(discWork, id -> {
            try {
                id.disconnect();
            } catch (VerbsException e) {
                // cmtime ignores rdma_disconnect's result
            }
            if (id.qp() != null) {
                id.destroyQp();
            }
            closeLater(id);
        }));
        CmId listen;
        try {
            listen = channel.createId(PortSpace.TCP);
        } catch (VerbsException e) {
            CmExamples.perror(err, "listen request failed", e);
            return CmExamples.negErrno(e);
        }
        try {
            try {
                src = CmExamples.rdmaAddr(srcAddr, null, port, PortSpace.TCP, false)[0];
            } catch (CmExamples.GaiException e) {
                out.printf("getrdmaaddr error: %s\n", e.getMessage());
                return -2;
            }
            try {
                listen.bindAddr(src);
            } catch (VerbsException e) {
                CmExamples.perror(err, "bind address failed", e);
                return CmExamples.negErrno(e);
            }
            try {
                listen.listen(0);
            } catch (VerbsException e) {
                CmExamples.perror(err, "failure trying to listen", e);
                return CmExamples.negErrno(e);
            }
            Thread events = startEvents();
            try {
                events.join(); // until Ctrl-C, as cmtime's server runs until it is killed
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return 0;
        } finally {
            reqs.interrupt();
            discs.interrupt();
            quiet(listen);
        }
    }

    /** IDs the event thread's handlers are done with: closed once their events are acknowledged. */
    private final LinkedBlockingQueue<CmId> toClose = new LinkedBlockingQueue<>();

    private void rejectedLater(CmId id) {
        toClose.add(id);
    }

    private void closeLater(CmId id) {
        toClose.add(id);
    }

    private interface Work {
        void run(CmId id);
    }

    private void work(LinkedBlockingQueue<CmId> q, Work w) {
        while (!stop.stopped() && !Thread.currentThread().isInterrupted()) {
            CmId id;
            try {
                id = q.poll(100, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                return;
            }
            if (id != null) {
                try {
                    w.run(id);
                } catch (RuntimeException e) {
                    err.println("cmtime: " + e.getMessage());
                }
            }
            for (CmId c; (c = toClose.peek()) != null && c.unackedEvents() == 0; ) {
                toClose.remove(c);
                try {
                    c.close();
                } catch (VerbsException e) {
                    toClose.add(c); // an event still queued for it: later
                    break;
                }
            }
        }
    }

    private int runClient() {
        SocketAddress[] a;
        try {
            a = CmExamples.rdmaAddr(srcAddr, dstAddr, port, PortSpace.TCP, false);
        } catch (CmExamples.GaiException e) {
            out.printf("getaddrinfo error: %s\n", e.getMessage());
            return -2;
        }
        src = a[0];
        dst = a[1];
        ConnParam param = new ConnParam().responderResources(1).initiatorDepth(1).retryCount(retries);
        Thread events = startEvents();
        int ret = 0;
        try {
            if (srcAddr != null) {
                out.println("binding source address");
                startTime(Step.BIND);
                for (Node n : nodes) {
                    startPerf(n, Step.BIND);
                    try {
                        n.id.bindAddr(src);
                    } catch (VerbsException e) {
                        CmExamples.perror(err, "failure bind addr", e);
                        n.error = true;
                        continue;
                    }
                    endPerf(n, Step.BIND);
                }
                endTime(Step.BIND);
            }
            out.println("resolving address");
            startTime(Step.RESOLVE_ADDR);
            for (Node n : nodes) {
                if (n.error) {
                    continue;
                }
                n.retries = retries;
                startPerf(n, Step.RESOLVE_ADDR);
                try {
                    n.id.resolveAddr(src, dst, Duration.ofMillis(timeoutMs));
                } catch (VerbsException e) {
                    CmExamples.perror(err, "failure getting addr", e);
                    n.error = true;
                    continue;
                }
                started.incrementAndGet(Step.RESOLVE_ADDR.ordinal());
            }
            if (!await(Step.RESOLVE_ADDR)) {
                return -1;
            }
            endTime(Step.RESOLVE_ADDR);

            out.println("resolving route");
            startTime(Step.RESOLVE_ROUTE);
            for (Node n : nodes) {
                if (n.error) {
                    continue;
                }
                n.retries = retries;
                startPerf(n, Step.RESOLVE_ROUTE);
                try {
                    n.id.resolveRoute(Duration.ofMillis(timeoutMs));
                } catch (VerbsException e) {
                    CmExamples.perror(err, "failure resolving route", e);
                    n.error = true;
                    continue;
                }
                started.incrementAndGet(Step.RESOLVE_ROUTE.ordinal());
            }
            if (!await(Step.RESOLVE_ROUTE)) {
                return -1;
            }
            endTime(Step.RESOLVE_ROUTE);

            out.println("creating qp");
            startTime(Step.CREATE_QP);
            for (Node n : nodes) {
                if (n.error) {
                    continue;
                }
                startPerf(n, Step.CREATE_QP);
                try {
                    n.id.createQp(pdOf(n.id), new QpInitAttributes().type(QpType.RC).cap(CAP));
                } catch (VerbsException e) {
                    CmExamples.perror(err, "failure creating qp", e);
                    n.error = true;
                    continue;
                }
                endPerf(n, Step.CREATE_QP);
            }
            endTime(Step.CREATE_QP);

            out.println("connecting");
            startTime(Step.CONNECT);
            for (Node n : nodes) {
                if (n.error) {
                    continue;
                }
                startPerf(n, Step.CONNECT);
                try {
                    n.id.connect(param);
                } catch (VerbsException e) {
                    CmExamples.perror(err, "failure rconnecting", e);
                    n.error = true;
                    continue;
                }
                started.incrementAndGet(Step.CONNECT.ordinal());
            }
            if (!await(Step.CONNECT)) {
                return -1;
            }
            endTime(Step.CONNECT);

            out.println("disconnecting");
            startTime(Step.DISCONNECT);
            for (Node n : nodes) {
                if (n.error) {
                    continue;
                }
                startPerf(n, Step.DISCONNECT);
                try {
                    n.id.disconnect();
                } catch (VerbsException e) {
                    // cmtime ignores rdma_disconnect's result
                }
                n.id.destroyQp();
                started.incrementAndGet(Step.DISCONNECT.ordinal());
            }
            if (!await(Step.DISCONNECT)) {
                return -1;
            }
            endTime(Step.DISCONNECT);
            return ret;
        } finally {
            events.interrupt();
            try {
                events.join(1000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            for (Node n : nodes) {
                if (n.id != null && n.id.qp() != null) {
                    n.id.destroyQp();
                }
            }
        }
    }
}
