// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.rdma4j.common.RdmaEvents;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.CmOption;
import org.rdma4j.verbs.cm.CmRoute;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.IbSocketAddress;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.spi.CmEventInfo;
import org.rdma4j.verbs.spi.CmEventSink;
import org.rdma4j.verbs.spi.CmIdSpi;

/**
 * An rdma_cm ID of the user-space CM ({@code struct rdma_id_private} of Linux's cma.c, with the QP
 * handling librdmacm adds in user space): address binding and resolution on the ports' GIDs, the route
 * computed locally as on RoCE, the cma header, the IB CM communication it drives, and the event sequence
 * Linux delivers. Every method takes the CM lock.
 */
final class UserCmId implements CmIdSpi {
    private static final System.Logger LOG = System.getLogger("org.rdma4j.cm");

    /** {@code enum rdma_cm_state}. */
    enum State { IDLE, ADDR_QUERY, ADDR_RESOLVED, ROUTE_QUERY, ROUTE_RESOLVED, CONNECT, DISCONNECT, ADDR_BOUND, LISTEN,
        DEVICE_REMOVAL, DESTROYING }

    final UserCm cm;
    volatile CmEventSink sink;
    final PortSpace ps;
    final QpType qpType;
    /** For the ID of a connection request: the listener. */
    private final UserCmId listener;
    State state = State.IDLE;
    SocketAddress src;
    SocketAddress dst;
    /** The device port of the ID, null while unknown (or for a wildcard listener). */
    MadPort port;
    private UserCm.BindList bindList;
    PathRec path;
    IbCmId ib;
    private final List<IbCmId> listens = new ArrayList<>();
    QueuePair qp;
    private int qpNum;
    private boolean srq;
    private final int seqNum;
    int qkey;
    int tos;
    boolean tosSet;
    int ackTimeout;
    boolean ackTimeoutSet;
    private boolean reuseaddr;
    int afonly = -1;
    private int cmResponseTimeout = CmMsg.CMA_CM_RESPONSE_TIMEOUT;
    int maxCmRetries = CmMsg.CMA_MAX_CM_RETRIES;
    /** The peer's view of depths from the CONNECT_REQUEST (what librdmacm keeps to apply MAX on accept). */
    int reqResponderResources;
    int reqInitiatorDepth;
    /** Whether the QP was moved for an accept already (librdmacm's second accept fails moving it). */
    private boolean accepted;

    UserCmId(UserCm cm, CmEventSink sink, PortSpace ps, QpType qpType, UserCmId listener) {
        this.cm = cm;
        this.sink = sink;
        this.ps = ps;
        this.qpType = qpType;
        this.listener = listener;
        this.seqNum = cm.randomPsn();
    }

    void post(CmEventInfo e) {
        CmEventSink s = sink;
        if (s != null && state != State.DESTROYING) {
            recordEvent(e);
            s.post(e);
        }
    }

    /** The JFR event {@code org.rdma4j.CmEvent} of an rdma_cm event this ID delivers (docs/observability.md). */
    void recordEvent(CmEventInfo e) {
        RdmaEvents.cmEvent(port == null ? null : port.device.name(), e.type().name(), String.valueOf(src),
                String.valueOf(dst), qpNum, e.status());
    }

    private static VerbsException inval(String msg) {
        return new VerbsException(Errno.EINVAL, msg);
    }

    // ------------------------------------------------------------------ bind

    @Override
    public void bind(SocketAddress address) {
        cm.lock.lock();
        try {
            if (state != State.IDLE) {
                throw inval("rdma_bind_addr: the CM ID is bound already");
            }
            bindLocked(address);
            state = State.ADDR_BOUND;
        } finally {
            cm.lock.unlock();
        }
    }

    /** {@code rdma_bind_addr}: the device of a specific address, then the port ({@code cma_get_port}). */
    private void bindLocked(SocketAddress address) {
        InetAddress ip = ipOf(address);
        MadPort p = null;
        if (ip != null) {
            p = cm.portOwning(ip);
            if (p == null) {
                throw new VerbsException(Errno.EADDRNOTAVAIL, "rdma_bind_addr: no device of this CM owns "
                        + ip.getHostAddress() + "; its addresses: " + cm.addresses());
            }
            cm.start(p);
        }
        if (afonly < 0) {
            afonly = address instanceof InetSocketAddress i && i.getAddress() instanceof Inet4Address ? 1 : 0;
        }
        if (address instanceof IbSocketAddress ib) {
            long sid = ib.serviceId();
            if (sid == 0) {
                sid = PortSpace.IB.serviceId(cm.anyPort(PortSpace.IB));
            }
            UserCm.BindList bl = cm.ibBindList(sid);
            checkPort(bl, ip);
            bindList = cm.addIbBinding(sid, this);
            src = new IbSocketAddress(ib.gid(), sid, ib.pkey());
        } else {
            InetSocketAddress in = (InetSocketAddress) address;
            int portNo = in.getPort() == 0 ? cm.anyPort(ps) : in.getPort();
            checkPort(cm.bindList(ps, portNo), ip);
            bindList = cm.addBinding(ps, portNo, this);
            src = new InetSocketAddress(in.getAddress(), portNo);
        }
        port = p;
    }

