// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteOrder;
import java.time.Duration;

import org.rdma4j.common.RdmaEvents;
import org.rdma4j.libc.Errors;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttrMask;
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
import org.rdma4j.verbs.cm.UdParam;
import org.rdma4j.verbs.spi.CmEventInfo;
import org.rdma4j.verbs.spi.CmEventSink;
import org.rdma4j.verbs.spi.CmIdSpi;

/**
 * A librdmacm CM ID ({@code struct rdma_cm_id}) behind the CM API. Each call is the librdmacm call of the
 * same name; its events come back through the provider's agent ({@link #dispatch}). Thread-safe (librdmacm
 * serialises on the ID).
 */
final class RdmaCmId implements CmIdSpi {
    private static final ValueLayout.OfShort BE16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfInt BE32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final short AF_INET = 2;
    private static final short AF_INET6 = 10;

    private final RdmaCmProvider.State state;
    private final MemorySegment id;
    private final PortSpace portSpace;
    private final QpType qpType;
    private volatile CmEventSink sink;
    private volatile IbvQp qp;
    private volatile boolean closed;

    /** An ID over librdmacm's {@code rdma_cm_id} at {@code id} (registered in {@code state.ids} by the caller). */
    RdmaCmId(RdmaCmProvider.State state, MemorySegment id, PortSpace ps, QpType qpType, CmEventSink sink) {
        this.state = state;
        this.id = id;
        this.portSpace = ps;
        this.qpType = qpType;
        this.sink = sink;
    }

    static RdmaCmId create(RdmaCmProvider.State state, CmEventSink sink, PortSpace ps, QpType qpType) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment out = a.allocate(ValueLayout.ADDRESS);
            int rc = (int) Rdmacm.handles().createId().invokeExact(st, state.channel, out, MemorySegment.NULL,
                    ps.value());
            if (rc != 0) {
                throw IbvErrors.failed("rdma_create_id", Ibv.err(rc, st), ps.toString());
            }
            MemorySegment p = out.get(ValueLayout.ADDRESS, 0).reinterpret(Rdmacm.ID_SIZE);
            RdmaCmId c = new RdmaCmId(state, p, ps, qpType, sink);
            state.ids.put(p.address(), c);
            return c;
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    private String describe() {
        return "CM ID " + portSpace + " " + localAddress() + " -> " + remoteAddress();
    }

    private void live(String verb) {
        if (closed) {
            throw new VerbsException(Errno.EINVAL, verb + ": the CM ID is destroyed");
        }
    }

    private static int call(String verb, int rc, MemorySegment st, String context) {
        if (rc != 0) {
            throw IbvErrors.failed(verb, Ibv.err(rc, st), context);
        }
        return rc;
    }

    // ------------------------------------------------------------------------------ addresses

    static void sockaddr(MemorySegment s, SocketAddress address) {
        s.fill((byte) 0);
        if (address instanceof IbSocketAddress) {
            throw new VerbsException(Errno.EOPNOTSUPP, "AF_IB addresses (IbSocketAddress) over librdmacm: not"
                    + " implemented by rdma4j-ibverbs; use an IP address of the device");
        }
        if (!(address instanceof InetSocketAddress isa) || isa.getAddress() == null) {
            throw new VerbsException(Errno.EINVAL, "not an IP socket address: " + address);
        }
        InetAddress ip = isa.getAddress();
        if (ip instanceof Inet4Address) {
            s.set(ValueLayout.JAVA_SHORT, 0, AF_INET);
            s.set(BE16, 2, (short) isa.getPort());
            MemorySegment.copy(ip.getAddress(), 0, s, ValueLayout.JAVA_BYTE, 4, 4);
        } else {
            s.set(ValueLayout.JAVA_SHORT, 0, AF_INET6);
            s.set(BE16, 2, (short) isa.getPort());
            MemorySegment.copy(ip.getAddress(), 0, s, ValueLayout.JAVA_BYTE, 8, 16);
            s.set(ValueLayout.JAVA_INT_UNALIGNED, 24, ((Inet6Address) ip).getScopeId());
        }
    }

