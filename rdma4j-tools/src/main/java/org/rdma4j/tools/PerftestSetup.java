// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;

import org.rdma4j.tools.Perftest.RunException;
import org.rdma4j.tools.PerftestOptions.Verb;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.Gid;
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
import org.rdma4j.verbs.VerbsException;

/**
 * How a {@link PerftestSide} gets its peer and its QPs: the exchange (perftest's TCP connection, or with
 * {@code -R} an rdma_cm connection), the PD, CQs, buffers and QPs (made here, or with {@code -R} by rdma_cm),
 * and the hand-shakes around {@code ctx_connect} that trade the QPs' addresses and move them to RTS.
 */
final class PerftestSetup {
    /**
     * QPs of in-process devices that this JVM's tools have open ("GID/QPN"): an in-process device reaches
     * only these, so a peer QP outside the set means the peer runs in another process.
     */
    private static final Set<String> IN_PROCESS_QPS = ConcurrentHashMap.newKeySet();

    private final PerftestSide side;
    private final PerftestOptions o;
    private final StopSignal stop;

    PerftestSetup(PerftestSide side) {
        this.side = side;
        this.o = side.o;
        this.stop = side.stop;
    }

    /** Forgets a QP of this JVM when its side closes it. */
    static void forget(PerftestFormat.Dest d) {
        IN_PROCESS_QPS.remove(qpKey(d));
    }

    /** perftest's TCP exchange: the client connects to the server's host and port; the server accepts. */
    void connectTcp() throws IOException {
        if (side.client) {
            side.ch = PerftestWire.Channel.connect(side.host, side.port, side.timeoutMs);
        } else {
            side.ch = PerftestWire.Channel.accept(side.port, side.acceptTimeoutMs, p -> {
                if (side.boundPort != null) {
                    side.boundPort.complete(p);
                }
            }, stop);
            side.ch.timeoutMs(side.timeoutMs);
        }
    }

    /**
     * -R: the exchange's rdma_cm connection (rdma_client_connect / rdma_server_connect) on the test's port.
     * The client connects from {@code --source_ip}, else from the address of {@code -d}'s device when one
     * was named (under --loopback: always), else from where the host's routing points; the server listens on
     * {@code --source_ip}, on its device's address under --loopback, else on :: (IPv4 and IPv6 clients), on an
     * iWARP device 0.0.0.0 (as perftest).
     */
    void connectControl(Device dev) throws IOException {
        org.rdma4j.verbs.cm.RdmaCm cm = org.rdma4j.verbs.cm.RdmaCm.system();
        if (side.client) {
            java.net.InetAddress dst;
            try {
                dst = java.net.InetAddress.getByName(side.host);
            } catch (java.net.UnknownHostException e) {
                throw new RunException("Problem in resolving basic address and port: " + side.host + " (" + e.getMessage()
                        + ")");
            }
            java.net.InetAddress src = sourceAddress(cm, dev, dst);
            side.control = PerftestCm.Control.connect(cm, src, new java.net.InetSocketAddress(dst, side.port), o.retryCount,
                    stop);
            side.cmBind = new java.net.InetSocketAddress(dst, side.port);
            side.cmSource = src;
        } else {
            // perftest binds 0.0.0.0 (AF_INET only: rdma_cm makes an IPv4 wildcard afonly); "::" takes IPv4
            // and IPv6 clients alike (afonly 0, as net.ipv6.bindv6only's default), so IPv6 GIDs work too.
            // Not on iWARP: siw (6.1) listens on a dual-stack TCP socket and reports an IPv4 client's
            // connection with its socket's local address, ::ffff:a.b.c.d (siw_cm.c getname_local), which
            // iw_conn_req_handler cannot translate (cma.c rdma_translate_ip: ipv6_chk_addr finds no such
            // address), so the kernel rejects every IPv4 client (ECONNRESET) before the listener sees it
            // (seen in the VM with Linux's ib_write_bw -R against ours on siw0). There, 0.0.0.0 as perftest.
            boolean iwarp = dev != null && dev.transportType() == org.rdma4j.verbs.TransportType.IWARP;
            java.net.InetAddress bind = o.sourceIp != null ? resolve(o.sourceIp)
                    : o.loopback ? PerftestCm.addressOf(cm, dev.name(), null)
                    : java.net.InetAddress.ofLiteral(iwarp ? "0.0.0.0" : "::");
            if (bind == null) {
                throw new RunException(dev.name() + " has no address for rdma_cm (" + cm.addresses() + ")");
            }
            side.control = PerftestCm.Control.accept(cm, new java.net.InetSocketAddress(bind, side.port), p -> {
                side.cmBind = new java.net.InetSocketAddress(bind, p);
                if (side.boundPort != null) {
                    side.boundPort.complete(p);
                }
            }, side.acceptTimeoutMs, o.retryCount, stop);
        }
        side.control.timeoutMs(side.timeoutMs);
        side.ch = new PerftestWire.Channel(side.control, side.client);
    }