    /** {@code cma_check_port}: another ID on the same address (or a wildcard on either side) holds the port. */
    private void checkPort(UserCm.BindList bl, InetAddress ip) {
        if (bl == null) {
            return;
        }
        for (UserCmId cur : bl.owners) {
            if (cur == this || reuseaddr && cur.reuseaddr && cur.state != State.LISTEN) {
                continue;
            }
            InetAddress curIp = ipOf(cur.src);
            boolean curV4 = cur.src instanceof InetSocketAddress i && i.getAddress() instanceof Inet4Address;
            boolean v4 = ip instanceof Inet4Address || ip == null && src == null && false;
            if (afonly == 1 && cur.afonly == 1 && curV4 != v4 && ip != null && curIp != null) {
                continue;
            }
            if (ip == null || curIp == null) {
                throw new VerbsException(Errno.EADDRNOTAVAIL, "rdma_bind_addr: port " + bl.port + " of " + bl.ps
                        + " is bound to " + describe(cur.src) + " (a wildcard conflicts with every address)");
            }
            if (RdmaCmAddresses.same(ip, curIp)) {
                throw new VerbsException(Errno.EADDRINUSE, "rdma_bind_addr: " + ip.getHostAddress() + " port " + bl.port
                        + " of " + bl.ps + " is in use; pick another port (or 0), or set REUSEADDR on both IDs");
            }
        }
    }

    private static String describe(SocketAddress a) {
        return a instanceof InetSocketAddress i ? i.getAddress().getHostAddress() + ":" + i.getPort() : String.valueOf(a);
    }

    static InetAddress ipOf(SocketAddress a) {
        if (a instanceof IbSocketAddress ib) {
            return ib.inetAddress();
        }
        if (a instanceof InetSocketAddress i) {
            return i.getAddress().isAnyLocalAddress() ? null : i.getAddress();
        }
        return null;
    }

    @Override
    public SocketAddress localAddress() {
        return src;
    }

    @Override
    public SocketAddress remoteAddress() {
        return dst;
    }

    // ------------------------------------------------------------------ listen

    @Override
    public void listen(int backlog) {
        cm.lock.lock();
        try {
            if (state != State.ADDR_BOUND) {
                throw inval("rdma_listen: the CM ID is " + state + " (bind it first; it listens once)");
            }
            List<MadPort> on = port != null ? List.of(port) : cm.ports();
            for (MadPort p : on) {
                if (port == null && !p.started()) {
                    try {
                        cm.start(p);
                    } catch (VerbsException e) {
                        // a wildcard listens on the devices it can open (another process may serve this one)
                        LOG.log(System.Logger.Level.WARNING, "rdma_listen on a wildcard address skips {0}: {1}", p,
                                e.getMessage());
                        continue;
                    }
                }
                IbCmId l = bindList.ibListens.get(p);
                if (l == null) {
                    l = cm.ibcm.listen(p, bindList.serviceId, CmaIbHandler::requestHandler, bindList);
                    bindList.ibListens.put(p, l);
                } else {
                    l.listenSharecount++;
                }
                listens.add(l);
            }
            state = State.LISTEN;
        } finally {
            cm.lock.unlock();
        }
    }

    // ------------------------------------------------------------------ address and route