    static InetSocketAddress sockaddr(MemorySegment s) {
        short family = s.get(ValueLayout.JAVA_SHORT, 0);
        int port = s.get(BE16, 2) & 0xFFFF;
        try {
            if (family == AF_INET) {
                return new InetSocketAddress(InetAddress.getByAddress(s.asSlice(4, 4).toArray(ValueLayout.JAVA_BYTE)),
                        port);
            }
            if (family == AF_INET6) {
                byte[] a = s.asSlice(8, 16).toArray(ValueLayout.JAVA_BYTE);
                int scope = s.get(ValueLayout.JAVA_INT_UNALIGNED, 24);
                InetAddress ip = scope != 0 ? Inet6Address.getByAddress(null, a, scope) : InetAddress.getByAddress(a);
                return new InetSocketAddress(ip, port);
            }
        } catch (UnknownHostException e) {
            throw new IllegalStateException(e);
        }
        return null;
    }

    @Override
    public void bind(SocketAddress address) {
        live("rdma_bind_addr");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment sa = a.allocate(Rdmacm.SOCKADDR_STORAGE, 8);
            sockaddr(sa, address);
            call("rdma_bind_addr", (int) Rdmacm.handles().bindAddr().invokeExact(st, id, sa), st, address.toString());
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    @Override
    public SocketAddress localAddress() {
        return closed ? null : sockaddr(id.asSlice(Rdmacm.ID_SRC_ADDR, Rdmacm.SOCKADDR_STORAGE));
    }

    @Override
    public SocketAddress remoteAddress() {
        return closed ? null : sockaddr(id.asSlice(Rdmacm.ID_DST_ADDR, Rdmacm.SOCKADDR_STORAGE));
    }

    @Override
    public void listen(int backlog) {
        live("rdma_listen");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            call("rdma_listen", (int) Rdmacm.handles().listen().invokeExact(st, id, backlog), st, describe());
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    private static int ms(Duration d) {
        return (int) Math.max(1, Math.min(Integer.MAX_VALUE, d.toMillis()));
    }

    @Override
    public void resolveAddr(SocketAddress source, SocketAddress destination, Duration timeout) {
        live("rdma_resolve_addr");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment src = MemorySegment.NULL;
            if (source != null && !(source instanceof InetSocketAddress isa && isa.getAddress().isAnyLocalAddress()
                    && isa.getPort() == 0)) {
                src = a.allocate(Rdmacm.SOCKADDR_STORAGE, 8);
                sockaddr(src, source);
            }
            MemorySegment dst = a.allocate(Rdmacm.SOCKADDR_STORAGE, 8);
            sockaddr(dst, destination);
            call("rdma_resolve_addr", (int) Rdmacm.handles().resolveAddr().invokeExact(st, id, src, dst, ms(timeout)),
                    st, source + " -> " + destination);
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    @Override
    public void resolveRoute(Duration timeout) {
        live("rdma_resolve_route");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            call("rdma_resolve_route", (int) Rdmacm.handles().resolveRoute().invokeExact(st, id, ms(timeout)), st,
                    describe());
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    @Override
    public Context context() {
        return closed ? null : state.context(id.get(ValueLayout.ADDRESS, Rdmacm.ID_VERBS));
    }

    @Override
    public int portNum() {
        return closed ? 0 : id.get(ValueLayout.JAVA_BYTE, Rdmacm.ID_PORT_NUM) & 0xFF;
    }

    @Override
    public CmRoute route() {
        if (closed || id.get(ValueLayout.JAVA_INT, Rdmacm.ID_NUM_PATHS) < 1) {
            return null;
        }
        MemorySegment pr = id.get(ValueLayout.ADDRESS, Rdmacm.ID_PATH_REC).reinterpret(64);
        Gid sgid = IbvAttrs.gid(pr, Rdmacm.PR_SGID);
        int sgidIndex = 0;
        Context ctx = context();
        if (ctx != null) {
            int n = ctx.queryPort(Math.max(1, portNum())).gidTblLen();
            for (int i = 0; i < n; i++) {
                if (ctx.queryGid(Math.max(1, portNum()), i).equals(sgid)) {
                    sgidIndex = i;
                    break;
                }
            }
        }
        return new CmRoute(sgid, IbvAttrs.gid(pr, Rdmacm.PR_DGID), sgidIndex, IbvAttrs.u8(pr, Rdmacm.PR_HOP_LIMIT),
                IbvAttrs.u8(pr, Rdmacm.PR_TRAFFIC_CLASS), pr.get(BE32, Rdmacm.PR_FLOW_LABEL) & 0xFFFFF,
                pr.get(BE16, Rdmacm.PR_PKEY) & 0xFFFF, IbvAttrs.mtu(IbvAttrs.u8(pr, Rdmacm.PR_MTU) & 0x3F),
                IbvAttrs.u8(pr, Rdmacm.PR_PACKET_LIFE_TIME) & 0x3F, IbvAttrs.u8(pr, Rdmacm.PR_SL) & 0xF);
    }

    // ------------------------------------------------------------------------------ QP

    @Override
    public QueuePair createQp(ProtectionDomain pd, QpInitAttributes attrs) {
        live("rdma_create_qp");
        if (!(pd instanceof IbvPd ipd) || ipd.ctx != context()) {
            throw new VerbsException(Errno.EINVAL, "rdma_create_qp: the PD is not on this CM ID's device context");
        }
        if (qp != null) {
            throw new VerbsException(Errno.EINVAL, "rdma_create_qp: the CM ID has a QP already");
        }
        IbvQp q = ipd.createQp(attrs, new IbvQp.Lifecycle() {
            @Override
            public MemorySegment create(MemorySegment st, MemorySegment pdPtr, MemorySegment init) throws Throwable {
                int rc = (int) Rdmacm.handles().createQp().invokeExact(st, id, pdPtr, init);
                return rc != 0 ? MemorySegment.NULL : id.get(ValueLayout.ADDRESS, Rdmacm.ID_QP);
            }

            @Override
            public int destroy(MemorySegment st, MemorySegment qpPtr) throws Throwable {
                Rdmacm.handles().destroyQp().invokeExact(st, id); // also clears id->qp
                qp = null;
                return 0;
            }
        });
        qp = q;
        return q;
    }

    @Override
    public QueuePair qp() {
        return qp;
    }

    @Override
    public void destroyQp() {
        IbvQp q = qp;
        if (q != null) {
            q.close();
        }
    }

    @Override
    public QpAttributes initQpAttr(QpState target) {
        live("rdma_init_qp_attr");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment attr = a.allocate(IbvLayouts.QP_ATTR);
            attr.set(ValueLayout.JAVA_INT, 0, target.ordinal());
            MemorySegment mask = a.allocate(ValueLayout.JAVA_INT);
            call("rdma_init_qp_attr", (int) Rdmacm.handles().initQpAttr().invokeExact(st, id, attr, mask), st,
                    describe() + " to " + target);
            QpAttributes all = IbvAttrs.qpAttr(attr);
            int m = mask.get(ValueLayout.JAVA_INT, 0);
            return masked(all, m);
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    /** A copy of {@code all} with only the attributes of {@code mask} set. */
    static QpAttributes masked(QpAttributes all, int mask) {
        QpAttributes q = new QpAttributes();
        for (QpAttrMask m : QpAttrMask.values()) {
            if ((mask & m.bit()) == 0) {
                continue;
            }
            switch (m) {
                case STATE -> q.state(all.state());
                case CUR_STATE -> q.curState(all.curState());
                case EN_SQD_ASYNC_NOTIFY -> q.enSqdAsyncNotify(all.enSqdAsyncNotify());
                case ACCESS_FLAGS -> q.accessFlags(all.accessFlags());
                case PKEY_INDEX -> q.pkeyIndex(all.pkeyIndex());
                case PORT -> q.port(all.port());
                case QKEY -> q.qkey(all.qkey());
                case AV -> q.av(all.av());
                case PATH_MTU -> q.pathMtu(all.pathMtu());
                case TIMEOUT -> q.timeout(all.timeout());
                case RETRY_CNT -> q.retryCnt(all.retryCnt());
                case RNR_RETRY -> q.rnrRetry(all.rnrRetry());
                case RQ_PSN -> q.rqPsn(all.rqPsn());
                case MAX_QP_RD_ATOMIC -> q.maxRdAtomic(all.maxRdAtomic());
                case MIN_RNR_TIMER -> q.minRnrTimer(all.minRnrTimer());
                case SQ_PSN -> q.sqPsn(all.sqPsn());
                case MAX_DEST_RD_ATOMIC -> q.maxDestRdAtomic(all.maxDestRdAtomic());
                case CAP -> q.cap(all.cap());
                case DEST_QPN -> q.destQpNum(all.destQpNum());
                case ALT_PATH, PATH_MIG_STATE -> { }
            }
        }
        return q;
    }

    // ------------------------------------------------------------------------------ connection

    private static MemorySegment connParam(Arena a, ConnParam p) {
        MemorySegment c = a.allocate(Rdmacm.CP_SIZE, 8);
        byte[] pd = p.privateData();
        if (pd.length > 0) {
            MemorySegment data = a.allocate(pd.length);
            MemorySegment.copy(pd, 0, data, ValueLayout.JAVA_BYTE, 0, pd.length);
            c.set(ValueLayout.ADDRESS, Rdmacm.CP_PRIVATE_DATA, data);
        }
        c.set(ValueLayout.JAVA_BYTE, Rdmacm.CP_PRIVATE_DATA_LEN, (byte) pd.length);
        c.set(ValueLayout.JAVA_BYTE, Rdmacm.CP_RESPONDER_RESOURCES, (byte) p.responderResources());
        c.set(ValueLayout.JAVA_BYTE, Rdmacm.CP_INITIATOR_DEPTH, (byte) p.initiatorDepth());
        c.set(ValueLayout.JAVA_BYTE, Rdmacm.CP_FLOW_CONTROL, (byte) (p.flowControl() ? 1 : 0));
        c.set(ValueLayout.JAVA_BYTE, Rdmacm.CP_RETRY_COUNT, (byte) p.retryCount());
        c.set(ValueLayout.JAVA_BYTE, Rdmacm.CP_RNR_RETRY_COUNT, (byte) p.rnrRetryCount());
        c.set(ValueLayout.JAVA_BYTE, Rdmacm.CP_SRQ, (byte) (p.srq() ? 1 : 0));
        c.set(ValueLayout.JAVA_INT, Rdmacm.CP_QP_NUM, p.qpNum());
        return c;
    }

    @Override
    public void connect(ConnParam param) {
        live("rdma_connect");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            call("rdma_connect", (int) Rdmacm.handles().connect().invokeExact(st, id, connParam(a, param)), st,
                    describe() + " " + param);
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    @Override
    public void accept(ConnParam param) {
        live("rdma_accept");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            call("rdma_accept", (int) Rdmacm.handles().accept().invokeExact(st, id, connParam(a, param)), st,
                    describe() + " " + param);
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    @Override
    public void reject(byte[] privateData) {
        live("rdma_reject");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment data = MemorySegment.NULL;
            if (privateData.length > 0) {
                data = a.allocate(privateData.length);
                MemorySegment.copy(privateData, 0, data, ValueLayout.JAVA_BYTE, 0, privateData.length);
            }
            call("rdma_reject", (int) Rdmacm.handles().reject().invokeExact(st, id, data, (byte) privateData.length),
                    st, describe());
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    @Override
    public void disconnect() {
        live("rdma_disconnect");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            call("rdma_disconnect", (int) Rdmacm.handles().disconnect().invokeExact(st, id), st, describe());
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    @Override
    public void establish() {
        live("rdma_establish");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            call("rdma_establish", (int) Rdmacm.handles().establish().invokeExact(st, id), st, describe());
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    @Override
    public <T> void setOption(CmOption<T> option, T value) {
        live("rdma_set_option");
        if (!option.isLibrdmacmOption()) {
            throw new VerbsException(Errno.EOPNOTSUPP, "rdma_set_option: " + option.name() + " is rdma4j's own CM"
                    + " option; librdmacm has no such option (the kernel's CM timers are its own)");
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment v;
            if (value instanceof Boolean b) {
                v = a.allocate(ValueLayout.JAVA_INT);
                v.set(ValueLayout.JAVA_INT, 0, b ? 1 : 0);
            } else if (option == CmOption.TOS || option == CmOption.ACK_TIMEOUT) {
                int x = (Integer) value;
                if (x < 0 || x > 255) {
                    throw new VerbsException(Errno.EINVAL, "rdma_set_option: " + option.name() + " " + x + " is a u8");
                }
                v = a.allocate(1);
                v.set(ValueLayout.JAVA_BYTE, 0, (byte) x);
            } else {
                v = a.allocate(ValueLayout.JAVA_INT);
                v.set(ValueLayout.JAVA_INT, 0, (Integer) value);
            }
            call("rdma_set_option", (int) Rdmacm.handles().setOption().invokeExact(st, id, Rdmacm.RDMA_OPTION_ID,
                    option.optname(), v, v.byteSize()), st, option.name() + " = " + value);
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            // waits until every event of the ID is acknowledged: the agent acknowledges each as it reads it
            int rc = (int) Rdmacm.handles().destroyId().invokeExact(st, id);
            if (rc != 0) {
                throw IbvErrors.failed("rdma_destroy_id", Ibv.err(rc, st), "");
            }
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        } finally {
            state.ids.remove(id.address());
        }
    }

    // ------------------------------------------------------------------------------ events

    /** Called by the agent for each event, before it acknowledges it. */
    static void dispatch(RdmaCmProvider.State state, MemorySegment ev) {
        long idPtr = ev.get(ValueLayout.ADDRESS, Rdmacm.EV_ID).address();
        long listenPtr = ev.get(ValueLayout.ADDRESS, Rdmacm.EV_LISTEN_ID).address();
        int type = ev.get(ValueLayout.JAVA_INT, Rdmacm.EV_EVENT);
        int status = ev.get(ValueLayout.JAVA_INT, Rdmacm.EV_STATUS);
        CmEventType t = CmEventType.ofValue(type);
        if (t == null) {
            return; // an event of a newer librdmacm: acknowledged unseen
        }
        if (t == CmEventType.CONNECT_REQUEST) {
            RdmaCmId listener = state.ids.get(listenPtr);
            MemorySegment newPtr = ev.get(ValueLayout.ADDRESS, Rdmacm.EV_ID).reinterpret(Rdmacm.ID_SIZE);
            RdmaCmId child = new RdmaCmId(state, newPtr, listener == null ? PortSpace.TCP : listener.portSpace,
                    listener == null ? QpType.RC : listener.qpType, null);
            state.ids.put(newPtr.address(), child);
            CmEventInfo req = info(t, status, ev, child.qpType);
            CmEventSink s = listener == null || listener.closed ? null : listener.sink.connectRequest(child, req);
            if (s == null) {
                // no room (or no listener): librdmacm cannot leave a request unanswered; destroying the new ID
                // makes the kernel reject it (cm_destroy_id on a REQ_RCVD ID sends a REJ)
                child.destroyLater();
            } else {
                child.sink = s;
                child.recordEvent(req);
            }
            return;
        }
        RdmaCmId c = state.ids.get(idPtr);
        if (c == null || c.closed || c.sink == null) {
            return;
        }
        CmEventInfo info = info(t, status, ev, c.qpType);
        c.recordEvent(info);
        c.sink.post(info);
    }

    /**
     * The JFR event {@code org.rdma4j.CmEvent} of an rdma_cm event this ID hands to the application, with the
     * fields rdma4j-cm's UserCmId records (docs/observability.md): so a connection over the kernel's CM shows
     * in JDK Mission Control as one over rdma4j's own. Called by the agent only, before the event is
     * acknowledged (the ID's memory is librdmacm's until its destroy, which waits for that acknowledgement).
     */
    private void recordEvent(CmEventInfo e) {
        IbvQp q = qp;
        RdmaEvents.cmEvent(deviceName(), e.type().name(), String.valueOf(localAddress()),
                String.valueOf(remoteAddress()), q == null ? 0 : q.qpNum(), e.status());
    }

    /** {@return the name of the device the ID is bound to ({@code id->verbs}), or null before it is bound} */
    private String deviceName() {
        try {
            Context c = context();
            return c == null ? null : c.device().name();
        } catch (VerbsException e) {
            return null; // a context libibverbs did not list: the event is still recorded, without a device
        }
    }

    /** Destroys the ID from another thread: rdma_destroy_id waits for this event's acknowledgement. */
    private void destroyLater() {
        Thread.ofPlatform().daemon().name("rdma4j-rdmacm-reject").start(this::close);
    }

    private static CmEventInfo info(CmEventType t, int status, MemorySegment ev, QpType qpType) {
        MemorySegment p = ev.asSlice(Rdmacm.EV_PARAM, Rdmacm.EV_SIZE - Rdmacm.EV_PARAM);
        MemorySegment data = p.get(ValueLayout.ADDRESS, Rdmacm.CP_PRIVATE_DATA);
        int len = p.get(ValueLayout.JAVA_BYTE, Rdmacm.CP_PRIVATE_DATA_LEN) & 0xFF;
        byte[] priv = data.equals(MemorySegment.NULL) || len == 0 ? null
                : data.reinterpret(len).toArray(ValueLayout.JAVA_BYTE);
        ConnParam cp = null;
        UdParam ud = null;
        boolean conn = t == CmEventType.CONNECT_REQUEST || t == CmEventType.ESTABLISHED
                || t == CmEventType.CONNECT_RESPONSE;
        if (conn && qpType == QpType.UD) {
            ud = new UdParam(IbvAttrs.ahAttr(p, Rdmacm.UD_AH_ATTR), p.get(ValueLayout.JAVA_INT, Rdmacm.UD_QP_NUM),
                    p.get(ValueLayout.JAVA_INT, Rdmacm.UD_QKEY));
        } else if (conn) {
            cp = new ConnParam().privateData(priv)
                    .responderResources(p.get(ValueLayout.JAVA_BYTE, Rdmacm.CP_RESPONDER_RESOURCES) & 0xFF)
                    .initiatorDepth(p.get(ValueLayout.JAVA_BYTE, Rdmacm.CP_INITIATOR_DEPTH) & 0xFF)
                    .flowControl(p.get(ValueLayout.JAVA_BYTE, Rdmacm.CP_FLOW_CONTROL) != 0)
                    .retryCount(p.get(ValueLayout.JAVA_BYTE, Rdmacm.CP_RETRY_COUNT) & 0xFF)
                    .rnrRetryCount(p.get(ValueLayout.JAVA_BYTE, Rdmacm.CP_RNR_RETRY_COUNT) & 0xFF)
                    .srq(p.get(ValueLayout.JAVA_BYTE, Rdmacm.CP_SRQ) != 0)
                    .qpNum(p.get(ValueLayout.JAVA_INT, Rdmacm.CP_QP_NUM) & 0xFF_FFFF);
        }
        String detail = status == 0 ? null
                : t == CmEventType.REJECTED ? "rejected, reason " + status
                : "status " + status + (status < 0 ? " (" + Errors.describe(-status) + ")" : "");
        return new CmEventInfo(t, status, priv, cp, ud, detail);
    }
}