    private java.net.InetAddress sourceAddress(org.rdma4j.verbs.cm.RdmaCm cm, Device dev, java.net.InetAddress dst) {
        if (o.sourceIp != null) {
            return resolve(o.sourceIp);
        }
        if (side.devName != null || o.loopback) {
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
    void connectTestQps(PortAttributes pa) throws IOException {
        PerftestFormat.Dest zero = new PerftestFormat.Dest(0, 0, 0, 0, 0, new byte[16], 0);
        org.rdma4j.verbs.cm.RdmaCm cm = org.rdma4j.verbs.cm.RdmaCm.system();
        if (!side.client) {
            // listening before the hand-shake: the client connects right after it (see TestQps.listen)
            side.cmQps = PerftestCm.TestQps.listen(cm, side.cmBind, o.numQps);
        }
        side.ch.handShake(zero, side.withGid);
        int n = o.numQps;
        int depth = o.verb == Verb.READ || o.verb == Verb.ATOMIC ? side.outReads : 0;
        QpType type = QpType.valueOf(o.connection);
        PerftestCm.QpFactory f = new PerftestCm.QpFactory() {
            @Override
            public void resources(Context c) {
                side.rctx = c;
                allocate(n);
            }

            @Override
            public QpInitAttributes qpAttributes(int i) {
                return new QpInitAttributes().type(type).sendCq(side.sendCq).recvCq(side.recvCq)
                        .cap(new QpCapabilities(Math.max(side.txDepth, 1), o.verb == Verb.SEND ? side.rxDepth : 1, 1, 1, side.inline));
            }

            @Override
            public ProtectionDomain pd() {
                return side.pd;
            }
        };
        if (side.client) {
            side.cmQps = PerftestCm.TestQps.connect(cm, side.cmSource, side.cmBind, n, depth, o.retryCount, f, stop);
        } else {
            side.cmQps.acceptAll(n, depth, o.retryCount, f, stop, side.control);
        }
        side.qps = side.cmQps.qps();
        if (!side.client && o.connection.equals("RC")) {
            for (QueuePair q : side.qps) {
                try {
                    q.modify(new QpAttributes().minRnrTimer(12)); // perftest: MIN_RNR_TIMER after rdma_accept
                } catch (VerbsException e) {
                    // perftest ignores ibv_modify_qp's result here
                }
            }
        }
        org.rdma4j.verbs.cm.CmRoute route = side.cmQps.first().route();
        side.gidIndex = route != null ? route.sgidIndex() : Math.max(side.gidIndex, 0);
        side.withGid = true;
        byte[] gid = side.rctx.queryGid(side.cmQps.first().portNum(), side.gidIndex).toBytes();
        for (int i = 0; i < n; i++) {
            int psn = ThreadLocalRandom.current().nextInt() & 0xFFFFFF; // printed, as perftest: the CM chose the QP's
            side.my[i] = new PerftestFormat.Dest(pa.lid(), side.qps[i].qpNum(), psn, side.mrs[i].rkey(), side.mrs[i].address() + side.bufSize, gid,
                    side.outReads);
        }
        side.ch.handShake(zero, side.withGid);
    }

    /** The PD, CQs and the buffers of {@code n} QPs on {@link PerftestSide#rctx}. */
    private void allocate(int n) {
        side.arena = Arena.ofShared();
        side.pd = side.rctx.allocPd();
        side.sendCq = side.rctx.createCq(Math.max(side.txDepth * n, 1), null, 0);
        side.recvCq = side.rctx.createCq(Math.max((o.verb == Verb.SEND ? side.rxDepth : 1) * n, 1), null, 0);
        side.qps = new QueuePair[n];
        side.mrs = new MemoryRegion[n];
        side.my = new PerftestFormat.Dest[n];
        side.rem = new PerftestFormat.Dest[n];
        for (int i = 0; i < n; i++) {
            // [send area | receive area]: the peer writes into, reads from and does atomics on the second.
            MemorySegment buf = side.arena.allocate(2 * side.bufSize, PerftestWire.CYCLE_BUFFER);
            for (long b = 0; b < side.bufSize; b += 8) {
                buf.set(ValueLayout.JAVA_LONG_UNALIGNED, b, 0x7b7b7b7b7b7b7b7bL ^ b);
            }
            side.mrs[i] = side.pd.regMr(buf, AccessFlag.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE,
                    AccessFlag.REMOTE_READ, AccessFlag.REMOTE_ATOMIC));
        }
    }

    void createResources(PortAttributes pa) {
        int n = o.numQps;
        side.rctx = side.ctx;
        allocate(n);
        byte[] gid = side.withGid ? side.ctx.queryGid(o.ibPort, side.gidIndex).toBytes() : new byte[16];
        QpType type = QpType.valueOf(o.connection);
        for (int i = 0; i < n; i++) {
            side.qps[i] = side.pd.createQp(new QpInitAttributes().type(type).sendCq(side.sendCq).recvCq(side.recvCq)
                    .cap(new QpCapabilities(Math.max(side.txDepth, 1), o.verb == Verb.SEND ? side.rxDepth : 1, 1, 1,
                            side.inline)));
            int psn = ThreadLocalRandom.current().nextInt() & 0xFFFFFF;
            side.my[i] = new PerftestFormat.Dest(pa.lid(), side.qps[i].qpNum(), psn, side.mrs[i].rkey(),
                    side.mrs[i].address() + side.bufSize, gid, side.outReads);
            if (inProcess()) {
                IN_PROCESS_QPS.add(qpKey(side.my[i]));
            }
        }
    }

    private boolean inProcess() {
        return "soft".equals(side.ctx.device().providerName());
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
                    + side.ctx.device().name() + " is an in-process device: it reaches only devices of this JVM. A server"
                    + " and a client in two processes need a network device (RoCE); or use --loopback.");
        }
    }

    /** The hand-shakes around ctx_connect, in each tool's order, and the address lines. */
    void exchangeKeysAndConnect(Mtu mtu) throws IOException {
        int n = o.numQps;
        if (o.lat && o.verb != Verb.SEND) {
            // write_lat.c, read_lat.c, atomic_lat.c hand-shake once on QP 0 before the per-QP round.
            side.rem[0] = side.ch.handShake(side.my[0], side.withGid);
        }
        for (int i = 0; i < n; i++) {
            side.rem[i] = side.ch.handShake(side.my[i], side.withGid);
        }
        if (side.credit != null) {
            side.credit.peer(side.rem); // ctx_set_credit_wqes: "after the remote keys have been exchanged"
        }
        if (!o.rdmaCm) { // rdma_cm moved the QPs to RTS already
            for (int i = 0; i < n; i++) {
                checkReachable(side.rem[i]);
                connect(side.qps[i], side.my[i], side.rem[i], mtu);
            }
        }
        if (o.verb == Verb.SEND) {
            // send_bw.c / send_lat.c: one hand-shake after ctx_connect, before the address lines.
            side.ch.handShake(side.my[0], side.withGid);
        }
        if (side.printing()) {
            for (int i = 0; i < n; i++) {
                side.text.print(PerftestFormat.address("local", side.my[i], side.withGid, o.verb));
            }
        }
        for (int i = 0; i < n; i++) {
            side.rem[i] = side.ch.handShake(side.my[i], side.withGid);
            if (side.printing()) {
                side.text.print(PerftestFormat.address("remote", side.rem[i], side.withGid, o.verb));
            }
        }
        if (o.verb != Verb.SEND) {
            // "An additional handshake is required after moving qp to RTR."
            side.ch.handShake(side.my[0], side.withGid);
        }
        side.text.flush();
    }

    /** perftest ctx_modify_qp_to_init / _rtr / _rts for RC and UC. */
    private void connect(QueuePair qp, PerftestFormat.Dest me, PerftestFormat.Dest peer, Mtu mtu) {
        boolean rdAtomic = o.verb == Verb.READ || o.verb == Verb.ATOMIC;
        qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(o.ibPort)
                .accessFlags(AccessFlag.of(AccessFlag.REMOTE_WRITE, AccessFlag.LOCAL_WRITE,
                        AccessFlag.REMOTE_READ, AccessFlag.REMOTE_ATOMIC)));
        AhAttributes av = new AhAttributes().dlid(peer.lid()).sl(0).srcPathBits(0).portNum(o.ibPort);
        if (side.withGid) {
            av.global(true).dgid(Gid.of(peer.gid())).sgidIndex(side.gidIndex).hopLimit(0xFF).trafficClass(0);
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
}