    @Override
    public void resolveAddr(SocketAddress source, SocketAddress destination, Duration timeout) {
        cm.lock.lock();
        try {
            if (state == State.IDLE) {
                bindLocked(source);
                state = State.ADDR_BOUND;
            }
            if (state != State.ADDR_BOUND) {
                throw inval("rdma_resolve_addr: the CM ID is " + state + "; resolve on a new or bound ID");
            }
            InetAddress to = ipOf(destination);
            if (port == null) {
                // bound to a wildcard: the port whose address reaches the destination
                MadPort p = cm.portOwning(to);
                if (p == null) {
                    var a = cm.sourceFor(to);
                    p = a == null ? null : cm.portOwning(a.address());
                }
                if (p == null) {
                    post(CmEventInfo.of(CmEventType.ADDR_ERROR, -Errno.ENODEV.value(), "no device of this CM reaches "
                            + to.getHostAddress() + "; its addresses: " + cm.addresses()));
                    return;
                }
                try {
                    cm.start(p);
                } catch (VerbsException e) {
                    post(CmEventInfo.of(CmEventType.ADDR_ERROR, -e.errno().value(), e.getMessage()));
                    return;
                }
                port = p;
            }
            dst = destination;
            state = State.ADDR_RESOLVED;
            // The addresses are GIDs of the devices: resolution is local and immediate (no ARP/ND)
            post(CmEventInfo.of(CmEventType.ADDR_RESOLVED, 0, null));
        } finally {
            cm.lock.unlock();
        }
    }

    /** {@code cma_resolve_iboe_route}: the path on RoCE, computed locally. */
    @Override
    public void resolveRoute(Duration timeout) {
        cm.lock.lock();
        try {
            if (state != State.ADDR_RESOLVED) {
                throw inval("rdma_resolve_route: the CM ID is " + state + ", not ADDR_RESOLVED");
            }
            Gid sgid = gidOf(src);
            Gid dgid = gidOf(dst);
            if (sgid.equals(Gid.ZERO) || port.gidIndexOf(sgid) < 0) {
                sgid = port.gid(0);
            }
            boolean afIb = dst instanceof IbSocketAddress;
            int hop = afIb ? 1 : 64;
            int plt = ackTimeoutSet ? Math.max(0, ackTimeout - 1) : CmMsg.CMA_IBOE_PACKET_LIFETIME;
            path = new PathRec(sgid, dgid, hop, tosSet ? tos : 0, flowLabel(), 0xFFFF, 0, port.activeMtu(), plt);
            state = State.ROUTE_RESOLVED;
            post(CmEventInfo.of(CmEventType.ROUTE_RESOLVED, 0, null));
        } finally {
            cm.lock.unlock();
        }
    }

    /** {@code cma_get_roce_udp_flow_label}: the IPv6 flow label if set, else (sport * 31 + dport) & 0xFFFFF. */
    private int flowLabel() {
        if (src instanceof InetSocketAddress s && dst instanceof InetSocketAddress d) {
            return (s.getPort() * 31 + d.getPort()) & 0xF_FFFF;
        }
        return 0;
    }

    private static Gid gidOf(SocketAddress a) {
        if (a instanceof IbSocketAddress ib) {
            return ib.gid();
        }
        InetAddress ip = ((InetSocketAddress) a).getAddress();
        return ip.isAnyLocalAddress() ? Gid.ZERO : Gid.ofInetAddress(ip);
    }

    @Override
    public Context context() {
        MadPort p = port;
        return p == null ? null : p.ctx;
    }

    @Override
    public int portNum() {
        MadPort p = port;
        return p == null ? 0 : p.portNum;
    }

    @Override
    public CmRoute route() {
        cm.lock.lock();
        try {
            PathRec pr = path;
            if (pr == null) {
                return null;
            }
            return new CmRoute(pr.sgid(), pr.dgid(), Math.max(0, port.gidIndexOf(pr.sgid())), pr.hopLimit(),
                    pr.trafficClass(), pr.flowLabel(), pr.pkey(), pr.mtu(), pr.packetLifeTime(), pr.sl());
        } finally {
            cm.lock.unlock();
        }
    }

    // ------------------------------------------------------------------ QP

    @Override
    public QueuePair createQp(ProtectionDomain pd, QpInitAttributes attrs) {
        QpAttributes init;
        cm.lock.lock();
        try {
            if (port == null) {
                throw inval("rdma_create_qp: the CM ID has no device yet");
            }
            init = initQpAttrLocked(QpState.INIT);
        } finally {
            cm.lock.unlock();
        }
        // the verbs calls run without the CM lock (they take the device's locks; rdma_create_qp holds none of
        // cma.c's locks either), so creating QPs does not stall the receive agents
        QueuePair q = pd.createQp(attrs);
        try {
            q.modify(init); // ucma_init_conn_qp, ucma_init_ud_qp
            if (qpType == QpType.UD) {
                // ucma_init_ud_qp: then RTR, and RTS with send PSN 0
                q.modify(new QpAttributes().state(QpState.RTR));
                q.modify(new QpAttributes().state(QpState.RTS).sqPsn(0));
            }
        } catch (RuntimeException e) {
            q.close();
            throw e;
        }
        cm.lock.lock();
        try {
            qp = q;
            qpNum = q.qpNum();
            srq = attrs.srq() != null;
            return q;
        } finally {
            cm.lock.unlock();
        }
    }

