// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

import org.rdma4j.tools.PingPong.RunException;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.Linger;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.PortAttributes;
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
import org.rdma4j.verbs.SharedReceiveQueue;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * One side of a {@link PingPong} run (rdma-core's one program): its resources, created as {@code pp_init_ctx}
 * creates them, the exchange of addresses, {@code pp_connect_ctx}, the timed ping-pong loop with its report,
 * RC's linger, and {@code pp_close_ctx}.
 */
final class PingPongSide implements AutoCloseable {
    /** wr_id of receives (rdma-core PINGPONG_RECV_WRID); also the pending bit. */
    static final int RECV_WRID = 1;
    /** wr_id of sends (PINGPONG_SEND_WRID); also the pending bit. */
    static final int SEND_WRID = 2;
    /** ud_pingpong's Q_Key, at INIT and in every send. */
    static final int UD_QKEY = 0x11111111;
    /** The GRH area at the start of every UD receive buffer (ibv_post_recv.3). */
    static final int GRH_BYTES = 40;
    /** The -c check marks one byte per page; rdma-core takes sysconf(_SC_PAGESIZE), 4096 on Linux x86. */
    static final int PAGE_SIZE = 4096;
    /** Give up when nothing completes for this long (rdma-core would poll forever). */
    static final long STALL_NS = TimeUnit.SECONDS.toNanos(30);
    /** Progress is shown on a terminal at most this often. */
    static final long PROGRESS_NS = TimeUnit.SECONDS.toNanos(1);
    /** In -e mode, how long one wait for a CQ event lasts before Ctrl-C and stalls are checked. */
    static final Duration EVENT_WAIT = Duration.ofMillis(100);

    private final PingPong pp;
    private final PingPongOptions o;
    private final PrintStream out;
    private final PrintStream err;
    private final StopSignal stop;
    private final boolean progress;
    final Device dev;
    final boolean ud;
    final boolean srqKind;
    /** uc_pingpong: an RC pair's addresses and data path on UC QPs (no ACKs, so no resends and no linger). */
    final boolean uc;
    final int numQp;
    final int size;
    final Arena arena = Arena.ofShared();
    final Context ctx;
    CompletionChannel channel;
    ProtectionDomain pd;
    MemorySegment buf;
    MemoryRegion mr;
    CompletionQueue cq;
    SharedReceiveQueue srq;
    final QueuePair[] qps;
    AddressHandle ah;
    PortAttributes port;
    int sendFlags = SendFlags.SIGNALED;
    int numCqEvents;
    /** --verify: messages sent with a pattern, echoes compared, echoes that differed. */
    long verifySent;
    long verifyChecked;
    long verifyBad;
    final RecvWorkRequest rwr = new RecvWorkRequest(1);
    final SendWorkRequest swr = new SendWorkRequest(1);
    /** RC: the linger started at the last completion, and when that was; null for UD or a stopped run. */
    Linger linger;
    long lingerFrom;

    PingPongSide(PingPong pp, Device dev) {
        this.pp = pp;
        this.o = pp.o;
        this.out = pp.out;
        this.err = pp.err;
        this.stop = pp.stop;
        this.progress = pp.progress;
        this.ud = o.kind == PingPongOptions.Kind.UD;
        this.uc = o.kind == PingPongOptions.Kind.UC;
        this.srqKind = o.kind == PingPongOptions.Kind.SRQ;
        this.numQp = srqKind ? o.numQp : 1;
        this.size = (int) o.size;
        this.dev = dev;
        this.qps = new QueuePair[numQp];
        try {
            this.ctx = dev.open();
        } catch (VerbsException e) {
            arena.close();
            throw new RunException("Couldn't get context for " + dev.name() + " (" + e.getMessage() + ")");
        }
    }

    int run(ServerSocket listener) {
        init();
        int routs = postRecv(o.rxDepth);
        if (routs < o.rxDepth) {
            throw new RunException("Couldn't post receive (" + routs + ")");
        }
        if (o.events) {
            cq.reqNotify(false);
        }
        try {
            port = ctx.queryPort(o.ibPort);
        } catch (VerbsException e) {
            throw new RunException("Couldn't get port info (" + e.getMessage() + ")");
        }
        boolean ethernet = "Ethernet".equalsIgnoreCase(port.linkLayer());
        if (!ethernet && port.lid() == 0) {
            throw new RunException("Couldn't get local LID");
        }
        Gid gid = o.gidIndex >= 0 ? localGid() : Gid.ZERO;
        PingPongDest[] mine = new PingPongDest[srqKind ? PingPongOptions.MAX_QP : 1];
        java.util.Arrays.fill(mine, PingPongDest.UNUSED);
        for (int i = 0; i < numQp; i++) {
            int psn = ThreadLocalRandom.current().nextInt() & 0xFFFFFF;
            mine[i] = new PingPongDest(port.lid(), qps[i].qpNum(), psn, gid);
            out.println("  local address:  LID 0x" + CFormat.hex(port.lid(), 4) + ", QPN 0x"
                    + CFormat.hex(mine[i].qpn(), 6) + ", PSN 0x" + CFormat.hex(psn, 6) + (ud ? ": GID " : ", GID ")
                    + PingPongDest.ntop(gid));
        }
        PingPongDest[] remote;
        try {
            if (o.serverName != null) {
                remote = PingPongExchange.client(o.serverName, o.port, mine, stop);
            } else {
                ServerSocket ss = listener != null ? listener : PingPongExchange.listen(o.port);
                remote = PingPongExchange.serve(ss, mine, r -> {
                    try {
                        connect(mine, r);
                    } catch (RunException e) {
                        throw new RunException(e.getMessage() + "\nCouldn't connect to remote QP");
                    }
                }, stop);
            }
        } catch (PingPongExchange.ExchangeException e) {
            throw new RunException(e.getMessage());
        }
        for (int i = 0; i < numQp; i++) {
            PingPongDest r = remote[i];
            out.println("  remote address: LID 0x" + CFormat.hex(r.lid() & 0xFFFFFFFFL, 4) + ", QPN 0x"
                    + CFormat.hex(r.qpn() & 0xFFFFFFFFL, 6) + ", PSN 0x" + CFormat.hex(r.psn() & 0xFFFFFFFFL, 6)
                    + ", GID " + PingPongDest.ntop(r.gid()));
        }
        if (o.serverName != null) {
            connect(mine, remote);
        }
        int rc = dataPhase(remote, routs);
        pp.dataDone.countDown();
        if (rc == 0 && linger != null) {
            linger();
        }
        return rc;
    }

    /**
     * Keeps the RC QPs alive after the last completion before pp_close_ctx destroys them. Each side's
     * last event can be a receive whose ACK is still on the wire: the client's receive of the server's
     * last SEND, or the server's of the client's last SEND while the client waits for its ACK. If that
     * ACK is lost, the peer resends, and only a live QP answers a duplicate (IBA 9.9.2). rdma-core
     * destroys at once, so an ibv_rc_pingpong server on rdma_rxe, which resends forever with
     * retry_cnt 7, never finished when our client's last ACK was lost under netem loss
     * (docs/interop.md). The linger ends once no packet has arrived for 3 local ACK timeouts
     * (4.096 us * 2^14 each, the timeout both ends set), capped ({@link Linger}), or at once when the
     * peer runs in this process (--loopback) and has finished its data phase: then it resends nothing.
     * The linger counts from the last completion (see {@link #startLinger}); the report is printed in
     * between, as rdma-core prints it.
     */
    private void linger() {
        out.flush();
        PingPong p = pp.peer;
        Linger l = linger;
        Linger.End end = l.await(() -> p != null && p.dataDone.getCount() == 0 || stop.stopped());
        pp.lastLinger = l;
        if (l.arrivals() > 0 || end == Linger.End.CAP) {
            // Only under loss: then it shows that the linger answered the peer's resends.
            err.println(o.kind.command() + ": kept the QP" + (numQp > 1 ? "s " : " ")
                    + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - lingerFrom) + " ms after the last completion; "
                    + l.arrivals() + " packet(s) arrived meanwhile (resends whose ACK was lost)"
                    + (end == Linger.End.CAP ? "; stopped at the cap" : ""));
        }
    }

    /** pp_init_ctx: channel, PD, buffer, MR, CQ, SRQ, QPs in INIT. */
    private void init() {
        if (ud) {
            PortAttributes pa;
            try {
                pa = ctx.queryPort(o.ibPort);
            } catch (VerbsException e) {
                throw new RunException("Unable to query port info for port " + o.ibPort + " (" + e.getMessage() + ")");
            }
            int mtu = pa.activeMtu().bytes();
            if (size > mtu) {
                throw new RunException("Requested size larger than port MTU (" + mtu + ")");
            }
        }
        if (o.events) {
            channel = attempt("Couldn't create completion channel", ctx::createCompChannel);
        }
        pd = attempt("Couldn't allocate PD", ctx::allocPd);
        long bytes = ud ? size + (long) GRH_BYTES : size;
        buf = arena.allocate(bytes, PAGE_SIZE);
        buf.fill((byte) 0x7b);
        mr = attempt("Couldn't register MR", () -> pd.regMr(buf, AccessFlag.of(AccessFlag.LOCAL_WRITE)));
        int cqe = o.rxDepth + (srqKind ? numQp : 1);
        cq = attempt("Couldn't create CQ", () -> ctx.createCq(cqe, channel, 0));
        if (srqKind) {
            srq = attempt("Couldn't create SRQ", () -> pd.createSrq(o.rxDepth, 1));
        }
        for (int i = 0; i < numQp; i++) {
            QpInitAttributes ia = new QpInitAttributes().type(ud ? QpType.UD : uc ? QpType.UC : QpType.RC).sendCq(cq).recvCq(cq)
                    .srq(srq).cap(new QpCapabilities(1, srqKind ? 0 : o.rxDepth, 1, srqKind ? 0 : 1, 0));
            final int idx = i;
            qps[i] = attempt(srqKind ? "Couldn't create QP[" + idx + "]" : "Couldn't create QP",
                    () -> pd.createQp(ia));
            // As rdma-core: send inline when the granted inline size covers a message.
            if (qps[i].cap().maxInlineData() >= size) {
                sendFlags |= SendFlags.INLINE;
            }
        }
        for (int i = 0; i < numQp; i++) {
            QpAttributes a = new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(o.ibPort);
            if (ud) {
                a.qkey(UD_QKEY);
            } else {
                a.accessFlags(0);
            }
            try {
                qps[i].modify(a);
            } catch (VerbsException e) {
                throw new RunException((srqKind ? "Failed to modify QP[" + i + "] to INIT" : "Failed to modify QP to INIT")
                        + " (" + e.getMessage() + ")");
            }
        }
        rwr.wrId(RECV_WRID).singleSge(buf.address(), ud ? size + GRH_BYTES : size, mr.lkey());
        swr.wrId(SEND_WRID).opcode(WrOpcode.SEND).sendFlags(sendFlags)
                .singleSge(buf.address() + (ud ? GRH_BYTES : 0), size, mr.lkey());
    }

    /** ibv_query_gid for -g, with the port's GID table in the error. */
    private Gid localGid() {
        String what = o.kind == PingPongOptions.Kind.RC || uc ? "can't read sgid of index " + o.gidIndex
                : "Could not get local gid for gid index " + o.gidIndex;
        Gid g;
        if (o.gidIndex >= port.gidTblLen()) {
            throw new RunException(what + " (" + dev.name() + " port " + o.ibPort + " has " + port.gidTblLen()
                    + " GID entries)\n" + gidTable());
        }
        try {
            g = ctx.queryGid(o.ibPort, o.gidIndex);
        } catch (VerbsException e) {
            throw new RunException(what + " (" + e.getMessage() + ")\n" + gidTable());
        }
        if (g.equals(Gid.ZERO)) {
            throw new RunException(what + " (entry " + o.gidIndex + " of " + dev.name() + " port " + o.ibPort
                    + " is empty)\n" + gidTable());
        }
        return g;
    }

    private String gidTable() {
        StringBuilder sb = new StringBuilder("GID table of ").append(dev.name()).append(" port ").append(o.ibPort)
                .append(':');
        int shown = 0;
        for (int i = 0; i < port.gidTblLen(); i++) {
            Gid g;
            try {
                g = ctx.queryGid(o.ibPort, i);
            } catch (VerbsException e) {
                continue;
            }
            if (!g.equals(Gid.ZERO)) {
                sb.append("\n\tGID[").append(CFormat.right(Integer.toString(i), 3)).append("]:\t")
                        .append(PingPongDest.ntop(g));
                shown++;
            }
        }
        if (shown == 0) {
            sb.append(" no GIDs");
        }
        return sb.toString();
    }

    /** pp_connect_ctx: RTR and RTS (rc/srq with the peer's address; ud by state, then an AH). */
    private void connect(PingPongDest[] mine, PingPongDest[] remote) {
        // rdma-core uses a GRH only when the peer sent a GID with a non-zero interface id; srq
        // looks at the first address for all QPs.
        Gid dgid = remote[0].gid();
        boolean global = dgid.lo() != 0;
        boolean ethernet = "Ethernet".equalsIgnoreCase(port.linkLayer());
        AhAttributes av = new AhAttributes().dlid(remote[0].lid() & 0xFFFF).sl(o.sl).srcPathBits(0)
                .portNum(o.ibPort).global(global);
        if (global) {
            av.hopLimit(ud ? 64 : 1).dgid(dgid).sgidIndex(Math.max(o.gidIndex, 0));
        }
        // On RoCE every packet carries a GRH (IBA annex A16/A17), so an address without one cannot be
        // used: Linux refuses the RTR transition (observed with rdma_rxe: ibv_rc_pingpong without -g
        // fails "Failed to modify QP to RTR"). The tool says so itself, whatever the device enforces.
        String noGrh = "(the link layer of " + dev.name() + " port " + o.ibPort + " is Ethernet (RoCE), where every"
                + " packet carries a GRH (IBA annex A16/A17), but the peer sent no GID: run both sides with"
                + " -g <gid index>; 'rdma4j devinfo -v' lists the GID table)";
        if (ud) {
            modify(0, new QpAttributes().state(QpState.RTR), "RTR");
            modify(0, new QpAttributes().state(QpState.RTS).sqPsn(mine[0].psn()), "RTS");
            if (ethernet && !global) {
                throw new RunException("Failed to create AH " + noGrh);
            }
            try {
                ah = pd.createAh(av);
            } catch (VerbsException e) {
                throw new RunException("Failed to create AH (" + e.getMessage() + ")");
            }
            swr.ah(ah).remoteQpn(remote[0].qpn()).remoteQkey(UD_QKEY);
            return;
        }
        for (int i = 0; i < numQp; i++) {
            if (ethernet && !global) {
                throw new RunException((srqKind ? "Failed to modify QP[" + i + "] to RTR " : "Failed to modify QP to RTR ")
                        + noGrh);
            }
            av.dlid(remote[i].lid() & 0xFFFF);
            if (uc) {
                // uc_pingpong's pp_connect_ctx: RTR with the address, MTU, QPN and PSN only, RTS with the
                // SQ PSN only (UC has no RDMA READ/atomic depths, RNR or ACK timers).
                modify(i, new QpAttributes().state(QpState.RTR).av(av).pathMtu(Mtu.ofBytes(o.mtu))
                        .destQpNum(remote[i].qpn()).rqPsn(remote[i].psn()), "RTR");
                modify(i, new QpAttributes().state(QpState.RTS).sqPsn(mine[i].psn()), "RTS");
                continue;
            }
            modify(i, new QpAttributes().state(QpState.RTR).av(av).pathMtu(Mtu.ofBytes(o.mtu))
                    .destQpNum(remote[i].qpn()).rqPsn(remote[i].psn()).maxDestRdAtomic(1).minRnrTimer(12), "RTR");
            // retry_cnt 6, not rdma-core's 7: rxe (and the soft device) retry forever on 7, so a dead peer
            // would hang us instead of failing with RETRY_EXC_ERR (docs/perftest.md)
            modify(i, new QpAttributes().state(QpState.RTS).timeout(14).retryCnt(6).rnrRetry(7)
                    .sqPsn(mine[i].psn()).maxRdAtomic(1), "RTS");
        }
    }

    private void modify(int i, QpAttributes a, String state) {
        try {
            qps[i].modify(a);
        } catch (VerbsException e) {
            throw new RunException((srqKind ? "Failed to modify QP[" + i + "] to " : "Failed to modify QP to ") + state
                    + " (" + e.getMessage() + ")");
        }
    }

    /** pp_post_recv: up to n receives, on the SRQ or the QP; returns how many were posted. */
    private int postRecv(int n) {
        int i = 0;
        for (; i < n; i++) {
            boolean ok = srqKind ? srq.postRecv(rwr) : qps[0].postRecv(rwr);
            if (!ok) {
                break;
            }
        }
        return i;
    }

    /** The timed loop, then the report. */
    private int dataPhase(PingPongDest[] remote, int routsStart) {
        long iters = o.iters;
        int routs = routsStart;
        int[] pending = new int[numQp];
        boolean client = o.serverName != null;
        if (client && o.validate) {
            int base = ud ? GRH_BYTES : 0;
            for (int i = 0; i < size; i += PAGE_SIZE) {
                // rdma-core writes i / page_size % sizeof(char), which is always 0.
                buf.set(java.lang.foreign.ValueLayout.JAVA_BYTE, base + i, (byte) 0);
            }
        }
        boolean verify = client && o.verify;
        long seed = 0;
        if (verify) {
            seed = System.nanoTime() ^ (ProcessHandle.current().pid() << 32);
            out.println("verifying every echo: pattern seed 0x" + CFormat.hex(seed, 16));
        }
        for (int i = 0; i < numQp; i++) {
            pending[i] = RECV_WRID;
            if (client) {
                if (verify) {
                    EchoPattern.fill(buf, verifyBase(), size, seed, verifySent);
                    verifySent++;
                }
                postSend(i);
                pending[i] |= SEND_WRID;
            }
        }
        WorkCompletion[] wcs = new WorkCompletion[srqKind ? numQp + o.rxDepth : 2];
        for (int i = 0; i < wcs.length; i++) {
            wcs[i] = new WorkCompletion();
        }
        int threshold = srqKind ? numQp : 1;
        long rcnt = 0;
        long scnt = 0;
        long start = System.nanoTime();
        long lastCompletion = start;
        long nextProgress = start + PROGRESS_NS;
        boolean interrupted = false;
        int idlePolls = 0;
        pp.dataPhase.countDown();
        while (rcnt < iters || scnt < iters) {
            int ne;
            if (o.events) {
                CompletionQueue ev = channel.getCqEvent(EVENT_WAIT);
                if (ev == null) {
                    ne = 0;
                } else {
                    numCqEvents++;
                    if (ev != cq) {
                        throw new RunException("CQ event for unknown CQ " + ev);
                    }
                    cq.reqNotify(false);
                    ne = cq.poll(wcs, wcs.length);
                }
            } else {
                ne = cq.poll(wcs, wcs.length);
            }
            if (ne == 0) {
                // Polling as rdma-core does, but watching for Ctrl-C, stalls and the progress clock.
                if (stop.stopped()) {
                    interrupted = true;
                    break;
                }
                long now = System.nanoTime();
                if (now - lastCompletion > STALL_NS) {
                    throw new RunException("no completion for " + TimeUnit.NANOSECONDS.toSeconds(STALL_NS)
                            + " seconds (sent " + scnt + ", received " + rcnt + " of " + iters
                            + "): is the peer still running?");
                }
                if (progress && now >= nextProgress) {
                    showProgress(Math.min(rcnt, scnt), iters, now - start);
                    nextProgress = now + PROGRESS_NS;
                }
                // Busy polling as rdma-core, but giving the core away once the wait is long: the
                // peer (in loopback its thread, between processes its poller) may need it to answer.
                idlePolls = BusyPoll.idle(idlePolls);
                continue;
            }
            idlePolls = 0;
            lastCompletion = System.nanoTime();
            for (int i = 0; i < ne; i++) {
                WorkCompletion wc = wcs[i];
                if (wc.status() != WcStatus.SUCCESS) {
                    throw new RunException("Failed status " + wc.status().description() + " ("
                            + wc.status().value() + ") for wr_id " + (int) wc.wrId());
                }
                int q = 0;
                if (srqKind) {
                    q = findQp(wc.qpNum());
                    if (q < 0) {
                        throw new RunException("Couldn't find QPN " + CFormat.hex(wc.qpNum(), 6));
                    }
                }
                switch ((int) wc.wrId()) {
                    case SEND_WRID -> ++scnt;
                    case RECV_WRID -> {
                        if (--routs <= threshold) {
                            routs += postRecv(o.rxDepth - routs);
                            if (routs < o.rxDepth) {
                                throw new RunException("Couldn't post receive (" + routs + ")");
                            }
                        }
                        ++rcnt;
                        if (verify) {
                            checkEcho(seed, verifySent - 1);
                        }
                    }
                    default -> throw new RunException("Completion for unknown wr_id " + (int) wc.wrId());
                }
                pending[q] &= ~(int) wc.wrId();
                if (scnt < iters && pending[q] == 0) {
                    if (verify) {
                        EchoPattern.fill(buf, verifyBase(), size, seed, verifySent);
                        verifySent++;
                    }
                    postSend(q);
                    pending[q] = RECV_WRID | SEND_WRID;
                }
            }
            if (progress && lastCompletion >= nextProgress) {
                showProgress(Math.min(rcnt, scnt), iters, lastCompletion - start);
                nextProgress = lastCompletion + PROGRESS_NS;
            }
        }
        long end = System.nanoTime();
        if (!ud && !uc && !interrupted) {
            startLinger(end);
        }
        if (progress) {
            err.print("\r" + " ".repeat(60) + "\r");
            err.flush();
        }
        long done = interrupted ? Math.min(rcnt, scnt) : iters;
        if (interrupted) {
            out.flush();
            err.println("interrupted after " + done + " of " + iters + " iters (sent " + scnt + ", received " + rcnt
                    + "); measured so far:");
        }
        out.print(PingPong.report(size, done, (end - start) / 1000));
        if (!client && o.validate) {
            int base = ud ? GRH_BYTES : 0;
            for (int i = 0; i < size; i += PAGE_SIZE) {
                if (buf.get(java.lang.foreign.ValueLayout.JAVA_BYTE, base + i) != 0) {
                    out.println("invalid data in page " + i / PAGE_SIZE);
                }
            }
        }
        if (verify) {
            out.println("verified " + verifyChecked + " echoes of " + size + " bytes: "
                    + (verifyBad == 0 ? "all equal to what was sent" : verifyBad + " differed"));
            if (verifyBad != 0 && !interrupted) {
                return 1;
            }
        }
        return interrupted ? 130 : 0;
    }

    /**
     * Starts the linger's clock and counter at the last completion: printing the report can take
     * longer than the peer's retransmit timeout (a cold JVM under load), and a resend answered then
     * is part of the linger too.
     */
    private void startLinger(long now) {
        lingerFrom = now;
        linger = Linger.forPeerOf(ctx, o.ibPort, qps[0].query().timeout(), now);
    }

    /** Where the message starts in the buffer: UD receives put the 40-byte GRH first. */
    private long verifyBase() {
        return ud ? GRH_BYTES : 0;
    }

    /** --verify: the echo just received must be the message sent last (the only one outstanding). */
    private void checkEcho(long seed, long msg) {
        verifyChecked++;
        long at = EchoPattern.mismatch(buf, verifyBase(), size, seed, msg);
        if (at >= 0) {
            verifyBad++;
            if (verifyBad <= 5) {
                byte got = buf.get(java.lang.foreign.ValueLayout.JAVA_BYTE, verifyBase() + at);
                out.println("invalid data in echo " + msg + " at byte " + at + ": got 0x"
                        + CFormat.hex(got & 0xFF, 2) + ", sent 0x"
                        + CFormat.hex(EchoPattern.expected(seed, msg, at) & 0xFF, 2));
            }
        }
    }

    private void postSend(int q) {
        if (!qps[q].postSend(swr)) {
            throw new RunException("Couldn't post send (" + swr.postError() + ")");
        }
    }

    private int findQp(int qpn) {
        for (int i = 0; i < numQp; i++) {
            if (qps[i].qpNum() == qpn) {
                return i;
            }
        }
        return -1;
    }

    private void showProgress(long done, long iters, long ns) {
        double usec = ns / 1000.0;
        err.print("\r  " + done + "/" + iters + " iters, " + CFormat.fixed(ns / 1e9, 1) + " s, "
                + CFormat.fixed(done == 0 ? 0 : usec / done, 2) + " usec/iter   ");
        err.flush();
    }

    /** pp_close_ctx, in its order; acknowledges CQ events first (ibv_ack_cq_events). */
    @Override
    public void close() {
        RuntimeException first = null;
        if (cq != null && numCqEvents > 0) {
            cq.ackEvents(numCqEvents);
        }
        for (QueuePair qp : qps) {
            first = closeQuietly(qp, first);
        }
        first = closeQuietly(srq, first);
        first = closeQuietly(cq, first);
        first = closeQuietly(mr, first);
        first = closeQuietly(ah, first);
        first = closeQuietly(pd, first);
        first = closeQuietly(channel, first);
        first = closeQuietly(ctx, first);
        arena.close();
        if (first != null) {
            throw first;
        }
    }

    private static RuntimeException closeQuietly(AutoCloseable c, RuntimeException first) {
        if (c == null) {
            return first;
        }
        try {
            c.close();
            return first;
        } catch (RuntimeException e) {
            return first != null ? first : e;
        } catch (Exception e) {
            return first != null ? first : new RuntimeException(e);
        }
    }

    private static <T> T attempt(String what, java.util.function.Supplier<T> create) {
        try {
            return create.get();
        } catch (VerbsException e) {
            throw new RunException(what + " (" + e.getMessage() + ")");
        }
    }
}
