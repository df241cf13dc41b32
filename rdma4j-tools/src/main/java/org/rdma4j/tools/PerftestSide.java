// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.IOException;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.rdma4j.tools.Perftest.RunException;
import org.rdma4j.tools.Perftest.Stopped;
import org.rdma4j.tools.PerftestOptions.Verb;
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
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.Verbs;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * One side of a perftest run (the server, the client, or either half of {@code --loopback}): its device, port
 * and GID, the depths perftest settles from the options and the device, the order of the run (banner, exchange,
 * test information, connection, the test, the results), what the bandwidth and latency tests share (their work
 * requests, completion checks, and the waits that notice a stalled device or a vanished peer), and closing it
 * all. {@link PerftestSetup} makes the exchange and the connected QPs, {@link PerftestBw} and {@link PerftestLat}
 * run the tests, {@link PerftestResults} writes what follows the table.
 */
final class PerftestSide {
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

    final PerftestOptions o;
    final PrintStream err;
    /** Ctrl-C: a stopped run reports what it measured and returns 130. */
    final StopSignal stop;
    /** How long to wait for the peer (every message); 0 waits forever. */
    final int timeoutMs;
    final boolean client;
    final String devName;
    final PrintStream text;
    final boolean reportErrors;
    final boolean json;
    String host;
    int port;
    CompletableFuture<Integer> boundPort;
    int acceptTimeoutMs;
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
    /** ib_send_bw on iWARP: perftest's receive credits (null otherwise). */
    PerftestCredit credit;
    /** -R, client: the source of the connections. */
    java.net.InetAddress cmSource;
    /** The other role when both run in this process (loopback): its end ends our linger. */
    volatile PerftestSide peer;
    /** Set when this role is done with its QPs (its test is over, or it failed). */
    volatile boolean done;
    /** How the last linger ended (tests read it), or null if the run did not linger. */
    volatile Linger lastLinger;
    /** What the run measured, and what follows the table. */
    final PerftestResults results;
    private final PerftestSetup setup;

    PerftestSide(PerftestOptions o, PrintStream err, StopSignal stop, int timeoutMs, boolean client, String devName,
                 PrintStream text, boolean reportErrors) {
        this.o = o;
        this.err = err;
        this.stop = stop;
        this.timeoutMs = timeoutMs;
        this.client = client;
        this.devName = devName;
        this.text = text;
        this.reportErrors = reportErrors;
        this.json = o.json;
        this.host = o.serverName;
        this.port = o.port;
        this.acceptTimeoutMs = timeoutMs;
        this.results = new PerftestResults(o, text, err, reportErrors);
        this.setup = new PerftestSetup(this);
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

    void close() {
        if (my != null) {
            for (PerftestFormat.Dest d : my) {
                if (d != null) {
                    PerftestSetup.forget(d);
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
        quiet(credit);
        quiet(sendCq);
        quiet(recvCq);
        quiet(pd);
        quiet(ctx);
        if (arena != null) {
            arena.close();
        }
    }

    void quiet(AutoCloseable c) {
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
            setup.connectControl(dev);
            if (control.context().device() != ctx.device()) {
                // the CM's route picked another device than -d (or the first): query the one that runs the test
                quiet(ctx);
                ctx = control.context().device().open();
                pa = ctx.queryPort(o.ibPort);
                mtu = pa.activeMtu();
            }
        } else {
            setup.connectTcp();
        }
        ch.stopOn(stop); // Ctrl-C ends a wait for a silent peer in a hand-shake
        connected = true;
        ch.exchangeVersions();
        ch.exchangeSysData();
        mtu = Mtu.ofValue(ch.exchangeMtu(mtu.value()));

        try {
            if (o.rdmaCm) {
                setup.connectTestQps(pa);
            } else {
                setup.createResources(pa);
            }
        } catch (OutOfMemoryError e) {
            throw new RunException("Couldn't allocate " + o.numQps + " x " + 2 * bufSize / 1024
                    + " KiB of buffers (" + e.getMessage() + "); use fewer QPs (-q) or smaller sizes");
        }
        Context qpCtx = rctx != null ? rctx : ctx;
        // transport_str: "IW" on an iWARP device (siw), as perftest prints it
        String transport = qpCtx.device().transportType() == org.rdma4j.verbs.TransportType.IWARP ? "IW" : "IB";
        info = new PerftestFormat.TestInfo(o.verb.title(),
                o.verb == Verb.ATOMIC ? (o.cmpAndSwap ? "CMP_AND_SWAP" : "FETCH_AND_ADD") : null, o.lat,
                o.postList, dev.name(), o.numQps, transport, o.connection, client, txDepth,
                o.verb == Verb.SEND && !client && !o.lat ? rxDepth : -1, cqMod, mtu.bytes(),
                ethernet ? "Ethernet" : "IB", gidIndex, inline,
                o.verb == Verb.READ || o.verb == Verb.ATOMIC ? outReads : -1, o.rdmaCm);
        if (printing()) {
            text.print(PerftestFormat.testInfo(info));
        }
        if (PerftestCredit.applies(o, qpCtx)) {
            // send_bw.c: ctx_alloc_credit after the test information, before the per-QP hand-shakes
            credit = new PerftestCredit(pd, arena, o.numQps, rxDepth, txDepth);
            for (int i = 0; i < o.numQps; i++) {
                my[i] = credit.advertise(i, my[i]);
            }
        }
        setup.exchangeKeysAndConnect(mtu);
        return o.lat ? new PerftestLat(this).run() : new PerftestBw(this).run();
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

    long[] sizes() {
        if (!o.all) {
            return new long[] {o.size};
        }
        long[] s = new long[23];
        for (int e = 1; e < 24; e++) {
            s[e - 1] = 1L << e;
        }
        return s;
    }

    /** What a run interrupted by Ctrl-C measured. */
    static final class Interrupted extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final transient PerftestFormat.Report report;
        final transient LatStats lat;

        Interrupted(PerftestFormat.Report report, LatStats lat) {
            super("interrupted", null, false, false);
            this.report = report;
            this.lat = lat;
        }
    }

    void stoppedAfterReport() {
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

    void postReceives(long size) {
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

    SendWorkRequest[] sendWrs(long size, int flagsBase) {
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
    boolean peerGone(long now) {
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

    RunException peerClosed(String what) {
        return new RunException("The peer closed the connection while this side waited for " + what
                + " (it ended or was killed)");
    }

    int spinWait(int spins, long since, String what) {
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
    String inProcessHint() {
        if (o.loopback || !"soft".equals(ctx.device().providerName())) {
            return "";
        }
        return ".\n " + ctx.device().name() + " is an in-process device: it reaches only devices of this JVM, so"
                + " a server and a client in two processes need a network device (RoCE), or use --loopback";
    }

    void checkWc(WorkCompletion wc, String side, long scnt, long ccnt) {
        if (wc.status() != WcStatus.SUCCESS) {
            throw new RunException("Completion with error at " + side + "\n Failed status "
                    + wc.status().description() + " (" + wc.status().value() + "): wr_id " + wc.wrId()
                    + " syndrom 0x" + Integer.toHexString(wc.vendorErr()) + "\n scnt=" + scnt + ", ccnt=" + ccnt);
        }
    }

    /** JSON document, chart, --out_json file: what follows the table. */
    void finish() {
        results.finish(info);
    }

    static WorkCompletion[] newWcs(int n) {
        WorkCompletion[] wcs = new WorkCompletion[n];
        for (int i = 0; i < n; i++) {
            wcs[i] = new WorkCompletion();
        }
        return wcs;
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
}