    @Override
    public QueuePair qp() {
        return qp;
    }

    @Override
    public void destroyQp() {
        QueuePair q;
        cm.lock.lock();
        try {
            q = qp;
            qp = null;
        } finally {
            cm.lock.unlock();
        }
        if (q != null) {
            q.close(); // without the CM lock, as createQp
        }
    }

    @Override
    public QpAttributes initQpAttr(QpState target) {
        cm.lock.lock();
        try {
            return initQpAttrLocked(target);
        } finally {
            cm.lock.unlock();
        }
    }

    /** {@code rdma_init_qp_attr}. */
    private QpAttributes initQpAttrLocked(QpState target) {
        if (port == null) {
            throw inval("rdma_init_qp_attr: the CM ID has no device yet");
        }
        QpAttributes a;
        if (target == QpState.ERR) {
            return new QpAttributes().state(QpState.ERR);
        }
        if (ib == null || qpType == QpType.UD) {
            // cma_ib_init_qp_attr: before the CM knows the connection (or for UD)
            if (target != QpState.INIT && qpType != QpType.UD) {
                throw inval("rdma_init_qp_attr: no " + target + " attributes before the connection request is"
                        + " answered (connect, or take a CONNECT_REQUEST)");
            }
            a = new QpAttributes().state(target);
            if (target == QpState.INIT) {
                a.pkeyIndex(0).port(port.portNum);
                if (qpType == QpType.UD) {
                    a.qkey(qkey());
                } else {
                    a.accessFlags(0);
                }
            }
        } else {
            a = cm.ibcm.initQpAttr(ib, target, true);
        }
        if (target == QpState.RTR && a.has(org.rdma4j.verbs.QpAttrMask.RQ_PSN)) {
            a.rqPsn(seqNum);
        }
        if (target == QpState.RTS && ackTimeoutSet && qpType == QpType.RC) {
            a.timeout(ackTimeout); // cma_modify_qp_rts / rdma_init_qp_attr: RDMA_OPTION_ID_ACK_TIMEOUT
        }
        return a;
    }

    /** {@code cma_set_qkey(id, 0)}: RDMA_UDP_QKEY in the UDP and IB spaces. */
    private int qkey() {
        if (qkey == 0) {
            qkey = PortSpace.UDP_QKEY;
        }
        return qkey;
    }

    /** librdmacm's {@code ucma_modify_qp_rtr}: INIT again with the CM's values, then RTR. */
    void modifyRtr(int respRes) {
        QpAttributes init = initQpAttrLocked(QpState.INIT);
        qp.modify(init);
        QpAttributes rtr = initQpAttrLocked(QpState.RTR);
        if (respRes != ConnParam.MAX_DEPTH) {
            rtr.maxDestRdAtomic(respRes);
        }
        qp.modify(rtr);
    }

    /** librdmacm's {@code ucma_modify_qp_rts}. */
    void modifyRts(int initDepth) {
        QpAttributes rts = initQpAttrLocked(QpState.RTS);
        if (initDepth != ConnParam.MAX_DEPTH) {
            rts.maxRdAtomic(initDepth);
        }
        qp.modify(rts);
    }

    void modifyErr() {
        QueuePair q = qp;
        if (q != null) {
            try {
                q.modify(new QpAttributes().state(QpState.ERR));
            } catch (VerbsException ignored) {
                // already in ERR or RESET: nothing to flush
            }
        }
    }

    // ------------------------------------------------------------------ connect

