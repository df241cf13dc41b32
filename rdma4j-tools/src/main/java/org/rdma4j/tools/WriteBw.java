package org.rdma4j.tools;

import java.io.IOException;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.DeviceAttributes;
import org.rdma4j.verbs.Gid;
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
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.Verbs;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * ib_write_bw in loopback: the server side (a QP and a target buffer) and the client side (a QP that
 * posts RDMA WRITEs, tx-depth outstanding, signalled every cq-mod) in one process, connected as
 * perftest connects them (INIT → RTR → RTS with perftest's attributes), measured and reported as
 * perftest's {@code run_iter_bw} and {@code print_report_bw} do.
 */
public final class WriteBw {
    /** perftest DEF_CACHE_LINE_SIZE. */
    static final int CACHE_LINE = 64;
    /** perftest cycle_buffer: the page size. */
    static final int CYCLE_BUFFER = 4096;
    /** Give up when nothing completes for this long. */
    static final long STALL_NS = 20_000_000_000L;

    private final WriteBwOptions o;
    private final PrintStream out;
    private final PrintStream err;

    /**
     * @param options the parsed command line
     * @param out     where the report goes
     * @param err     where errors go
     */
    public WriteBw(WriteBwOptions options, PrintStream out, PrintStream err) {
        this.o = options;
        this.out = out;
        this.err = err;
    }

    /** A failure that ends the run with perftest's wording. */
    static final class RunException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        RunException(String message) {
            super(message);
        }
    }

    /** One side: context, PD, CQ, QPs and a buffer per QP. */
    private static final class Side implements AutoCloseable {
        final Context ctx;
        final ProtectionDomain pd;
        final CompletionQueue cq;
        final QueuePair[] qps;
        final MemoryRegion[] mrs;
        final PerftestFormat.Dest[] dests;
        final Arena arena = Arena.ofShared();

        /** Creates everything, or closes what it created (not the context) and rethrows. */
        Side(Context ctx, int numQps, int bufSize, QpType type, int txDepth, int inline, int port, int gidIndex) {
            this.ctx = ctx;
            PortAttributes pa = ctx.queryPort(port);
            byte[] gid = gidIndex >= 0 ? ctx.queryGid(port, gidIndex).toBytes() : new byte[16];
            this.qps = new QueuePair[numQps];
            this.mrs = new MemoryRegion[numQps];
            this.dests = new PerftestFormat.Dest[numQps];
            this.pd = ctx.allocPd();
            CompletionQueue c = null;
            try {
                c = ctx.createCq(Math.max(txDepth * numQps, 1), null, 0);
                this.cq = c;
                create(numQps, bufSize, type, txDepth, inline, pa, gid);
            } catch (RuntimeException e) {
                closeObjects(c);
                arena.close();
                throw e;
            }
        }

        private void create(int numQps, int bufSize, QpType type, int txDepth, int inline, PortAttributes pa,
                            byte[] gid) {
            for (int i = 0; i < numQps; i++) {
                MemorySegment buf = arena.allocate(bufSize, CYCLE_BUFFER);
                for (long b = 0; b < bufSize; b += 8) {
                    buf.set(ValueLayout.JAVA_LONG_UNALIGNED, b, 0x7b7b7b7b7b7b7b7bL ^ b);
                }
                mrs[i] = pd.regMr(buf, AccessFlag.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE,
                        AccessFlag.REMOTE_READ));
                qps[i] = pd.createQp(new QpInitAttributes().type(type).sendCq(cq).recvCq(cq)
                        .cap(new QpCapabilities(txDepth, 1, 1, 1, inline)));
                int psn = ThreadLocalRandom.current().nextInt() & 0xFFFFFF;
                dests[i] = new PerftestFormat.Dest(pa.lid(), qps[i].qpNum(), psn, mrs[i].rkey(), mrs[i].address(), gid);
            }
        }

        private void closeObjects(CompletionQueue c) {
            for (QueuePair qp : qps) {
                if (qp != null) {
                    qp.close();
                }
            }
            for (MemoryRegion mr : mrs) {
                if (mr != null) {
                    mr.close();
                }
            }
            if (c != null) {
                c.close();
            }
            pd.close();
        }

        @Override
        public void close() {
            closeObjects(cq);
            ctx.close();
            arena.close();
        }
    }

    /**
     * Runs the test.
     *
     * @return the process exit status (0 on success)
     */
    public int run() {
        if (o.help) {
            out.print(WriteBwOptions.usage());
            return 0;
        }
        if (o.version) {
            out.println("Version: " + PerftestFormat.PERFTEST_VERSION);
            return 0;
        }
        if (!o.loopback || o.serverName != null) {
            err.println(" rdma4j ib_write_bw runs server and client in one process for now: add --loopback"
                    + (o.serverName != null ? " and drop the server name '" + o.serverName + "'" : "")
                    + ".\n A TCP server/client mode (perftest's exchange on port " + o.port + ") is not implemented yet.");
            return 1;
        }
        try {
            return runLoopback();
        } catch (RunException | VerbsException e) {
            out.flush();
            err.println(" " + e.getMessage());
            return 1;
        }
    }

    private int runLoopback() {
        List<Device> devices = Verbs.devices();
        if (devices.isEmpty()) {
            throw new RunException("No IB devices found (no org.rdma4j.verbs.spi.VerbsProvider on the class path"
                    + " offers a device)");
        }
        Device clientDev = o.ibDev != null ? Verbs.device(o.ibDev) : devices.get(0);
        Device serverDev;
        if (o.serverIbDev != null) {
            serverDev = Verbs.device(o.serverIbDev);
        } else {
            serverDev = devices.stream().filter(d -> !d.name().equals(clientDev.name())).findFirst().orElse(clientDev);
        }
        boolean duration = o.duration > 0;
        if (duration && o.all) {
            out.print(PerftestFormat.RESULT_LINE);
            throw new RunException("Duration mode currently doesn't support running on all sizes.");
        }
        if (duration && o.numQps > 1) {
            throw new RunException("Only 1 QP supported in duration mode here");
        }
        int margin = o.margin >= 0 ? o.margin : o.duration / 4;
        if (duration && !(o.duration > 2 * margin)) {
            out.print(PerftestFormat.RESULT_LINE);
            throw new RunException("please check that DURATION > 2*MARGIN");
        }
        long iters = o.iters;
        int txDepth = o.txDepth;
        if (!duration && txDepth > iters) {
            txDepth = (int) iters;
        }
        int cqMod = Math.min(o.cqMod, txDepth);
        boolean noPeak = o.noPeak;
        boolean text = !o.json;
        if (duration || (iters > 20000 && !noPeak)) {
            if (!noPeak && text) {
                out.print(PerftestFormat.NO_PEAK_WARNING);
            }
            noPeak = true;
        }

        Context cctx = clientDev.open();
        Context sctx;
        try {
            sctx = serverDev.open();
        } catch (RuntimeException e) {
            cctx.close();
            throw e;
        }
        Side client = null;
        Side server = null;
        try {
            DeviceAttributes cattr = cctx.queryDevice();
            DeviceAttributes sattr = sctx.queryDevice();
            if (o.ibPort > cattr.physPortCnt() || o.ibPort > sattr.physPortCnt()) {
                throw new RunException("Invalid port " + o.ibPort + ": " + clientDev.name() + " has "
                        + cattr.physPortCnt() + " port(s), " + serverDev.name() + " has " + sattr.physPortCnt());
            }
            PortAttributes cport = cctx.queryPort(o.ibPort);
            PortAttributes sport = sctx.queryPort(o.ibPort);
            for (var pa : List.of(cport, sport)) {
                if (pa.state() != PortState.ACTIVE) {
                    throw new RunException("Port " + o.ibPort + " is not active (" + pa.state().portStateString() + ")");
                }
            }
            boolean ethernet = "Ethernet".equalsIgnoreCase(cport.linkLayer());
            int gidIndex = o.gidIndex;
            if (gidIndex < 0 && ethernet) {
                gidIndex = bestGidIndex(cctx, o.ibPort, cport);
            }
            int serverGidIndex = gidIndex;
            if (gidIndex >= 0 && o.gidIndex < 0 && "Ethernet".equalsIgnoreCase(sport.linkLayer())) {
                serverGidIndex = bestGidIndex(sctx, o.ibPort, sport);
            }
            Mtu mtu = cport.activeMtu().value() <= sport.activeMtu().value() ? cport.activeMtu() : sport.activeMtu();
            if (o.mtu != 0) {
                Mtu want = Mtu.ofBytes(o.mtu);
                Mtu max = cport.maxMtu().value() <= sport.maxMtu().value() ? cport.maxMtu() : sport.maxMtu();
                if (want.value() > max.value()) {
                    throw new RunException("The port's max MTU is " + max.bytes() + "; -m " + o.mtu + " is too large");
                }
                mtu = want;
            }
            int inline = o.inlineSize < 0 ? 0 : o.inlineSize;
            if (inline > cattr.maxInlineData()) {
                throw new RunException("Inline size " + inline + " exceeds the device's max_inline_data "
                        + cattr.maxInlineData() + " (" + clientDev.name() + ")");
            }
            long maxSize = o.all ? WriteBwOptions.MAX_SIZE : o.size;
            int bufSize = (int) alignUp(Math.max(maxSize, CYCLE_BUFFER), CYCLE_BUFFER);
            QpType type = QpType.valueOf(o.connection);

            server = new Side(sctx, o.numQps, bufSize, type, 1, 0, o.ibPort, serverGidIndex);
            client = new Side(cctx, o.numQps, bufSize, type, txDepth, inline, o.ibPort, gidIndex);
            for (int i = 0; i < o.numQps; i++) {
                connect(server.qps[i], type, server.dests[i], client.dests[i], serverGidIndex, mtu, o.ibPort);
                connect(client.qps[i], type, client.dests[i], server.dests[i], gidIndex, mtu, o.ibPort);
            }

            PerftestFormat.TestInfo info = new PerftestFormat.TestInfo("RDMA_Write", clientDev.name(), o.numQps,
                    "IB", o.connection, true, txDepth, cqMod, mtu.bytes(), ethernet ? "Ethernet" : "IB", gidIndex,
                    inline);
            boolean withGid = gidIndex >= 0;
            if (text) {
                out.print(PerftestFormat.testInfo(info));
                for (int i = 0; i < o.numQps; i++) {
                    out.print(PerftestFormat.address("local", client.dests[i], withGid));
                }
                for (int i = 0; i < o.numQps; i++) {
                    out.print(PerftestFormat.address("remote", server.dests[i], withGid));
                }
                out.print(PerftestFormat.resultHeader(o.reportGbits));
                out.flush();
            }
            double unit = o.reportGbits ? PerftestFormat.GBS : PerftestFormat.MBS;
            List<PerftestFormat.Report> reports = new ArrayList<>();
            if (o.all) {
                for (int e = 1; e < 24; e++) {
                    if (o.warmUp) {
                        runSize(client, server, 1L << e, iters, txDepth, cqMod, inline, true, false, 0, 0, unit);
                    }
                    PerftestFormat.Report r = runSize(client, server, 1L << e, iters, txDepth, cqMod, inline, noPeak,
                            false, 0, 0, unit);
                    reports.add(r);
                    if (text) {
                        out.print(PerftestFormat.reportLine(r, o.reportGbits));
                        out.flush();
                    }
                }
            } else {
                if (o.warmUp && !duration) {
                    runSize(client, server, o.size, iters, txDepth, cqMod, inline, true, false, 0, 0, unit);
                }
                PerftestFormat.Report r = runSize(client, server, o.size, iters, txDepth, cqMod, inline, noPeak,
                        duration, o.duration, margin, unit);
                reports.add(r);
                if (text) {
                    out.print(PerftestFormat.reportLine(r, o.reportGbits));
                }
            }
            if (text) {
                out.print(PerftestFormat.RESULT_LINE);
            }
            String doc = PerftestFormat.json(info, reports, o.reportGbits);
            if (o.json) {
                out.print(doc);
            }
            if (o.outJson || o.outJsonFile != null) {
                Path p = Path.of(o.outJsonFile != null ? o.outJsonFile : "perftest_out.json");
                try {
                    Files.writeString(p, doc);
                } catch (IOException e) {
                    throw new RunException("Couldn't write " + p + ": " + e.getMessage());
                }
            }
            out.flush();
            return 0;
        } finally {
            closeQuietly(client);
            closeQuietly(server);
            if (client == null) {
                closeQuietly(cctx);
            }
            if (server == null) {
                closeQuietly(sctx);
            }
        }
    }

    private void closeQuietly(AutoCloseable c) {
        if (c == null) {
            return;
        }
        try {
            c.close();
        } catch (Exception e) {
            err.println(" warning: cleanup failed: " + e.getMessage());
        }
    }

    /**
     * perftest's choice when no -x is given on an Ethernet link: the first non-empty GID, preferring
     * an IPv4-mapped one (RoCEv2 over IPv4).
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

    /** perftest ctx_modify_qp_to_init / ctx_modify_qp_to_rtr / ctx_modify_qp_to_rts for RC and UC. */
    private static void connect(QueuePair qp, QpType type, PerftestFormat.Dest me, PerftestFormat.Dest peer,
                                int gidIndex, Mtu mtu, int port) {
        qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(port)
                .accessFlags(AccessFlag.of(AccessFlag.REMOTE_WRITE, AccessFlag.LOCAL_WRITE)));
        AhAttributes av = new AhAttributes().dlid(peer.lid()).sl(0).srcPathBits(0).portNum(port);
        if (gidIndex >= 0) {
            av.global(true).dgid(Gid.of(peer.gid())).sgidIndex(gidIndex).hopLimit(0xFF).trafficClass(0);
        } else {
            av.global(false);
        }
        QpAttributes rtr = new QpAttributes().state(QpState.RTR).pathMtu(mtu).destQpNum(peer.qpn())
                .rqPsn(peer.psn()).av(av);
        if (type == QpType.RC) {
            rtr.maxDestRdAtomic(1).minRnrTimer(12);
        }
        qp.modify(rtr);
        QpAttributes rts = new QpAttributes().state(QpState.RTS).sqPsn(me.psn());
        if (type == QpType.RC) {
            rts.timeout(14).retryCnt(7).rnrRetry(7).maxRdAtomic(1);
        }
        qp.modify(rts);
    }

    /** run_iter_bw for one message size, then print_report_bw's arithmetic. */
    private PerftestFormat.Report runSize(Side client, Side server, long size, long iters, int txDepth, int cqMod,
                                          int inline, boolean noPeak, boolean duration, int durationS, int marginS,
                                          double unit) {
        int numQps = client.qps.length;
        long totIters = duration ? 0 : iters * numQps;
        SendWorkRequest[] wrs = new SendWorkRequest[numQps];
        long[] locBase = new long[numQps];
        long[] remBase = new long[numQps];
        long[] scnt = new long[numQps];
        long[] ccnt = new long[numQps];
        boolean[] flushed = new boolean[numQps];
        int flagsBase = size <= inline ? SendFlags.INLINE : 0;
        for (int q = 0; q < numQps; q++) {
            locBase[q] = client.mrs[q].address();
            remBase[q] = server.dests[q].vaddr();
            wrs[q] = new SendWorkRequest(1).opcode(WrOpcode.RDMA_WRITE)
                    .singleSge(locBase[q], (int) size, client.mrs[q].lkey())
                    .remoteAddr(remBase[q]).rkey(server.dests[q].rkey());
        }
        boolean cycle = size <= CYCLE_BUFFER / 2;
        long inc = size > CACHE_LINE ? alignUp(size, CACHE_LINE) : CACHE_LINE;
        long perCycle = CYCLE_BUFFER / inc;

        long[] tposted = noPeak ? null : new long[(int) totIters];
        int maxCompletions = noPeak ? 0 : (int) (totIters / Math.max(cqMod, 1) + numQps + 1);
        int[] compIdx = noPeak ? null : new int[maxCompletions];
        long[] compTime = noPeak ? null : new long[maxCompletions];
        int completions = 0;

        WorkCompletion[] wcs = new WorkCompletion[16];
        for (int i = 0; i < wcs.length; i++) {
            wcs[i] = new WorkCompletion();
        }
        long totscnt = 0;
        long totccnt = 0;
        long start = System.nanoTime();
        long t0 = start;
        long t1 = 0;
        // duration state machine: 0 START (warm-up margin), 1 SAMPLE, 2 STOP_SAMPLE (cool-down margin), 3 END
        int state = 0;
        long sampleStart = start + marginS * 1_000_000_000L;
        long sampleEnd = start + (long) (durationS - marginS) * 1_000_000_000L;
        long end = start + durationS * 1_000_000_000L;
        long sampled = 0;
        if (duration && marginS == 0) {
            state = 1;
            t0 = start;
        }
        long lastProgress = start;

        while (totscnt < totIters || totccnt < totIters || (duration && (state != 3 || totccnt < totscnt || !allFlushed(flushed)))) {
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
                    // The run is over but the last WRs may be unsignaled: one signaled 1-byte WRITE
                    // completes after them (RC/UC order), so every WR is accounted for before close.
                    if (scnt[q] + 1 <= txDepth + ccnt[q]) {
                        long k = scnt[q];
                        SendWorkRequest wr = wrs[q];
                        wr.wrId(((long) q << 48) | k).sendFlags(SendFlags.SIGNALED);
                        wr.sge(0).addr(locBase[q]).length(1);
                        wr.remoteAddr(remBase[q]);
                        if (!client.qps[q].postSend(wr)) {
                            throw new RunException("Couldn't post send: qp " + q + " scnt=" + k + " || err="
                                    + wr.postError() + " tx_depth=" + txDepth);
                        }
                        scnt[q]++;
                        totscnt++;
                        flushed[q] = true;
                    }
                    continue;
                }
                while ((duration ? state != 3 : scnt[q] < iters) && scnt[q] + 1 <= txDepth + ccnt[q]) {
                    long k = scnt[q];
                    boolean signaled = (k % cqMod == cqMod - 1) || (!duration && k == iters - 1);
                    SendWorkRequest wr = wrs[q];
                    wr.wrId(((long) q << 48) | k).sendFlags(flagsBase | (signaled ? SendFlags.SIGNALED : 0));
                    if (cycle) {
                        long off = (k % perCycle) * inc;
                        wr.sge(0).addr(locBase[q] + off);
                        wr.remoteAddr(remBase[q] + off);
                    }
                    if (tposted != null) {
                        tposted[(int) totscnt] = System.nanoTime();
                    }
                    if (!client.qps[q].postSend(wr)) {
                        throw new RunException("Couldn't post send: qp " + q + " scnt=" + k + " || err="
                                + wr.postError() + " tx_depth=" + txDepth);
                    }
                    scnt[q]++;
                    totscnt++;
                }
            }
            if (totccnt < totIters || (duration && totccnt < totscnt)) {
                int ne = client.cq.poll(wcs, wcs.length);
                if (ne > 0) {
                    long now = System.nanoTime();
                    lastProgress = now;
                    for (int i = 0; i < ne; i++) {
                        WorkCompletion wc = wcs[i];
                        if (wc.status() != WcStatus.SUCCESS) {
                            throw new RunException("Completion with error at client\n Failed status-"
                                    + wc.status().description() + " (" + wc.status().value() + "): wr_id "
                                    + (int) wc.wrId() + " syndrom 0x" + Integer.toHexString(wc.vendorErr())
                                    + "\n scnt=" + totscnt + ", ccnt=" + totccnt);
                        }
                        int q = (int) (wc.wrId() >>> 48);
                        long k = wc.wrId() & 0xFFFF_FFFF_FFFFL;
                        long fill = k + 1 - ccnt[q];
                        ccnt[q] = k + 1;
                        totccnt += fill;
                        if (compIdx != null) {
                            compIdx[completions] = (int) (totccnt - 1);
                            compTime[completions] = now;
                            completions++;
                        }
                        if (duration && state == 1) {
                            sampled += fill;
                        }
                    }
                } else if (System.nanoTime() - lastProgress > STALL_NS) {
                    throw new RunException("No completion for " + STALL_NS / 1_000_000_000L + " s: scnt=" + totscnt
                            + ", ccnt=" + totccnt + " (the device stopped completing RDMA WRITEs)");
                } else {
                    // Not onSpinWait: the device's engine threads need this CPU (perftest's busy poll
                    // assumes the NIC works on its own silicon).
                    Thread.yield();
                }
            }
        }
        if (duration) {
            return BwCalc.noPeak(size, sampled, t1 - t0, unit);
        }
        if (noPeak) {
            return BwCalc.noPeak(size, totIters, System.nanoTime() - start, unit);
        }
        return BwCalc.withPeak(size, totIters, tposted, compIdx, compTime, completions, unit);
    }

    private static boolean allFlushed(boolean[] flushed) {
        for (boolean f : flushed) {
            if (!f) {
                return false;
            }
        }
        return true;
    }

    static long alignUp(long v, long a) {
        return (v + a - 1) / a * a;
    }
}
