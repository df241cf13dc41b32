// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

import org.rdma4j.tools.PerftestOptions.Verb;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.DeviceAttributes;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.Linger;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.PortAttributes;
import org.rdma4j.verbs.PortState;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.Verbs;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * The engine of the eight perftest tools: one program for the bandwidth ({@code run_iter_bw},
 * {@code run_iter_bw_server}) and latency ({@code run_iter_lat}, {@code run_iter_lat_write},
 * {@code run_iter_lat_send}) tests of SEND, RDMA WRITE, RDMA READ and atomics, with perftest's TCP
 * exchange between a server (no host argument) and a client (the server's host name), or both in this
 * process with {@code --loopback}. The order of the exchanges and of the printed lines follows each
 * perftest tool's {@code main} (write_bw.c, send_bw.c, read_lat.c, ...); shared/reference/roce-wire.md
 * §5.2 and §5.3 describe the bytes and the output.
 */
public final class Perftest {
    /** Give up when nothing completes for this long (the device stopped, or the peer died). */
    static final long STALL_NS = 20_000_000_000L;
    /** While a side waits for the peer, it looks this often whether the peer closed the TCP exchange. */
    static final long PEER_CHECK_NS = TimeUnit.MILLISECONDS.toNanos(100);
    /**
     * A wait fails this long after the peer closed the exchange. A peer closes it only after its last
     * completion (and write_lat's linger), so what it sent before has arrived by then; the margin covers
     * packets still on the wire.
     */
    static final long PEER_GRACE_NS = TimeUnit.SECONDS.toNanos(1);
    /** perftest's DEF_INLINE_WRITE: the default inline size of ib_write_lat. */
    static final int DEF_INLINE_WRITE = 220;
    /** perftest's DEF_INLINE_SEND_RC_UC: the default inline size of ib_send_lat. */
    static final int DEF_INLINE_SEND = 236;
    private static final VarHandle BYTE = ValueLayout.JAVA_BYTE.varHandle();

    /**
     * QPs of in-process devices that this JVM's tools have open ("GID/QPN"): an in-process device reaches
     * only these, so a peer QP outside the set means the peer runs in another process.
     */
    private static final java.util.Set<String> IN_PROCESS_QPS = java.util.concurrent.ConcurrentHashMap.newKeySet();

    private final PerftestOptions o;
    private final PrintStream out;
    private final PrintStream err;
    /** Ctrl-C: a stopped run reports what it measured and returns 130. */
    private final StopSignal stop;
    private int timeoutMs;

    /**
     * A test that only its own {@link StopSignal} stops (none the caller can reach: it runs to its end).
     *
     * @param options the parsed command line
     * @param out     where the report goes
     * @param err     where errors go
     */
    public Perftest(PerftestOptions options, PrintStream out, PrintStream err) {
        this(options, out, err, new StopSignal());
    }

    /**
     * Creates a {@code Perftest}.
     *
     * @param options the parsed command line
     * @param out     where the report goes
     * @param err     where errors go
     * @param stop    stops the run (the launcher passes {@link StopSignal#PROCESS}, which SIGINT raises)
     */
    public Perftest(PerftestOptions options, PrintStream out, PrintStream err, StopSignal stop) {
        this.o = options;
        this.out = out;
        this.err = err;
        this.stop = stop;
    }

    /**
     * Sets how long to wait for the peer (accept, and every message), for tests; 0 waits forever, as
     * perftest does.
     *
     * @param ms milliseconds
     * @return this
     */
    public Perftest timeoutMs(int ms) {
        this.timeoutMs = ms;
        return this;
    }

    /** A failure that ends the run with a message for the user. */
    static final class RunException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        RunException(String message) {
            super(message);
        }
    }

    /** The run was stopped by Ctrl-C after printing what it measured. */
    private static final class Stopped extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Stopped() {
            super("stopped", null, false, false);
        }
    }

    /**
     * Runs the test.
     *
     * @return the process exit status (0 on success, 130 when stopped by Ctrl-C)
     */
    public int run() {
        stop.enter();
        try {
            if (o.help) {
                out.print(o.usage());
                return 0;
            }
            if (o.version) {
                out.println("Version: " + PerftestFormat.PERFTEST_VERSION);
                return 0;
            }
            if (o.loopback) {
                return runLoopback();
            }
            Role r = new Role(o.serverName != null, o.ibDev, out, true);
            return r.runGuarded(null);
        } finally {
            stop.exit();
        }
    }

    /**
     * Server and client in this process: the server side in a thread (its output discarded), the client
     * side here, connected by perftest's exchange over a loopback TCP socket, so the bytes and the order
     * are the same as between two machines.
     */
    private int runLoopback() {
        List<Device> devices = Verbs.devices();
        if (devices.isEmpty()) {
            err.println(" No IB devices found (no org.rdma4j.verbs.spi.VerbsProvider on the class path offers a device)");
            return 1;
        }
        String clientDev = o.ibDev != null ? o.ibDev : devices.get(0).name();
        String serverDev = o.serverIbDev != null ? o.serverIbDev
                : devices.stream().map(Device::name).filter(n -> !n.equals(clientDev)).findFirst().orElse(clientDev);
        CompletableFuture<Integer> port = new CompletableFuture<>();
        PrintStream sink = new PrintStream(OutputStream.nullOutputStream());
        Role server = new Role(false, serverDev, sink, false);
        server.boundPort = port;
        server.port = 0; // any free port: two loopback runs at once must not collide on 18515
        server.acceptTimeoutMs = 60_000;
        String[] serverError = new String[1];
        Thread t = Thread.ofPlatform().name("perftest-server").daemon().start(() -> {
            int rc = server.runGuarded(port);
            if (rc != 0) {
                serverError[0] = server.failure;
            }
            port.complete(-1);
        });
        int p;
        try {
            p = port.get(60, TimeUnit.SECONDS);
        } catch (Exception e) {
            err.println(" server side did not start: " + e);
            return 1;
        }
        if (p < 0) {
            err.println(" server side (" + serverDev + "): " + serverError[0]);
            return 1;
        }
        Role client = new Role(true, clientDev, out, true);
        client.peer = server;
        server.peer = client;
        // -R: the client connects rdma_cm to the address the server's device listens on
        client.host = o.rdmaCm ? server.cmBind.getAddress().getHostAddress() : "127.0.0.1";
        client.port = p;
        int rc = client.runGuarded(null);
        if (rc != 0 && !client.connected) {
            // The client failed before it connected (e.g. a bad option for its device): release the server.
            try (var s = new java.net.Socket("127.0.0.1", p)) {
                s.getOutputStream().flush();
            } catch (IOException e) {
                // the server is gone already
            }
        }
        try {
            if (rc != 130) {
                t.join(rc == 0 ? 30_000 : 2_000);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (rc == 0 && serverError[0] != null) {
            err.println(" server side (" + serverDev + "): " + serverError[0]);
            return 1;
        }
        return rc;
    }

    /** One side of a test: its device, resources and the exchange with the peer. */
    private final class Role {
        final boolean client;
        final String devName;
        final PrintStream text;
        final boolean reportErrors;
        final boolean json = o.json;
        String host = o.serverName;
        int port = o.port;
        CompletableFuture<Integer> boundPort;
        int acceptTimeoutMs = timeoutMs;
        boolean connected;
        String failure;
        Context ctx;
        ProtectionDomain pd;
        CompletionQueue sendCq;
        CompletionQueue recvCq;
        QueuePair[] qps;
        MemoryRegion[] mrs;
        Arena arena;
        PerftestFormat.Dest[] my;
        PerftestFormat.Dest[] rem;
        int gidIndex;
        boolean withGid;
        int inline;
        int outReads;
        int txDepth;
        int rxDepth;
        int cqMod;
        long bufSize;
        PerftestWire.Channel ch;
        /** -R: the exchange's rdma_cm connection, the test QPs' connections, and their device's context. */
        PerftestCm.Control control;
        PerftestCm.TestQps cmQps;
        Context rctx;
        /** -R, server side: the address the control and the test QPs listen on (the port once bound). */
        java.net.InetSocketAddress cmBind;
        PerftestFormat.TestInfo info;
        final List<PerftestFormat.Report> reports = new ArrayList<>();
        final List<LatStats> lats = new ArrayList<>();
        /** The other role when both run in this process (loopback): its end ends our linger. */
        volatile Role peer;
        /** Set when this role is done with its QPs (its test is over, or it failed). */
        volatile boolean done;
        /** How the last linger ended (tests read it), or null if the run did not linger. */
        volatile Linger lastLinger;
        /** write_lat over RC: the linger, started at the last completion of the last size, and when. */
        Linger lingerStart;
        long lingerFrom;

        Role(boolean client, String devName, PrintStream text, boolean reportErrors) {
            this.client = client;
            this.devName = devName;
            this.text = text;
            this.reportErrors = reportErrors;
        }

        boolean printing() {
            return !json;
        }

        int runGuarded(CompletableFuture<Integer> bound) {
            try {
                return runRole();
            } catch (Stopped s) {
                return 130;
            } catch (RunException | VerbsException | PerftestWire.WireException e) {
                return stoppedOr(e);
            } catch (IOException e) {
                return stoppedOr(e);
            } finally {
                done = true;
                close();
            }
        }

        /** A failure after Ctrl-C is the stop closing what the role waited on (the listener, the connection). */
        private int stoppedOr(Exception e) {
            if (stop.stopped()) {
                text.flush();
                if (reportErrors) {
                    err.println(" Stopped (Ctrl-C) while waiting for the peer");
                }
                return 130;
            }
            fail(e.getMessage());
            return 1;
        }

        private void fail(String msg) {
            failure = msg;
            if (reportErrors) {
                text.flush();
                err.println(" " + msg);
            }
        }

        private void close() {
            if (my != null) {
                for (PerftestFormat.Dest d : my) {
                    if (d != null) {
                        IN_PROCESS_QPS.remove(qpKey(d));
                    }
                }
            }
            if (cmQps != null) {
                cmQps.close(); // the client disconnects and waits for DISCONNECTED; the IDs destroy their QPs
            } else {
                for (AutoCloseable c : qps == null ? new AutoCloseable[0] : qps) {
                    quiet(c);
                }
            }
            if (ch != null) {
                try {
                    ch.close();
                } catch (IOException e) {
                    // the connection is going away either way
                }
            }
            for (AutoCloseable c : mrs == null ? new AutoCloseable[0] : mrs) {
                quiet(c);
            }
            quiet(sendCq);
            quiet(recvCq);
            quiet(pd);
            quiet(ctx);
            if (arena != null) {
                arena.close();
            }
        }

        private void quiet(AutoCloseable c) {
            if (c == null) {
                return;
            }
            try {
                c.close();
            } catch (Exception e) {
                if (reportErrors) {
                    err.println(" warning: cleanup failed: " + e.getMessage());
                }
            }
        }

        /** Whether the peak is skipped; decided (and warned about) first, as perftest's parser does. */
        boolean noPeak;

        private int runRole() throws IOException {
            noPeak = o.noPeak;
            boolean sendServer = o.verb == Verb.SEND && !client;
            if (!o.lat && (o.duration > 0 || o.iters > 20000 || sendServer)) {
                if (!noPeak && printing()) {
                    text.print(PerftestFormat.NO_PEAK_WARNING);
                }
                noPeak = true;
            }
            if (Verbs.devices().isEmpty()) {
                throw new RunException("No IB devices found (no org.rdma4j.verbs.spi.VerbsProvider on the class path"
                        + " offers a device)");
            }
            Device dev = devName != null ? Verbs.device(devName) : Verbs.devices().get(0);
            ctx = dev.open();
            DeviceAttributes da = ctx.queryDevice();
            if (o.ibPort > da.physPortCnt()) {
                throw new RunException("Invalid port " + o.ibPort + ": " + dev.name() + " has " + da.physPortCnt()
                        + " port(s)");
            }
            PortAttributes pa = ctx.queryPort(o.ibPort);
            if (pa.state() != PortState.ACTIVE) {
                throw new RunException("Port " + o.ibPort + " of " + dev.name() + " is not active ("
                        + pa.state().portStateString() + ")");
            }
            boolean ethernet = "Ethernet".equalsIgnoreCase(pa.linkLayer());
            gidIndex = o.gidIndex;
            if (gidIndex >= 0) {
                checkGidIndex(dev, pa);
            } else if (ethernet) {
                gidIndex = bestGidIndex(ctx, o.ibPort, pa);
            }
            withGid = gidIndex >= 0;
            Mtu mtu = pa.activeMtu();
            if (o.mtu != 0) {
                Mtu want = Mtu.ofBytes(o.mtu);
                if (want.value() > pa.maxMtu().value()) {
                    throw new RunException("The port's max MTU is " + pa.maxMtu().bytes() + "; -m " + o.mtu
                            + " is too large");
                }
                mtu = want;
            }
            settle(da);

            if (!client && printing()) {
                text.print(PerftestFormat.waitingBanner());
                text.flush();
            }
            if (o.rdmaCm) {
                connectControl(dev);
                if (control.context().device() != ctx.device()) {
                    // the CM's route picked another device than -d (or the first): query the one that runs the test
                    quiet(ctx);
                    ctx = control.context().device().open();
                    pa = ctx.queryPort(o.ibPort);
                    mtu = pa.activeMtu();
                }
            } else if (client) {
                ch = PerftestWire.Channel.connect(host, port, timeoutMs);
            } else {
                ch = PerftestWire.Channel.accept(port, acceptTimeoutMs, p -> {
                    if (boundPort != null) {
                        boundPort.complete(p);
                    }
                }, stop);
                ch.timeoutMs(timeoutMs);
            }
            ch.stopOn(stop); // Ctrl-C ends a wait for a silent peer in a hand-shake
            connected = true;
            ch.exchangeVersions();
            ch.exchangeSysData();
            mtu = Mtu.ofValue(ch.exchangeMtu(mtu.value()));

            try {
                if (o.rdmaCm) {
                    connectTestQps(pa);
                } else {
                    createResources(pa);
                }
            } catch (OutOfMemoryError e) {
                throw new RunException("Couldn't allocate " + o.numQps + " x " + 2 * bufSize / 1024
                        + " KiB of buffers (" + e.getMessage() + "); use fewer QPs (-q) or smaller sizes");
            }
            info = new PerftestFormat.TestInfo(o.verb.title(),
                    o.verb == Verb.ATOMIC ? (o.cmpAndSwap ? "CMP_AND_SWAP" : "FETCH_AND_ADD") : null, o.lat,
                    o.postList, dev.name(), o.numQps, "IB", o.connection, client, txDepth,
                    o.verb == Verb.SEND && !client && !o.lat ? rxDepth : -1, cqMod, mtu.bytes(),
                    ethernet ? "Ethernet" : "IB", gidIndex, inline,
                    o.verb == Verb.READ || o.verb == Verb.ATOMIC ? outReads : -1, o.rdmaCm);
            if (printing()) {
                text.print(PerftestFormat.testInfo(info));
            }
            exchangeKeysAndConnect(mtu);
            return o.lat ? runLat() : runBw();
        }

        /** Depths, inline size and outstanding reads, as perftest's parser and ctx_set_* settle them. */
        private void settle(DeviceAttributes da) {
            long samples = o.lat ? o.iters : o.noPeak || o.iters > 20000 ? 0 : o.iters * o.numQps;
            if (o.duration == 0 && samples * 8 > Runtime.getRuntime().maxMemory() / 2) {
                throw new RunException("-n " + o.iters + " keeps " + samples * 8 / (1 << 20) + " MiB of samples, more"
                        + " than half of this JVM's heap (" + Runtime.getRuntime().maxMemory() / (1 << 20) + " MiB):"
                        + " use fewer iterations, -D, or a larger heap (RDMA4J_JAVA_OPTS=-Xmx...)");
            }
            txDepth = o.txDepth;
            if (!o.lat && o.duration == 0 && txDepth > o.iters) {
                txDepth = (int) o.iters;
            }
            cqMod = Math.min(o.postList > 1 && !o.cqModGiven ? o.postList : o.cqMod, txDepth);
            rxDepth = (int) Math.min(o.rxDepth, o.duration > 0 ? o.rxDepth : o.iters);
            if (o.verb == Verb.READ || o.verb == Verb.ATOMIC) {
                inline = 0;
                int max = Math.max(da.maxQpRdAtom(), 1);
                outReads = o.outReads > 0 ? o.outReads : max;
                if (outReads > max) {
                    if (printing()) {
                        text.print(PerftestFormat.RESULT_LINE);
                    }
                    err.println(" Number of outstanding reads is above max = " + max + "\n Changing to that max value");
                    outReads = max;
                }
            } else {
                int def = o.lat ? (o.verb == Verb.WRITE ? DEF_INLINE_WRITE : DEF_INLINE_SEND) : 0;
                inline = o.inlineSize >= 0 ? o.inlineSize : Math.min(def, da.maxInlineData());
                if (inline > da.maxInlineData()) {
                    throw new RunException("Inline size " + inline + " exceeds the device's max_inline_data "
                            + da.maxInlineData() + " (" + ctx.device().name() + ")");
                }
            }
            long maxSize = o.all ? PerftestOptions.MAX_SIZE : o.size;
            bufSize = alignUp(Math.max(maxSize, PerftestWire.CYCLE_BUFFER), PerftestWire.CYCLE_BUFFER);
        }

        private void checkGidIndex(Device dev, PortAttributes pa) {
            int n = pa.gidTblLen();
            boolean ok = gidIndex < n;
            Gid g = null;
            if (ok) {
                try {
                    g = ctx.queryGid(o.ibPort, gidIndex);
                } catch (VerbsException e) {
                    ok = false;
                }
            }
            if (ok && !g.equals(Gid.ZERO)) {
                return;
            }
            StringBuilder sb = new StringBuilder();
            sb.append("GID index ").append(gidIndex).append(ok ? " is empty" : " is out of range").append(" on port ")
                    .append(o.ibPort).append(" of ").append(dev.name()).append(". Its GID table:");
            int shown = 0;
            for (int i = 0; i < n; i++) {
                Gid e;
                try {
                    e = ctx.queryGid(o.ibPort, i);
                } catch (VerbsException ex) {
                    break;
                }
                if (!e.equals(Gid.ZERO)) {
                    sb.append("\n   ").append(i).append(": ").append(e.toInetAddress().getHostAddress())
                            .append(e.isIpv4Mapped() ? " (IPv4-mapped)" : "");
                    shown++;
                }
            }
            if (shown == 0) {
                sb.append(" (no valid GID)");
            }
            throw new RunException(sb.toString());
        }

        /**
         * -R: the exchange's rdma_cm connection (rdma_client_connect / rdma_server_connect) on the test's port.
         * The client connects from {@code --source_ip}, else from the address of {@code -d}'s device when one
         * was named (under --loopback: always), else from where the host's routing points; the server listens on
         * {@code --source_ip}, on its device's address under --loopback, else on 0.0.0.0 (as perftest).
         */
        private void connectControl(Device dev) throws IOException {
            org.rdma4j.verbs.cm.RdmaCm cm = org.rdma4j.verbs.cm.RdmaCm.system();
            if (client) {
                java.net.InetAddress dst;
                try {
                    dst = java.net.InetAddress.getByName(host);
                } catch (java.net.UnknownHostException e) {
                    throw new RunException("Problem in resolving basic address and port: " + host + " (" + e.getMessage()
                            + ")");
                }
                java.net.InetAddress src = sourceAddress(cm, dev, dst);
                control = PerftestCm.Control.connect(cm, src, new java.net.InetSocketAddress(dst, port), o.retryCount,
                        stop);
                cmBind = new java.net.InetSocketAddress(dst, port);
                cmSource = src;
            } else {
                // perftest binds 0.0.0.0 (AF_INET only: rdma_cm makes an IPv4 wildcard afonly); "::" takes IPv4
                // and IPv6 clients alike (afonly 0, as net.ipv6.bindv6only's default), so IPv6 GIDs work too
                java.net.InetAddress bind = o.sourceIp != null ? resolve(o.sourceIp)
                        : o.loopback ? PerftestCm.addressOf(cm, dev.name(), null)
                        : java.net.InetAddress.ofLiteral("::");
                if (bind == null) {
                    throw new RunException(dev.name() + " has no address for rdma_cm (" + cm.addresses() + ")");
                }
                control = PerftestCm.Control.accept(cm, new java.net.InetSocketAddress(bind, port), p -> {
                    cmBind = new java.net.InetSocketAddress(bind, p);
                    if (boundPort != null) {
                        boundPort.complete(p);
                    }
                }, acceptTimeoutMs, o.retryCount, stop);
            }
            control.timeoutMs(timeoutMs);
            ch = new PerftestWire.Channel(control, client);
        }

        /** -R, client: the source of the connections. */
        java.net.InetAddress cmSource;

        private java.net.InetAddress sourceAddress(org.rdma4j.verbs.cm.RdmaCm cm, Device dev, java.net.InetAddress dst) {
            if (o.sourceIp != null) {
                return resolve(o.sourceIp);
            }
            if (devName != null || o.loopback) {
                java.net.InetAddress a = PerftestCm.addressOf(cm, dev.name(), dst);
                if (a == null) {
                    throw new RunException(dev.name() + " has no address for rdma_cm; local RDMA addresses: "
                            + cm.addresses());
                }
                return a;
            }
            return null;
        }

        private java.net.InetAddress resolve(String h) {
            try {
                return java.net.InetAddress.getByName(h);
            } catch (java.net.UnknownHostException e) {
                throw new RunException("Problem in resolving basic address and port: " + h + " (" + e.getMessage() + ")");
            }
        }

        /**
         * -R: create_rdma_cm_connection. A hand-shake, the test QPs connected by rdma_cm on the same port (the
         * server listens again; the client retries while it does not yet), a hand-shake; the PD, CQs and buffers
         * are made on the device of the first connection, and each QP by its CM ID.
         */
        private void connectTestQps(PortAttributes pa) throws IOException {
            PerftestFormat.Dest zero = new PerftestFormat.Dest(0, 0, 0, 0, 0, new byte[16], 0);
            ch.handShake(zero, withGid);
            int n = o.numQps;
            int depth = o.verb == Verb.READ || o.verb == Verb.ATOMIC ? outReads : 0;
            QpType type = QpType.valueOf(o.connection);
            PerftestCm.QpFactory f = new PerftestCm.QpFactory() {
                @Override
                public void resources(Context c) {
                    rctx = c;
                    allocate(n);
                }

                @Override
                public QpInitAttributes qpAttributes(int i) {
                    return new QpInitAttributes().type(type).sendCq(sendCq).recvCq(recvCq)
                            .cap(new QpCapabilities(Math.max(txDepth, 1), o.verb == Verb.SEND ? rxDepth : 1, 1, 1, inline));
                }

                @Override
                public ProtectionDomain pd() {
                    return pd;
                }
            };
            org.rdma4j.verbs.cm.RdmaCm cm = org.rdma4j.verbs.cm.RdmaCm.system();
            if (client) {
                cmQps = PerftestCm.TestQps.connect(cm, cmSource, cmBind, n, depth, o.retryCount, f, stop);
            } else {
                cmQps = PerftestCm.TestQps.accept(cm, cmBind, n, depth, o.retryCount, f, stop, control);
            }
            qps = cmQps.qps();
            if (!client && o.connection.equals("RC")) {
                for (QueuePair q : qps) {
                    try {
                        q.modify(new QpAttributes().minRnrTimer(12)); // perftest: MIN_RNR_TIMER after rdma_accept
                    } catch (VerbsException e) {
                        // perftest ignores ibv_modify_qp's result here
                    }
                }
            }
            org.rdma4j.verbs.cm.CmRoute route = cmQps.first().route();
            gidIndex = route != null ? route.sgidIndex() : Math.max(gidIndex, 0);
            withGid = true;
            byte[] gid = rctx.queryGid(cmQps.first().portNum(), gidIndex).toBytes();
            for (int i = 0; i < n; i++) {
                int psn = ThreadLocalRandom.current().nextInt() & 0xFFFFFF; // printed, as perftest: the CM chose the QP's
                my[i] = new PerftestFormat.Dest(pa.lid(), qps[i].qpNum(), psn, mrs[i].rkey(), mrs[i].address() + bufSize, gid,
                        outReads);
            }
            ch.handShake(zero, withGid);
        }

        /** The PD, CQs and the buffers of {@code n} QPs on {@link #rctx}. */
        private void allocate(int n) {
            arena = Arena.ofShared();
            pd = rctx.allocPd();
            sendCq = rctx.createCq(Math.max(txDepth * n, 1), null, 0);
            recvCq = rctx.createCq(Math.max((o.verb == Verb.SEND ? rxDepth : 1) * n, 1), null, 0);
            qps = new QueuePair[n];
            mrs = new MemoryRegion[n];
            my = new PerftestFormat.Dest[n];
            rem = new PerftestFormat.Dest[n];
            for (int i = 0; i < n; i++) {
                // [send area | receive area]: the peer writes into, reads from and does atomics on the second.
                MemorySegment buf = arena.allocate(2 * bufSize, PerftestWire.CYCLE_BUFFER);
                for (long b = 0; b < bufSize; b += 8) {
                    buf.set(ValueLayout.JAVA_LONG_UNALIGNED, b, 0x7b7b7b7b7b7b7b7bL ^ b);
                }
                mrs[i] = pd.regMr(buf, AccessFlag.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE,
                        AccessFlag.REMOTE_READ, AccessFlag.REMOTE_ATOMIC));
            }
        }

        private void createResources(PortAttributes pa) {
            int n = o.numQps;
            rctx = ctx;
            allocate(n);
            byte[] gid = withGid ? ctx.queryGid(o.ibPort, gidIndex).toBytes() : new byte[16];
            QpType type = QpType.valueOf(o.connection);
            for (int i = 0; i < n; i++) {
                qps[i] = pd.createQp(new QpInitAttributes().type(type).sendCq(sendCq).recvCq(recvCq)
                        .cap(new QpCapabilities(Math.max(txDepth, 1), o.verb == Verb.SEND ? rxDepth : 1, 1, 1,
                                inline)));
                int psn = ThreadLocalRandom.current().nextInt() & 0xFFFFFF;
                my[i] = new PerftestFormat.Dest(pa.lid(), qps[i].qpNum(), psn, mrs[i].rkey(),
                        mrs[i].address() + bufSize, gid, outReads);
                if (inProcess()) {
                    IN_PROCESS_QPS.add(qpKey(my[i]));
                }
            }
        }

        private boolean inProcess() {
            return "soft".equals(ctx.device().providerName());
        }

        private static String qpKey(PerftestFormat.Dest d) {
            return java.util.HexFormat.of().formatHex(d.gid()) + "/" + d.qpn();
        }

        /**
         * An in-process device cannot reach a QP of another process: say so now rather than after the
         * first WRs time out.
         */
        private void checkReachable(PerftestFormat.Dest peer) {
            if (inProcess() && !IN_PROCESS_QPS.contains(qpKey(peer))) {
                throw new RunException("The peer's QP 0x" + Integer.toHexString(peer.qpn()) + " (GID "
                        + Gid.of(peer.gid()).toInetAddress().getHostAddress() + ") is not in this process, and "
                        + ctx.device().name() + " is an in-process device: it reaches only devices of this JVM. A server"
                        + " and a client in two processes need a network device (RoCE); or use --loopback.");
            }
        }

        /** The hand-shakes around ctx_connect, in each tool's order, and the address lines. */
        private void exchangeKeysAndConnect(Mtu mtu) throws IOException {
            int n = o.numQps;
            if (o.lat && o.verb != Verb.SEND) {
                // write_lat.c, read_lat.c, atomic_lat.c hand-shake once on QP 0 before the per-QP round.
                rem[0] = ch.handShake(my[0], withGid);
            }
            for (int i = 0; i < n; i++) {
                rem[i] = ch.handShake(my[i], withGid);
            }
            if (!o.rdmaCm) { // rdma_cm moved the QPs to RTS already
                for (int i = 0; i < n; i++) {
                    checkReachable(rem[i]);
                    connect(qps[i], my[i], rem[i], mtu);
                }
            }
            if (o.verb == Verb.SEND) {
                // send_bw.c / send_lat.c: one hand-shake after ctx_connect, before the address lines.
                ch.handShake(my[0], withGid);
            }
            if (printing()) {
                for (int i = 0; i < n; i++) {
                    text.print(PerftestFormat.address("local", my[i], withGid, o.verb));
                }
            }
            for (int i = 0; i < n; i++) {
                rem[i] = ch.handShake(my[i], withGid);
                if (printing()) {
                    text.print(PerftestFormat.address("remote", rem[i], withGid, o.verb));
                }
            }
            if (o.verb != Verb.SEND) {
                // "An additional handshake is required after moving qp to RTR."
                ch.handShake(my[0], withGid);
            }
            text.flush();
        }

        /** perftest ctx_modify_qp_to_init / _rtr / _rts for RC and UC. */
        private void connect(QueuePair qp, PerftestFormat.Dest me, PerftestFormat.Dest peer, Mtu mtu) {
            boolean rdAtomic = o.verb == Verb.READ || o.verb == Verb.ATOMIC;
            qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(o.ibPort)
                    .accessFlags(AccessFlag.of(AccessFlag.REMOTE_WRITE, AccessFlag.LOCAL_WRITE,
                            AccessFlag.REMOTE_READ, AccessFlag.REMOTE_ATOMIC)));
            AhAttributes av = new AhAttributes().dlid(peer.lid()).sl(0).srcPathBits(0).portNum(o.ibPort);
            if (withGid) {
                av.global(true).dgid(Gid.of(peer.gid())).sgidIndex(gidIndex).hopLimit(0xFF).trafficClass(0);
            } else {
                av.global(false);
            }
            QpAttributes rtr = new QpAttributes().state(QpState.RTR).pathMtu(mtu).destQpNum(peer.qpn())
                    .rqPsn(peer.psn()).av(av);
            if (o.connection.equals("RC")) {
                rtr.maxDestRdAtomic(rdAtomic ? Math.max(me.outReads(), 1) : 1).minRnrTimer(12);
            }
            qp.modify(rtr);
            QpAttributes rts = new QpAttributes().state(QpState.RTS).sqPsn(me.psn());
            if (o.connection.equals("RC")) {
                // retry_cnt 6, not perftest's 7: rxe (and the soft device) retry forever on 7, so a dead peer
                // would hang the run instead of failing with RETRY_EXC_ERR (docs/perftest.md)
                rts.timeout(o.qpTimeout).retryCnt(6).rnrRetry(7)
                        .maxRdAtomic(rdAtomic ? Math.max(Math.min(me.outReads(), peer.outReads()), 1) : 1);
            }
            qp.modify(rts);
        }

        private long[] sizes() {
            if (!o.all) {
                return new long[] {o.size};
            }
            long[] s = new long[23];
            for (int e = 1; e < 24; e++) {
                s[e - 1] = 1L << e;
            }
            return s;
        }

        // ------------------------------------------------------------------ bandwidth

        private int runBw() throws IOException {
            boolean duration = o.duration > 0;
            int margin = o.margin >= 0 ? o.margin : o.duration / 4;
            if (duration && !(o.duration > 2 * margin)) {
                throw new RunException("please check that DURATION > 2*MARGIN");
            }
            boolean noPeak = this.noPeak;
            double unit = o.reportGbits ? PerftestFormat.GBS : PerftestFormat.MBS;
            if (printing()) {
                text.print(PerftestFormat.resultHeader(o.reportGbits));
                text.flush();
            }
            if (o.verb != Verb.SEND && !client) {
                // write_bw.c / read_bw.c / atomic_bw.c: the server waits for the client's end and prints its report.
                ch.handShake(my[0], withGid);
                PerftestFormat.Report remote = ch.exchangeReports(new PerftestFormat.Report(0, 0, 0, 0, 0));
                reports.add(remote);
                if (printing()) {
                    text.print(PerftestFormat.reportLine(remote, o.reportGbits));
                }
                ch.handShake(my[0], withGid);
                if (printing()) {
                    text.print(PerftestFormat.RESULT_LINE);
                }
                finish();
                return 0;
            }
            PerftestFormat.Report last = null;
            for (long size : sizes()) {
                if (o.verb == Verb.SEND) {
                    if (!client) {
                        postReceives(size);
                    }
                    ch.handShake(my[0], withGid);
                } else if (o.warmUp) {
                    runClientBw(size, true, false, 0, 0, unit);
                }
                PerftestFormat.Report r;
                try {
                    r = client ? runClientBw(size, noPeak, duration, o.duration, margin, unit)
                            : runServerBw(size, duration, o.duration, margin, unit);
                } catch (Interrupted i) {
                    r = i.report;
                }
                reports.add(r);
                last = r;
                if (printing()) {
                    text.print(PerftestFormat.reportLine(r, o.reportGbits));
                    text.flush();
                }
                if (stop.stopped()) {
                    stoppedAfterReport();
                }
                if (o.verb == Verb.SEND) {
                    ch.handShake(my[0], withGid);
                }
            }
            if (printing()) {
                text.print(PerftestFormat.RESULT_LINE);
            }
            if (o.verb != Verb.SEND) {
                ch.handShake(my[0], withGid);
                ch.exchangeReports(last);
            }
            ch.handShake(my[0], withGid);
            finish();
            return 0;
        }

        /** What a run interrupted by Ctrl-C measured. */
        private static final class Interrupted extends RuntimeException {
            private static final long serialVersionUID = 1L;
            final transient PerftestFormat.Report report;
            final transient LatStats lat;

            Interrupted(PerftestFormat.Report report, LatStats lat) {
                super("interrupted", null, false, false);
                this.report = report;
                this.lat = lat;
            }
        }

        private void stoppedAfterReport() {
            if (printing()) {
                text.print(PerftestFormat.RESULT_LINE);
            }
            text.flush();
            if (reportErrors) {
                err.println(" Stopped (Ctrl-C): the line above is what was measured until then.");
            }
            finish();
            throw new Stopped();
        }

        private void postReceives(long size) {
            for (int q = 0; q < o.numQps; q++) {
                RecvWorkRequest rwr = new RecvWorkRequest(1).wrId(q)
                        .singleSge(mrs[q].address() + bufSize, (int) size, mrs[q].lkey());
                for (int i = 0; i < rxDepth; i++) {
                    if (!qps[q].postRecv(rwr)) {
                        throw new RunException("Couldn't post recv: qp " + q + " counter=" + i + " err="
                                + rwr.postError());
                    }
                }
            }
        }

        private SendWorkRequest[] sendWrs(long size, int flagsBase) {
            SendWorkRequest[] wrs = new SendWorkRequest[o.numQps];
            for (int q = 0; q < o.numQps; q++) {
                SendWorkRequest wr = new SendWorkRequest(1);
                long local = mrs[q].address();
                int len = (int) size;
                switch (o.verb) {
                    case SEND -> wr.opcode(WrOpcode.SEND);
                    case WRITE -> wr.opcode(WrOpcode.RDMA_WRITE);
                    case READ -> wr.opcode(WrOpcode.RDMA_READ);
                    case ATOMIC -> {
                        wr.opcode(o.cmpAndSwap ? WrOpcode.ATOMIC_CMP_AND_SWP : WrOpcode.ATOMIC_FETCH_AND_ADD);
                        // perftest: compare 0 / swap 1 for CMP_AND_SWAP, add 1 for FETCH_AND_ADD.
                        wr.compareAdd(o.cmpAndSwap ? 0 : 1).swap(o.cmpAndSwap ? 1 : 0);
                        len = 8;
                    }
                    default -> throw new IllegalStateException();
                }
                wr.singleSge(local, len, mrs[q].lkey()).sendFlags(flagsBase);
                if (o.verb != Verb.SEND) {
                    wr.remoteAddr(rem[q].vaddr()).rkey(rem[q].rkey());
                }
                wrs[q] = wr;
            }
            return wrs;
        }

        /** run_iter_bw for one message size (the client, or the sender of SEND), then print_report_bw. */
        private PerftestFormat.Report runClientBw(long size, boolean noPeak, boolean duration, int durationS,
                                                  int marginS, double unit) {
            int numQps = o.numQps;
            long iters = o.iters;
            long totIters = duration ? 0 : iters * numQps;
            int post = o.postList;
            long[] scnt = new long[numQps];
            long[] ccnt = new long[numQps];
            boolean[] flushed = new boolean[numQps];
            int flagsBase = size <= inline && o.verb != Verb.READ && o.verb != Verb.ATOMIC ? SendFlags.INLINE : 0;
            SendWorkRequest[][] lists = new SendWorkRequest[post][];
            for (int l = 0; l < post; l++) {
                lists[l] = sendWrs(size, flagsBase);
            }
            SendWorkRequest[] batch = new SendWorkRequest[post];
            long[] locBase = new long[numQps];
            long[] remBase = new long[numQps];
            for (int q = 0; q < numQps; q++) {
                locBase[q] = mrs[q].address();
                remBase[q] = rem[q].vaddr();
            }
            boolean cycle = size <= PerftestWire.CYCLE_BUFFER / 2 && o.verb != Verb.ATOMIC;
            long inc = size > PerftestWire.CACHE_LINE_SIZE ? alignUp(size, PerftestWire.CACHE_LINE_SIZE)
                    : PerftestWire.CACHE_LINE_SIZE;
            long perCycle = PerftestWire.CYCLE_BUFFER / inc;

            long[] tposted = noPeak ? null : new long[(int) totIters];
            int maxCompletions = noPeak ? 0 : (int) (totIters / Math.max(cqMod, 1) + numQps + 1);
            int[] compIdx = noPeak ? null : new int[maxCompletions];
            long[] compTime = noPeak ? null : new long[maxCompletions];
            int completions = 0;

            WorkCompletion[] wcs = newWcs(16);
            long totscnt = 0;
            long totccnt = 0;
            long start = System.nanoTime();
            long t0 = start;
            long t1 = 0;
            // duration: 0 START (warm-up margin), 1 SAMPLE, 2 STOP_SAMPLE (cool-down margin), 3 END
            int state = duration && marginS == 0 ? 1 : 0;
            long sampleStart = start + marginS * 1_000_000_000L;
            long sampleEnd = start + (long) (durationS - marginS) * 1_000_000_000L;
            long end = start + durationS * 1_000_000_000L;
            long sampled = 0;
            long lastProgress = start;
            Progress progress = Progress.maybe(o, err, size, totIters, duration);
            boolean stopping = false;

            while (totscnt < totIters || totccnt < totIters
                    || (duration && (state != 3 || totccnt < totscnt || !allTrue(flushed)))) {
                if (!stopping && stop.stopped()) {
                    stopping = true;
                    if (!duration) {
                        totIters = totscnt; // stop posting; wait for what is in flight
                    } else {
                        state = 3;
                        t1 = t1 == 0 ? System.nanoTime() : t1;
                    }
                }
                if (duration && state != 3) {
                    long now = System.nanoTime();
                    if (state == 0 && now >= sampleStart) {
                        state = 1;
                        t0 = now;
                    }
                    if (state == 1 && now >= sampleEnd) {
                        state = 2;
                        t1 = now;
                    }
                    if (state == 2 && now >= end) {
                        state = 3;
                    }
                }
                for (int q = 0; q < numQps; q++) {
                    if (duration && state == 3 && !flushed[q]) {
                        flushed[q] = flushDuration(q, scnt, ccnt, lists[0][q], locBase[q], remBase[q], size);
                        if (flushed[q]) {
                            totscnt++;
                        }
                        continue;
                    }
                    while ((duration ? state != 3 : scnt[q] < iters && totscnt < totIters)
                            && scnt[q] + post <= txDepth + ccnt[q]) {
                        for (int l = 0; l < post; l++) {
                            long k = scnt[q] + l;
                            boolean signaled = (k % cqMod == cqMod - 1) || (!duration && k == iters - 1);
                            SendWorkRequest wr = lists[l][q];
                            wr.wrId(((long) q << 48) | k).sendFlags(flagsBase | (signaled ? SendFlags.SIGNALED : 0));
                            if (cycle) {
                                long off = (k % perCycle) * inc;
                                wr.sge(0).addr(locBase[q] + off);
                                if (o.verb != Verb.SEND) {
                                    wr.remoteAddr(remBase[q] + off);
                                }
                            }
                            if (tposted != null) {
                                tposted[(int) (totscnt + l)] = System.nanoTime();
                            }
                            batch[l] = wr;
                        }
                        boolean ok = post == 1 ? qps[q].postSend(batch[0]) : qps[q].postSend(batch, post) == post;
                        if (!ok) {
                            throw new RunException("Couldn't post send: qp " + q + " scnt=" + scnt[q] + " || err="
                                    + batch[0].postError() + " tx_depth=" + txDepth);
                        }
                        scnt[q] += post;
                        totscnt += post;
                    }
                }
                if (totccnt < totIters || (duration && totccnt < totscnt)) {
                    int ne = sendCq.poll(wcs, wcs.length);
                    long now = System.nanoTime();
                    if (ne > 0) {
                        lastProgress = now;
                        for (int i = 0; i < ne; i++) {
                            WorkCompletion wc = wcs[i];
                            checkWc(wc, "client", totscnt, totccnt);
                            int q = (int) (wc.wrId() >>> 48);
                            long k = wc.wrId() & 0xFFFF_FFFF_FFFFL;
                            long fill = k + 1 - ccnt[q];
                            ccnt[q] = k + 1;
                            totccnt += fill;
                            if (compIdx != null && completions < compIdx.length) {
                                compIdx[completions] = (int) (totccnt - 1);
                                compTime[completions] = now;
                                completions++;
                            }
                            if (duration && state == 1) {
                                sampled += fill;
                            }
                        }
                        if (progress != null) {
                            progress.update(now, duration ? now - start : totccnt);
                        }
                    } else if (peerGone(now)) {
                        throw peerClosed("send completions (scnt=" + totscnt + ", ccnt=" + totccnt + ")");
                    } else if (now - lastProgress > STALL_NS) {
                        throw new RunException("No completion for " + STALL_NS / 1_000_000_000L + " s: scnt=" + totscnt
                                + ", ccnt=" + totccnt + " (the device stopped completing, or the peer is gone)"
                                + inProcessHint());
                    } else {
                        // Not onSpinWait: the device's engine threads need this CPU (perftest's busy poll
                        // assumes the NIC works on its own silicon).
                        Thread.yield();
                    }
                }
            }
            if (progress != null) {
                progress.clear();
            }
            PerftestFormat.Report r;
            if (duration) {
                r = BwCalc.noPeak(size, sampled, (t1 == 0 ? System.nanoTime() : t1) - t0, unit);
            } else if (noPeak || stopping) {
                r = BwCalc.noPeak(size, totccnt, System.nanoTime() - start, unit);
            } else {
                r = BwCalc.withPeak(size, totIters, tposted, compIdx, compTime, completions, unit);
            }
            if (stopping) {
                throw new Interrupted(r, null);
            }
            return r;
        }

        /**
         * End of a duration run on QP q: the last WRs may be unsignaled, so one signaled WR completes
         * after them (RC/UC order) and every WR is accounted for before close. For SEND the receiver keeps
         * receiving until the closing hand-shake, so a 1-byte SEND is fine too.
         */
        private boolean flushDuration(int q, long[] scnt, long[] ccnt, SendWorkRequest template, long loc, long rem,
                                      long size) {
            if (scnt[q] + 1 > txDepth + ccnt[q]) {
                return false;
            }
            long k = scnt[q];
            template.wrId(((long) q << 48) | k).sendFlags(SendFlags.SIGNALED);
            template.sge(0).addr(loc);
            if (o.verb != Verb.ATOMIC) {
                template.sge(0).length(1);
            }
            if (o.verb != Verb.SEND) {
                template.remoteAddr(rem);
            }
            if (!qps[q].postSend(template)) {
                throw new RunException("Couldn't post send: qp " + q + " scnt=" + k + " || err="
                        + template.postError() + " tx_depth=" + txDepth);
            }
            scnt[q]++;
            return true;
        }

        /**
         * run_iter_bw_server (SEND): count receives, re-post them, time from the first one. It stops
         * after {@code iters} per QP, or in duration mode when the client starts its closing hand-shake
         * (bytes on the TCP connection), so the client's last SENDs always find a receive.
         */
        private PerftestFormat.Report runServerBw(long size, boolean duration, int durationS, int marginS,
                                                  double unit) throws IOException {
            int numQps = o.numQps;
            long iters = o.iters;
            long totIters = iters * numQps;
            long[] posted = new long[numQps];
            RecvWorkRequest[] rwrs = new RecvWorkRequest[numQps];
            for (int q = 0; q < numQps; q++) {
                posted[q] = rxDepth;
                rwrs[q] = new RecvWorkRequest(1).wrId(q).singleSge(mrs[q].address() + bufSize, (int) size,
                        mrs[q].lkey());
            }
            WorkCompletion[] wcs = newWcs(16);
            long rcnt = 0;
            long first = 0;
            long t0 = 0;
            long t1 = 0;
            long sampled = 0;
            int state = 0;
            long lastProgress = System.nanoTime();
            Progress progress = Progress.maybe(o, err, size, duration ? 0 : totIters, duration);
            // Duration mode ends when the client starts its closing hand-shake (bytes on the connection).
            long nextLook = 0;
            while (duration || rcnt < totIters) {
                if (stop.stopped()) {
                    long now = System.nanoTime();
                    throw new Interrupted(BwCalc.noPeak(size, duration ? sampled : rcnt,
                            (duration ? (t1 == 0 ? now : t1) - t0 : now - first), unit), null);
                }
                int ne = recvCq.poll(wcs, wcs.length);
                long now = System.nanoTime();
                if (duration && first != 0) {
                    if (state == 0 && now >= first + marginS * 1_000_000_000L) {
                        state = 1;
                        t0 = now;
                    }
                    if (state == 1 && now >= first + (long) (durationS - marginS) * 1_000_000_000L) {
                        state = 2;
                        t1 = now;
                    }
                }
                if (ne > 0) {
                    if (first == 0) {
                        first = now;
                        if (duration && marginS == 0) {
                            state = 1;
                            t0 = now;
                        }
                    }
                    lastProgress = now;
                    for (int i = 0; i < ne; i++) {
                        WorkCompletion wc = wcs[i];
                        checkWc(wc, "server", rcnt, rcnt);
                        int q = (int) wc.wrId();
                        rcnt++;
                        if (state == 1) {
                            sampled++;
                        }
                        if (duration || posted[q] < iters) {
                            if (!qps[q].postRecv(rwrs[q])) {
                                throw new RunException("Couldn't post recv: rcnt=" + rcnt + " err="
                                        + rwrs[q].postError());
                            }
                            posted[q]++;
                        }
                    }
                    if (progress != null) {
                        progress.update(now, duration ? now - first : rcnt);
                    }
                } else {
                    // Nothing received: has the client begun its closing hand-shake, or gone away?
                    if (duration && ch.hasBytes()) {
                        break;
                    }
                    if (now - nextLook >= 0) {
                        nextLook = now + PEER_CHECK_NS;
                        int peer = ch.peerState();
                        if (peer > 0 && duration) {
                            break;
                        }
                        if (peer < 0) {
                            throw new RunException("The client closed the connection after " + rcnt + " receive(s)"
                                    + (duration ? "" : " of " + totIters) + " (it ended or was killed)");
                        }
                    }
                    if (now - lastProgress > STALL_NS) {
                        throw new RunException("No receive completion for " + STALL_NS / 1_000_000_000L + " s: rcnt="
                                + rcnt + (duration ? "" : " of " + totIters) + " (is the client still running?)");
                    }
                    Thread.yield();
                }
            }
            if (progress != null) {
                progress.clear();
            }
            long now = System.nanoTime();
            if (duration) {
                return BwCalc.noPeak(size, sampled, (t1 == 0 ? now : t1) - t0, unit);
            }
            return BwCalc.noPeak(size, totIters, now - first, unit);
        }

        // ------------------------------------------------------------------ latency

        private int runLat() throws IOException {
            boolean duration = o.duration > 0;
            int margin = o.margin >= 0 ? o.margin : o.duration / 4;
            if (duration && !(o.duration > 2 * margin)) {
                throw new RunException("please check that DURATION > 2*MARGIN");
            }
            boolean passive = (o.verb == Verb.READ || o.verb == Verb.ATOMIC) && !client;
            if (passive) {
                // read_lat.c / atomic_lat.c: only the client posts; the server waits for its end.
                ch.handShake(my[0], withGid);
                if (printing()) {
                    text.print(PerftestFormat.RESULT_LINE);
                }
                finish();
                return 0;
            }
            if (printing()) {
                text.print(PerftestFormat.latHeader(duration));
                text.flush();
            }
            int rtt = o.verb == Verb.READ || o.verb == Verb.ATOMIC ? 1 : 2;
            for (long size : sizes()) {
                if (o.verb == Verb.SEND) {
                    postReceives(size);
                    ch.handShake(my[0], withGid);
                }
                LatStats s;
                try {
                    s = runLatSize(size, duration, o.duration, margin, rtt);
                    if (o.verb == Verb.WRITE && o.connection.equals("RC")) {
                        // The linger counts from the last completion, before the report is printed.
                        lingerFrom = System.nanoTime();
                        lingerStart = Linger.forPeerOf(ctx, o.ibPort, qps[0].query().timeout(), lingerFrom);
                    }
                } catch (Interrupted i) {
                    s = i.lat;
                }
                if (s != null) {
                    lats.add(s);
                    if (printing()) {
                        text.print(PerftestFormat.latLine(s));
                        text.flush();
                    }
                }
                if (stop.stopped()) {
                    stoppedAfterReport();
                }
            }
            boolean lingers = false;
            if (o.verb == Verb.WRITE) {
                // write_lat.c ends without a closing hand-shake.
                if (printing()) {
                    text.print(PerftestFormat.RESULT_LINE);
                }
                lingers = lingerStart != null && !stop.stopped();
            } else if (o.verb == Verb.SEND) {
                if (printing()) {
                    text.print(PerftestFormat.RESULT_LINE);
                }
                ch.handShake(my[0], withGid);
            } else {
                ch.handShake(my[0], withGid);
                if (printing()) {
                    text.print(PerftestFormat.RESULT_LINE);
                }
            }
            finish();
            if (lingers) {
                linger();
            }
            return 0;
        }

        /**
         * ib_write_lat over RC ends without a closing hand-shake, and each side's last event may be one
         * whose ACK is still on the wire: the side that sees the peer's last WRITE in memory has ACKed it,
         * and the side whose last WRITE completed has ACKed the peer's last one before. If that ACK is lost,
         * the peer resends the WRITE, and only a live QP answers a duplicate (IBA 9.9.2); rdma_rxe with
         * retry_cnt 7 resends forever to a destroyed one. So the QP stays until no packet has arrived for
         * 3 local ACK timeouts ({@code -u}, default 14: 67 ms each), capped ({@link Linger}), or until the
         * peer role in this process is done. The other tests end with a hand-shake over TCP that each side
         * reaches only after its last completion, so a lost ACK is resent and answered before either QP
         * goes.
         */
        private void linger() {
            done = true;
            Role p = peer;
            Linger l = lingerStart;
            Linger.End end = l.await(() -> p != null && p.done || stop.stopped());
            lastLinger = l;
            if (reportErrors && (l.arrivals() > 0 || end == Linger.End.CAP)) {
                // Only under loss: then it shows that the linger answered the peer's resends.
                err.println(" kept the QP " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - lingerFrom)
                        + " ms after the last completion; " + l.arrivals()
                        + " packet(s) arrived meanwhile (resends whose ACK was lost)"
                        + (end == Linger.End.CAP ? "; stopped at the cap" : ""));
            }
        }

        private LatStats runLatSize(long size, boolean duration, int durationS, int marginS, int rtt) {
            long iters = duration ? Long.MAX_VALUE : o.iters;
            if (!duration && iters > Integer.MAX_VALUE - 8) {
                throw new RunException("-n " + iters + " is too large for a latency test here");
            }
            long[] tposted = duration ? null : new long[(int) iters];
            int flags = SendFlags.SIGNALED | (size <= inline && o.verb != Verb.READ && o.verb != Verb.ATOMIC
                    ? SendFlags.INLINE : 0);
            SendWorkRequest wr = sendWrs(size, flags)[0];
            QueuePair qp = qps[0];
            MemorySegment buf = MemorySegment.ofAddress(mrs[0].address()).reinterpret(2 * bufSize);
            long postOff = size - 1;
            long pollOff = bufSize + size - 1;
            RecvWorkRequest rwr = new RecvWorkRequest(1).wrId(0)
                    .singleSge(mrs[0].address() + bufSize, (int) size, mrs[0].lkey());
            WorkCompletion wc = new WorkCompletion();
            long scnt = 0;
            long rcnt = 0;
            long ccnt = 0;
            long start = System.nanoTime();
            long t0 = 0;
            long t1 = 0;
            long sampled = 0;
            int state = duration && marginS == 0 ? 1 : 0;
            if (state == 1) {
                t0 = start;
            }
            Progress progress = Progress.maybe(o, err, size, duration ? 0 : iters, duration);
            boolean pendingSend = false;
            // In duration mode a side may wait for a message the peer, whose clock ended first, will not send:
            // every wait also ends at the end of the run.
            long hardEnd = duration ? start + durationS * 1_000_000_000L : Long.MAX_VALUE;
            run:
            while (duration ? state != 3 : scnt < iters || rcnt < iters && o.verb != Verb.READ
                    && o.verb != Verb.ATOMIC || ccnt < scnt) {
                long now = System.nanoTime();
                if (stop.stopped()) {
                    return interruptedLat(size, tposted, (int) scnt, rtt, duration, sampled, t0, now);
                }
                if (duration) {
                    if (state == 0 && now >= start + marginS * 1_000_000_000L) {
                        state = 1;
                        t0 = now;
                    }
                    if (state == 1 && now >= start + (long) (durationS - marginS) * 1_000_000_000L) {
                        state = 2;
                        t1 = now;
                    }
                    if (state == 2 && now >= start + durationS * 1_000_000_000L) {
                        state = 3;
                        break;
                    }
                }
                if (progress != null && (scnt & 255) == 0) {
                    progress.update(now, duration ? now - start : scnt);
                }
                switch (o.verb) {
                    case WRITE -> {
                        // run_iter_lat_write: wait for the peer's counter in the last byte, then write ours.
                        if ((duration || rcnt < iters) && !(scnt < 1 && !client)) {
                            rcnt++;
                            byte want = (byte) rcnt;
                            long since = System.nanoTime();
                            int spins = 0;
                            while ((byte) BYTE.getVolatile(buf, pollOff) != want) {
                                spins = spinWait(spins, since, "the peer's RDMA WRITE #" + rcnt);
                                if (duration && System.nanoTime() >= hardEnd) {
                                    rcnt--;
                                    break run;
                                }
                                if (stop.stopped()) {
                                    return interruptedLat(size, tposted, (int) scnt, rtt, duration, sampled, t0,
                                            System.nanoTime());
                                }
                            }
                            if (state == 1) {
                                sampled++;
                            }
                        }
                        if (duration || scnt < iters) {
                            if (pendingSend) {
                                if (!waitSend(wc, scnt, ccnt, hardEnd)) {
                                    break run;
                                }
                                ccnt++;
                                pendingSend = false;
                            }
                            long t = System.nanoTime();
                            if (tposted != null) {
                                tposted[(int) scnt] = t;
                            }
                            BYTE.setVolatile(buf, postOff, (byte) ++scnt);
                            post(qp, wr, scnt);
                            pendingSend = true;
                        }
                        if (!duration && scnt == iters && pendingSend) {
                            waitSend(wc, scnt, ccnt);
                            ccnt++;
                            pendingSend = false;
                        }
                    }
                    case READ, ATOMIC -> {
                        // run_iter_lat: one signaled operation at a time.
                        if (tposted != null) {
                            tposted[(int) scnt] = System.nanoTime();
                        }
                        scnt++;
                        post(qp, wr, scnt);
                        waitSend(wc, scnt, ccnt);
                        ccnt++;
                        if (state == 1) {
                            sampled++;
                        }
                    }
                    case SEND -> {
                        // run_iter_lat_send: the server waits first; every receive is re-posted while more will come.
                        if ((duration || rcnt < iters) && !(scnt < 1 && client)) {
                            long since = System.nanoTime();
                            int spins = 0;
                            while (!recvCq.poll(wc)) {
                                spins = spinWait(spins, since, "the peer's SEND #" + (rcnt + 1));
                                if (duration && System.nanoTime() >= hardEnd) {
                                    break run;
                                }
                                if (stop.stopped()) {
                                    return interruptedLat(size, tposted, (int) scnt, rtt, duration, sampled, t0,
                                            System.nanoTime());
                                }
                            }
                            checkWc(wc, client ? "client" : "server", scnt, rcnt);
                            rcnt++;
                            if (state == 1) {
                                sampled++;
                            }
                            if (duration || rcnt + rxDepth <= iters) {
                                if (!qp.postRecv(rwr)) {
                                    throw new RunException("Couldn't post recv: rcnt=" + rcnt + " err="
                                            + rwr.postError());
                                }
                            }
                        }
                        if (duration || scnt < iters) {
                            if (pendingSend) {
                                if (!waitSend(wc, scnt, ccnt, hardEnd)) {
                                    break run;
                                }
                                ccnt++;
                                pendingSend = false;
                            }
                            if (tposted != null) {
                                tposted[(int) scnt] = System.nanoTime();
                            }
                            scnt++;
                            post(qp, wr, scnt);
                            pendingSend = true;
                        }
                        if (!duration && scnt == iters && pendingSend) {
                            waitSend(wc, scnt, ccnt);
                            ccnt++;
                            pendingSend = false;
                        }
                    }
                    default -> throw new IllegalStateException();
                }
            }
            if (progress != null) {
                progress.clear();
            }
            if (duration) {
                // Each side stops on its own clock, as perftest's alarm does, abandoning what is in flight.
                long end = t1 == 0 ? System.nanoTime() : t1;
                return LatStats.ofDuration(size, sampled, end - t0, rtt);
            }
            if (client || o.verb == Verb.WRITE || o.verb == Verb.SEND) {
                if (o.unsorted) {
                    text.print(LatStats.samples(tposted, (int) iters, rtt, false));
                }
                if (o.histogram) {
                    text.print(LatStats.samples(tposted, (int) iters, rtt, true));
                }
                if ((o.unsorted || o.histogram) && printing()) {
                    text.print(PerftestFormat.latHeader(false));
                }
            }
            return LatStats.of(size, tposted, (int) iters, rtt);
        }

        private LatStats interruptedLat(long size, long[] tposted, int posts, int rtt, boolean duration,
                                        long sampled, long t0, long now) {
            if (duration) {
                throw new Interrupted(null, t0 == 0 ? null : LatStats.ofDuration(size, sampled, now - t0, rtt));
            }
            throw new Interrupted(null, posts >= 5 ? LatStats.of(size, tposted, posts, rtt) : null);
        }

        /** When the peer's close was seen (0: not yet), and when to look next. */
        private long peerClosedAt;
        private long nextPeerCheck;

        /**
         * Whether the peer closed the TCP exchange at least {@link #PEER_GRACE_NS} ago; looks at the
         * connection at most every {@link #PEER_CHECK_NS}.
         *
         * @param now the current time
         * @return true when a wait for the peer should end
         */
        private boolean peerGone(long now) {
            if (peerClosedAt == 0 && now - nextPeerCheck >= 0) {
                nextPeerCheck = now + PEER_CHECK_NS;
                try {
                    if (ch.peerState() < 0) {
                        peerClosedAt = now;
                    }
                } catch (IOException e) {
                    peerClosedAt = now;
                }
            }
            return peerClosedAt != 0 && now - peerClosedAt > PEER_GRACE_NS;
        }

        private RunException peerClosed(String what) {
            return new RunException("The peer closed the connection while this side waited for " + what
                    + " (it ended or was killed)");
        }

        private int spinWait(int spins, long since, String what) {
            // A short spin, then yield: the device's threads and the peer need a CPU too (BusyPoll).
            if (BusyPoll.yields(spins) && (spins & 63) == 0) {
                long now = System.nanoTime();
                if (now - since > STALL_NS) {
                    throw new RunException("Waited " + STALL_NS / 1_000_000_000L + " s for " + what
                            + " (is the peer still running?)" + inProcessHint());
                }
                if (peerGone(now)) {
                    throw peerClosed(what);
                }
            }
            return BusyPoll.idle(spins);
        }

        /**
         * The in-process device reaches only devices of the same JVM: between two processes its packets go
         * nowhere, which looks like a silent peer.
         */
        private String inProcessHint() {
            if (o.loopback || !"soft".equals(ctx.device().providerName())) {
                return "";
            }
            return ".\n " + ctx.device().name() + " is an in-process device: it reaches only devices of this JVM, so"
                    + " a server and a client in two processes need a network device (RoCE), or use --loopback";
        }

        private void post(QueuePair qp, SendWorkRequest wr, long scnt) {
            wr.wrId(scnt);
            if (!qp.postSend(wr)) {
                throw new RunException("Couldn't post send: scnt=" + scnt + " err=" + wr.postError());
            }
        }

        private void waitSend(WorkCompletion wc, long scnt, long ccnt) {
            waitSend(wc, scnt, ccnt, Long.MAX_VALUE);
        }

        /** {@return false when {@code deadline} passed first (a duration run ended; the peer may be gone)} */
        private boolean waitSend(WorkCompletion wc, long scnt, long ccnt, long deadline) {
            long since = System.nanoTime();
            int spins = 0;
            while (!sendCq.poll(wc)) {
                spins = spinWait(spins, since, "the completion of send #" + scnt);
                if (System.nanoTime() >= deadline) {
                    return false;
                }
            }
            checkWc(wc, client ? "client" : "server", scnt, ccnt);
            return true;
        }

        private void checkWc(WorkCompletion wc, String side, long scnt, long ccnt) {
            if (wc.status() != WcStatus.SUCCESS) {
                throw new RunException("Completion with error at " + side + "\n Failed status "
                        + wc.status().description() + " (" + wc.status().value() + "): wr_id " + wc.wrId()
                        + " syndrom 0x" + Integer.toHexString(wc.vendorErr()) + "\n scnt=" + scnt + ", ccnt=" + ccnt);
            }
        }

        // ------------------------------------------------------------------ results

        /** JSON document, chart, --out_json file: what follows the table. */
        private void finish() {
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
                writeChart();
            }
            text.flush();
        }

        private void writeChart() {
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

    private static WorkCompletion[] newWcs(int n) {
        WorkCompletion[] wcs = new WorkCompletion[n];
        for (int i = 0; i < n; i++) {
            wcs[i] = new WorkCompletion();
        }
        return wcs;
    }

    private static boolean allTrue(boolean[] b) {
        for (boolean x : b) {
            if (!x) {
                return false;
            }
        }
        return true;
    }

    /**
     * perftest's choice when no -x is given on an Ethernet link: the first non-empty GID, preferring
     * an IPv4-mapped one (RoCEv2 over IPv4).
     *
     * @param ctx  the device
     * @param port the port
     * @param pa   its attributes
     * @return the GID index
     */
    static int bestGidIndex(Context ctx, int port, PortAttributes pa) {
        int first = -1;
        int n = Math.max(pa.gidTblLen(), 1);
        for (int i = 0; i < n; i++) {
            Gid g;
            try {
                g = ctx.queryGid(port, i);
            } catch (VerbsException e) {
                break;
            }
            if (g.equals(Gid.ZERO)) {
                continue;
            }
            if (g.isIpv4Mapped()) {
                return i;
            }
            if (first < 0) {
                first = i;
            }
        }
        return first < 0 ? 0 : first;
    }

    static long alignUp(long v, long a) {
        return (v + a - 1) / a * a;
    }

    /** A progress line on stderr for long runs on a terminal, rewritten in place about once a second. */
    static final class Progress {
        private final PrintStream err;
        private final long size;
        private final long total;
        private final boolean duration;
        private final long durationNs;
        private final long start = System.nanoTime();
        private long next = start + 1_000_000_000L;
        private boolean shown;

        private Progress(PrintStream err, long size, long total, boolean duration, long durationNs) {
            this.err = err;
            this.size = size;
            this.total = total;
            this.duration = duration;
            this.durationNs = durationNs;
        }

        static Progress maybe(PerftestOptions o, PrintStream err, long size, long total, boolean duration) {
            boolean terminal = System.console() != null && System.console().isTerminal();
            boolean want = o.progress || (terminal && !o.noProgress);
            boolean long_ = duration || total >= 200_000;
            return want && long_ ? new Progress(err, size, total, duration, o.duration * 1_000_000_000L) : null;
        }

        /**
         * @param now  the time
         * @param done iterations done, or ns elapsed in duration mode
         */
        void update(long now, long done) {
            if (now < next) {
                return;
            }
            next = now + 1_000_000_000L;
            double el = (now - start) / 1e9;
            String line = duration
                    ? String.format(" %d B: %.0f of %d s", size, done / 1e9, durationNs / 1_000_000_000L)
                    : String.format(" %d B: %d of %d iterations (%.0f%%), %.1f s", size, done, total,
                            100.0 * done / Math.max(total, 1), el);
            err.print("\r" + line + "   ");
            err.flush();
            shown = true;
        }

        void clear() {
            if (shown) {
                err.print("\r" + " ".repeat(70) + "\r");
                err.flush();
            }
        }
    }
}