    @Override
    public void connect(ConnParam param) {
        cm.lock.lock();
        try {
            if (state != State.ROUTE_RESOLVED) {
                throw inval("rdma_connect: the CM ID is " + state + ", not ROUTE_RESOLVED (resolve the address and the"
                        + " route first; an ID connects once)");
            }
            checkDepths(param, "rdma_connect");
            int resp = param.responderResources() == ConnParam.MAX_DEPTH ? port.maxRdAtomic : param.responderResources();
            int init = param.initiatorDepth() == ConnParam.MAX_DEPTH ? port.maxInitRdAtomic : param.initiatorDepth();
            if (qp == null) {
                qpNum = param.qpNum();
                srq = param.srq();
            }
            boolean afIb = dst instanceof IbSocketAddress;
            byte[] pd = afIb ? param.privateData()
                    : CmaHeader.format((InetSocketAddress) src, (InetSocketAddress) dst, param.privateData());
            long sid = afIb ? ((IbSocketAddress) dst).serviceId() : ps.serviceId(((InetSocketAddress) dst).getPort());
            state = State.CONNECT;
            try {
                if (qpType == QpType.UD) {
                    ib = cm.ibcm.createId(port, CmaIbHandler::ibHandler, this);
                    cm.ibcm.sidr.sendReq(ib, path, sid, CmMsg.convertToMs(cmResponseTimeout), maxCmRetries, pd);
                } else {
                    ib = cm.ibcm.createId(port, CmaIbHandler::ibHandler, this);
                    cm.ibcm.sendReq(ib, new IbCm.ReqParam(path, sid, qpNum, qpType, seqNum, resp, init,
                            param.flowControl(), Math.min(7, param.retryCount()), Math.min(7, param.rnrRetryCount()),
                            cmResponseTimeout, cmResponseTimeout, maxCmRetries, srq, pd));
                }
            } catch (RuntimeException e) {
                if (ib != null) {
                    cm.ibcm.destroyId(ib, 0);
                    ib = null;
                }
                state = State.ROUTE_RESOLVED;
                throw e;
            }
        } finally {
            cm.lock.unlock();
        }
    }

    /** librdmacm's {@code ucma_valid_param}: depths above the device's maximum are refused. */
    private void checkDepths(ConnParam p, String verb) {
        if (p.responderResources() != ConnParam.MAX_DEPTH && p.responderResources() > port.maxRdAtomic) {
            throw inval(verb + ": responder_resources " + p.responderResources() + " exceeds the device's max_qp_rd_atom "
                    + port.maxRdAtomic + " (use ConnParam.MAX_DEPTH for the maximum)");
        }
        if (p.initiatorDepth() != ConnParam.MAX_DEPTH && p.initiatorDepth() > port.maxInitRdAtomic) {
            throw inval(verb + ": initiator_depth " + p.initiatorDepth() + " exceeds the device's max_qp_init_rd_atom "
                    + port.maxInitRdAtomic + " (use ConnParam.MAX_DEPTH for the maximum)");
        }
    }

    // ------------------------------------------------------------------ accept / reject / disconnect

    @Override
    public void accept(ConnParam param) {
        cm.lock.lock();
        try {
            if (state != State.CONNECT || ib == null || listener == null) {
                throw inval("rdma_accept: the CM ID is not a pending connection request (" + state + ")");
            }
            if (qpType == QpType.UD) {
                int q = qp != null ? qpNum : param.qpNum();
                try {
                    cm.ibcm.sidr.sendRep(ib, CmMsg.SIDR_SUCCESS, q, qkey(), param.privateData());
                } catch (VerbsException e) {
                    throw inval("rdma_accept: " + e.getMessage() + "; accept once");
                }
                return;
            }
            if (accepted) {
                throw inval("rdma_accept: the connection was accepted already (its QP is past INIT); accept once");
            }
            checkDepths(param, "rdma_accept");
            int init = param.initiatorDepth() == ConnParam.MAX_DEPTH
                    ? Math.min(reqInitiatorDepth, port.maxInitRdAtomic) : param.initiatorDepth();
            int resp = param.responderResources() == ConnParam.MAX_DEPTH
                    ? Math.min(reqResponderResources, port.maxRdAtomic) : param.responderResources();
            if (qp == null) {
                qpNum = param.qpNum();
                srq = param.srq();
            } else {
                // librdmacm's rdma_accept moves the QP to RTR and RTS before the REP
                modifyRtr(resp);
                modifyRts(init);
                accepted = true;
            }
            try {
                cm.ibcm.sendRep(ib, new IbCm.RepParam(qpNum, seqNum, resp, init, param.flowControl(),
                        Math.min(7, param.rnrRetryCount()), srq, param.privateData()));
            } catch (VerbsException e) {
                // rdma_accept's reject path: QP to ERR and a REJ
                modifyErr();
                try {
                    cm.ibcm.sendRej(ib, 28, null, null);
                } catch (VerbsException ignored) {
                    // nothing left to reject
                }
                throw e;
            }
        } finally {
            cm.lock.unlock();
        }
    }

    @Override
    public void reject(byte[] privateData) {
        cm.lock.lock();
        try {
            if (ib == null || listener == null || state != State.CONNECT) {
                throw inval("rdma_reject: the CM ID is not a pending connection request");
            }
            if (qpType == QpType.UD) {
                cm.ibcm.sidr.sendRep(ib, CmMsg.SIDR_REJECT, 0, 0, privateData);
            } else {
                cm.ibcm.sendRej(ib, 28, null, privateData);
            }
        } catch (VerbsException e) {
            throw inval("rdma_reject: " + e.getMessage() + " (the request was answered already)");
        } finally {
            cm.lock.unlock();
        }
    }

    /**
     * librdmacm's {@code rdma_disconnect}: the QP to ERR ({@code ucma_shutdown}), then the kernel's: EINVAL
     * without a communication, else a DREQ, or the DREP of a received DREQ, or nothing; success either way.
     */
    @Override
    public void disconnect() {
        cm.lock.lock();
        try {
            modifyErr();
            if (ib == null) {
                throw inval("rdma_disconnect: the CM ID was never connected (connect or accept first)");
            }
            try {
                cm.ibcm.sendDreq(ib, null);
            } catch (VerbsException notEstablished) {
                try {
                    cm.ibcm.sendDrep(ib, null);
                } catch (VerbsException nothing) {
                    // a second disconnect, or one while connecting: Linux returns 0 all the same
                }
            }
        } finally {
            cm.lock.unlock();
        }
    }

    @Override
    public void establish() {
        cm.lock.lock();
        try {
            if (ib == null || state != State.CONNECT) {
                throw inval("rdma_establish: no connection response to complete");
            }
            try {
                if (listener == null) {
                    cm.ibcm.sendRtu(ib, null);
                } else {
                    cm.ibcm.establish(ib);
                }
            } catch (VerbsException e) {
                throw e.errno() == Errno.EISCONN ? e : inval("rdma_establish: " + e.getMessage());
            }
        } finally {
            cm.lock.unlock();
        }
    }

    @Override
    public <T> void setOption(CmOption<T> option, T value) {
        cm.lock.lock();
        try {
            if (option == CmOption.TOS) {
                tos = (Integer) value;
                tosSet = true;
            } else if (option == CmOption.REUSEADDR) {
                if (state != State.IDLE) {
                    throw inval("rdma_set_option REUSEADDR: only before the ID is bound");
                }
                reuseaddr = (Boolean) value;
            } else if (option == CmOption.AFONLY) {
                if (state != State.IDLE) {
                    throw inval("rdma_set_option AFONLY: only before the ID is bound");
                }
                afonly = (Boolean) value ? 1 : 0;
            } else if (option == CmOption.ACK_TIMEOUT) {
                if (qpType != QpType.RC) {
                    throw inval("rdma_set_ack_timeout: only for RC IDs");
                }
                ackTimeout = (Integer) value;
                ackTimeoutSet = true;
            } else if (option == CmOption.CM_RESPONSE_TIMEOUT) {
                cmResponseTimeout = (Integer) value;
            } else if (option == CmOption.MAX_CM_RETRIES) {
                maxCmRetries = (Integer) value;
            } else {
                throw new VerbsException(Errno.EOPNOTSUPP, "rdma_set_option: " + option + " is not supported");
            }
        } finally {
            cm.lock.unlock();
        }
    }

    // ------------------------------------------------------------------ destroy

    @Override
    public void close() {
        cm.lock.lock();
        try {
            if (state == State.DESTROYING) {
                return;
            }
            state = State.DESTROYING;
            for (IbCmId l : listens) {
                cm.ibcm.destroyId(l, 0);
                if (l.destroyed) {
                    bindList.ibListens.values().remove(l);
                }
            }
            listens.clear();
            if (ib != null) {
                ib.context = null;
                cm.ibcm.destroyId(ib, 0);
                ib = null;
            }
            if (bindList != null) {
                cm.releaseBinding(bindList, this);
                bindList = null;
            }
            cm.ids.remove(this);
        } finally {
            cm.lock.unlock();
        }
    }

    /** The CM is closing under the ID: DEVICE_REMOVAL (CM lock held). */
    void deviceRemoved() {
        if (state != State.DESTROYING && state != State.DEVICE_REMOVAL) {
            post(CmEventInfo.of(CmEventType.DEVICE_REMOVAL, 0, "the CM serving this ID was closed"));
            state = State.DEVICE_REMOVAL;
        }
    }

    @Override
    public String toString() {
        return "rdma_id{" + ps + " " + state + " " + src + " -> " + dst + '}';
    }
}

