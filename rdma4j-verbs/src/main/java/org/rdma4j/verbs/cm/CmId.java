// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.cm;

import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicInteger;

import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.spi.CmEventInfo;
import org.rdma4j.verbs.spi.CmEventSink;
import org.rdma4j.verbs.spi.CmIdSpi;
import org.rdma4j.verbs.spi.CmProvider;

/**
 * A CM ID ({@code struct rdma_cm_id}): one endpoint of a connection, or a listener, with rdma_cm's calls
 * and semantics. Made by {@link CmEventChannel#createId}; its events arrive on that channel.
 *
 * <p><b>Active side:</b> {@link #resolveAddr} (ADDR_RESOLVED: {@link #context()} now names the device and
 * {@link #portNum()} the port the address belongs to), {@link #resolveRoute} (ROUTE_RESOLVED),
 * allocate a PD on {@link #context()}, {@link #createQp} (the ID owns the QP, as {@code rdma_create_qp}
 * makes it), {@link #connect} (ESTABLISHED, or REJECTED / UNREACHABLE / CONNECT_ERROR).
 * <b>Passive side:</b> {@link #bindAddr}, {@link #listen}; each CONNECT_REQUEST brings a new ID
 * ({@link CmEvent#id()}): create its QP, then {@link #accept} (ESTABLISHED when the peer's RTU arrives)
 * or {@link #reject}. <b>Both:</b> {@link #disconnect} (DISCONNECTED on each side, then TIMEWAIT_EXIT),
 * {@link #close}. The CM moves the QP through its states as librdmacm does: INIT at creation, RTR and
 * RTS before the REP (passive) or the RTU (active), ERR on disconnect; {@link #initQpAttr} gives the
 * attributes for applications that move a QP of their own.
 *
 * <p><b>Ownership.</b> The ID owns the QP it created and the CQs it created for it (when the init
 * attributes name none, as {@code rdma_create_qp} does): {@link #destroyQp} and {@link #close} destroy
 * them. The PD belongs to the application, allocated on {@link #context()}, and outlives the QP. The
 * context belongs to the CM: do not close it. Closing the ID fails with EBUSY while events of it are
 * unacknowledged (rdma_destroy_id waits for them); otherwise it does what Linux does when an ID is
 * destroyed: rejects a pending request, sends a DREQ on a connection, releases the port.
 *
 * <p>Errors of calls are {@link VerbsException}s with the errno Linux's rdma_cm returns (EINVAL for a
 * call in the wrong state, EADDRINUSE, EADDRNOTAVAIL, ENODEV ...) and a message naming what to do;
 * errors of the protocol arrive as events. Thread-safe.
 */
public final class CmId implements AutoCloseable {
    private enum State { IDLE, BOUND, LISTEN, ACTIVE, CLOSED }

    /** ucma's max_backlog: the backlog of a listen with a backlog of 0 or less (and the cap). */
    public static final int MAX_BACKLOG = 1024;

    private final RdmaCm cm;
    private final PortSpace portSpace;
    private final QpType qpType;
    private final CmId listener;
    /** Guards the front state and the provider IDs; may be held while calling a provider. */
    private final Object stateLock = new Object();
    /** Guards the channel an event goes to; never held while calling a provider. */
    private final Object routeLock = new Object();
    private final AtomicInteger unacked = new AtomicInteger();
    private final Map<CmOption<?>, Object> options = new LinkedHashMap<>();
    private volatile CmEventChannel channel;
    private volatile State state;
    /** Provider IDs: one, or one per provider for a wildcard bind. */
    private volatile List<CmIdSpi> spis = List.of();
    /** The providers of {@link #spis} after a wildcard bind, in the same order. */
    private List<CmProvider> spiProviders = List.of();
    /** The provider of {@link #spis} when there is one; null for a wildcard bind on several. */
    private volatile CmProvider provider;
    private volatile int backlog = MAX_BACKLOG;
    private volatile Object attachment;
    private volatile CompletionQueue sendCq;
    private volatile CompletionQueue recvCq;
    private volatile boolean ownsSendCq;
    private volatile boolean ownsRecvCq;

    CmId(CmEventChannel channel, PortSpace portSpace, QpType qpType, CmId listener) {
        this.channel = channel;
        this.cm = channel.cm();
        this.portSpace = portSpace;
        this.qpType = qpType;
        this.listener = listener;
        this.state = State.IDLE;
    }

    /** A CM ID for a connection request, already holding the provider's ID. */
    private CmId(CmId listener, CmIdSpi spi, CmProvider provider) {
        this(listener.channel, listener.portSpace, listener.qpType, listener);
        this.spis = List.of(spi);
        this.provider = provider;
        this.state = State.ACTIVE;
    }

    // ------------------------------------------------------------------ identity

    /** {@return the channel its events arrive on} */
    public CmEventChannel channel() {
        return channel;
    }

    /** {@return the port space} */
    public PortSpace portSpace() {
        return portSpace;
    }

    /** {@return the QP type of its connections} */
    public QpType qpType() {
        return qpType;
    }

    /** {@return for the ID of a connection request, the listener it came to; else null} */
    public CmId listener() {
        return listener;
    }

    /** {@return the application's object attached to the ID ({@code id->context}), or null} */
    public Object attachment() {
        return attachment;
    }

    /**
     * Attaches an application object ({@code id->context}).
     *
     * @param o any object the application wants to find through the ID, or null
     */
    public void attach(Object o) {
        this.attachment = o;
    }

    /** {@return the name of the provider serving the ID, or null before it is bound or resolved} */
    public String providerName() {
        CmProvider p = provider;
        return p == null ? null : p.name();
    }

    /** {@return the device context the ID's address belongs to ({@code id->verbs}), or null while unknown} */
    public Context context() {
        CmIdSpi s = primary();
        return s == null ? null : s.context();
    }

    /** {@return the port of {@link #context()} ({@code id->port_num}), or 0 while unknown} */
    public int portNum() {
        CmIdSpi s = primary();
        return s == null ? 0 : s.portNum();
    }

    /** {@return the resolved path, or null before ROUTE_RESOLVED (an ID of a request has it at once)} */
    public CmRoute route() {
        CmIdSpi s = primary();
        return s == null ? null : s.route();
    }

    /**
     * The local address (rdma_get_local_addr): an {@link InetSocketAddress}, or an {@link IbSocketAddress}
     * for an ID bound or resolved with one.
     *
     * @return the address and port, or null before bind/resolve
     */
    public SocketAddress localAddress() {
        CmIdSpi s = primary();
        return s == null ? null : s.localAddress();
    }

    /**
     * The peer's address (rdma_get_peer_addr), of the same kind as {@link #localAddress()}.
     *
     * @return the address and port, or null while unknown
     */
    public SocketAddress remoteAddress() {
        CmIdSpi s = primary();
        return s == null ? null : s.remoteAddress();
    }

    private CmIdSpi primary() {
        List<CmIdSpi> l = spis;
        return l.isEmpty() ? null : l.getFirst();
    }

    private CmIdSpi requireProvider(String verb) {
        CmIdSpi s = primary();
        if (state == State.CLOSED) {
            throw new VerbsException(Errno.EINVAL, verb + ": the CM ID is closed");
        }
        if (s == null || spis.size() > 1) {
            throw new VerbsException(Errno.EINVAL, verb + ": the CM ID has no device yet; resolve an address first"
                    + " (resolveAddr) or bind a local address that a device owns");
        }
        return s;
    }

    // ------------------------------------------------------------------ address and route

    /**
     * rdma_bind_addr: binds the ID to a local address and port. A wildcard address (0.0.0.0, ::) binds the
     * port on every provider, for listening on all devices; a specific address binds the device that owns it.
     *
     * @param address an {@link InetSocketAddress} (port 0: a free one is picked; see {@link #localAddress()}),
     *                or an {@link IbSocketAddress} (a GID and service ID; IDs of {@link PortSpace#IB} only)
     * @throws VerbsException EINVAL if the ID is bound already; EADDRNOTAVAIL if the host has no such address;
     *                        ENODEV if no RDMA device owns it; EADDRINUSE if the port is taken
     */
    public void bindAddr(SocketAddress address) {
        checkAddress(address, "rdma_bind_addr");
        synchronized (stateLock) {
            if (state != State.IDLE) {
                throw new VerbsException(Errno.EINVAL, "rdma_bind_addr: the CM ID is " + describeState()
                        + "; a CM ID binds once (create a new one)");
            }
            bindLocked(address);
            state = State.BOUND;
        }
    }

    /** The IP address an address stands for (an IB address's GID on RoCE); null for a wildcard. */
    static InetAddress ipOf(SocketAddress a) {
        if (a instanceof IbSocketAddress ib) {
            return ib.inetAddress();
        }
        InetAddress ip = ((InetSocketAddress) a).getAddress();
        return ip.isAnyLocalAddress() ? null : ip;
    }

    private void checkAddress(SocketAddress a, String verb) {
        Objects.requireNonNull(a, "address");
        if (a instanceof InetSocketAddress i) {
            if (i.isUnresolved()) {
                throw new VerbsException(Errno.EINVAL, verb + ": " + a + " is not resolved (give an IP address)");
            }
        } else if (a instanceof IbSocketAddress) {
            if (portSpace != PortSpace.IB) {
                throw new VerbsException(Errno.EINVAL, verb + ": an IB address (AF_IB) needs a CM ID of PortSpace.IB,"
                        + " this one is " + portSpace);
            }
        } else {
            throw new VerbsException(Errno.EINVAL, verb + ": " + a.getClass().getName()
                    + " (give an InetSocketAddress or an IbSocketAddress)");
        }
    }

    private void bindLocked(SocketAddress address) {
        InetAddress ip = ipOf(address);
        if (ip == null) {
            bindWildcard(address);
            return;
        }
        RdmaCm.Owner o = cm.owner(ip);
        if (o == null) {
            throw cm.notOwned(ip, "rdma_bind_addr:");
        }
        CmIdSpi s = newSpi(o.provider());
        try {
            s.bind(address);
        } catch (RuntimeException e) {
            s.close();
            throw e;
        }
        provider = o.provider();
        spis = List.of(s);
    }

    private void bindWildcard(SocketAddress address) {
        // A wildcard bind listens on every device. A provider that serves none (librdmacm on a host without the
        // kernel's rdma_cm, the soft CM with no device configured) has nothing to listen on, and its refusal must
        // not fail the bind on the providers that do serve devices; when no provider serves one, every provider
        // is asked, so the error says why.
        List<CmProvider> ps = new ArrayList<>();
        for (CmProvider p : cm.providers()) {
            if (!p.addresses().isEmpty()) {
                ps.add(p);
            }
        }
        if (ps.isEmpty()) {
            ps = cm.providers();
        }
        if (ps.isEmpty()) {
            throw new VerbsException(Errno.ENODEV, "rdma_bind_addr " + address + ": " + cm.describeAddresses());
        }
        VerbsException last = null;
        boolean pick = address instanceof InetSocketAddress i ? i.getPort() == 0 : ((IbSocketAddress) address).serviceId() == 0;
        for (int attempt = 0; attempt < (pick ? 8 : 1); attempt++) {
            List<CmIdSpi> bound = new ArrayList<>();
            try {
                SocketAddress at = address;
                for (CmProvider p : ps) {
                    CmIdSpi s = newSpi(p);
                    bound.add(s);
                    s.bind(at);
                    at = s.localAddress(); // the same port (service ID) on every provider
                }
                provider = ps.size() == 1 ? ps.getFirst() : null;
                spis = List.copyOf(bound);
                spiProviders = List.copyOf(ps); // chooseAmongBound finds a provider's ID by its index here
                return;
            } catch (VerbsException e) {
                bound.forEach(CmIdSpi::close);
                if (e.errno() != Errno.EADDRINUSE) {
                    throw e;
                }
                last = e; // a port free on the first provider but taken on another: pick again
            }
        }
        throw last;
    }

    private CmIdSpi newSpi(CmProvider p) {
        CmIdSpi s = p.createId(new Sink(p), portSpace, qpType);
        try {
            for (Map.Entry<CmOption<?>, Object> e : options.entrySet()) {
                applyOption(s, e.getKey(), e.getValue());
            }
        } catch (RuntimeException e) {
            s.close();
            throw e;
        }
        return s;
    }

    @SuppressWarnings("unchecked")
    private static <T> void applyOption(CmIdSpi s, CmOption<T> o, Object v) {
        s.setOption(o, (T) v);
    }

    /**
     * rdma_listen: connection requests to the bound port arrive as CONNECT_REQUEST events. An unbound ID
     * is bound to 0.0.0.0 and a free port first, as Linux does.
     *
     * @param backlog how many CONNECT_REQUESTs may wait, not yet taken from the channel; further requests
     *                go unanswered, so the peer's REQ retransmission may find room later (Linux's ucma
     *                backlog). 0 or less, or more than {@link #MAX_BACKLOG}: {@value #MAX_BACKLOG}
     * @throws VerbsException EINVAL if the ID listens already or is resolving/connected
     */
    public void listen(int backlog) {
        synchronized (stateLock) {
            if (state == State.IDLE) {
                bindLocked(new InetSocketAddress(InetAddress.ofLiteral("0.0.0.0"), 0));
                state = State.BOUND;
            }
            if (state != State.BOUND) {
                throw new VerbsException(Errno.EINVAL, "rdma_listen: the CM ID is " + describeState()
                        + "; only a bound ID that is not connecting can listen");
            }
            this.backlog = backlog <= 0 || backlog > MAX_BACKLOG ? MAX_BACKLOG : backlog;
            for (CmIdSpi s : spis) {
                s.listen(this.backlog);
            }
            state = State.LISTEN;
        }
    }

    /**
     * rdma_resolve_addr: finds the device that reaches {@code destination} and its GID; ADDR_RESOLVED or
     * ADDR_ERROR follows on the channel. Binds the ID first if it is not bound: to {@code source}, or to
     * the address the host's routing picks (a destination that a local device owns is a loopback on it).
     * When no device reaches the destination, ADDR_ERROR arrives with -ENODEV and a detail listing the
     * local RDMA addresses.
     *
     * @param source      the local address to use, or null (port 0 or the port to bind)
     * @param destination the peer's address and port ({@link InetSocketAddress}), or GID and service ID
     *                    ({@link IbSocketAddress}, IDs of {@link PortSpace#IB})
     * @param timeout     how long resolution may take (rping uses 2 s)
     * @throws VerbsException EINVAL in the wrong state or for mixed address families; EADDRNOTAVAIL / ENODEV
     *                        for a source no device owns
     */
    public void resolveAddr(SocketAddress source, SocketAddress destination, Duration timeout) {
        checkAddress(destination, "rdma_resolve_addr");
        if (source != null) {
            checkAddress(source, "rdma_resolve_addr");
            if (source.getClass() != destination.getClass()) {
                throw new VerbsException(Errno.EINVAL, "rdma_resolve_addr: source " + source + " and destination "
                        + destination + " are different kinds of address");
            }
        }
        checkTimeout(timeout, "rdma_resolve_addr");
        InetAddress dst = ipOf(destination);
        if (dst == null) {
            throw new VerbsException(Errno.EINVAL, "rdma_resolve_addr: the destination " + destination
                    + " is a wildcard address; give the peer's address");
        }
        CmIdSpi chosen;
        SocketAddress src;
        synchronized (stateLock) {
            if (state == State.BOUND) {
                SocketAddress bound = localAddress();
                InetAddress boundIp = bound == null ? null : ipOf(bound);
                if (bound != null && bound.getClass() != destination.getClass()
                        || boundIp != null && !sameFamily(boundIp, dst)) {
                    throw new VerbsException(Errno.EINVAL, "rdma_resolve_addr: the ID is bound to " + bound
                            + ", another kind of address than " + destination);
                }
                RdmaCm.Owner route = cm.route(dst);
                chosen = chooseAmongBound(route);
                if (chosen == null) {
                    postLocal(CmEventInfo.of(CmEventType.ADDR_ERROR, -Errno.ENODEV.value(), "no device bound by this ID"
                            + " reaches " + dst.getHostAddress() + "; " + cm.describeAddresses()));
                    return;
                }
                SocketAddress l = chosen.localAddress();
                src = ipOf(l) == null && route != null && route.provider() == provider
                        ? withIp(l, route.address().address())
                        : l; // a wildcard source the provider routes itself
            } else if (state == State.IDLE) {
                RdmaCm.Owner o;
                InetAddress srcIp = source == null ? null : ipOf(source);
                if (srcIp != null) {
                    if (!sameFamily(srcIp, dst)) {
                        throw new VerbsException(Errno.EINVAL, "rdma_resolve_addr: source " + srcIp.getHostAddress()
                                + " and destination " + dst.getHostAddress() + " are of different address families");
                    }
                    o = cm.owner(srcIp);
                    if (o == null) {
                        throw cm.notOwned(srcIp, "rdma_resolve_addr: source");
                    }
                } else {
                    o = cm.route(dst);
                    if (o == null) {
                        postLocal(CmEventInfo.of(CmEventType.ADDR_ERROR, -Errno.ENODEV.value(), "no RDMA device reaches "
                                + dst.getHostAddress() + "; " + cm.describeAddresses()
                                + " (give a source address one of them owns, or add a device: rdma4j link add ...)"));
                        return;
                    }
                }
                chosen = newSpi(o.provider());
                provider = o.provider();
                spis = List.of(chosen);
                src = source != null ? withIp(source, o.address().address())
                        : destination instanceof IbSocketAddress ? new IbSocketAddress(Gid.ofInetAddress(o.address().address()), 0)
                        : new InetSocketAddress(o.address().address(), 0);
            } else {
                throw new VerbsException(Errno.EINVAL, "rdma_resolve_addr: the CM ID is " + describeState()
                        + "; resolve on a new or bound ID");
            }
            state = State.ACTIVE;
        }
        chosen.resolveAddr(src, destination, timeout);
    }

    /** A wildcard-bound ID chooses the provider that reaches the destination and drops the others. stateLock held. */
    private CmIdSpi chooseAmongBound(RdmaCm.Owner o) {
        List<CmIdSpi> l = spis;
        if (l.size() == 1) {
            return l.getFirst();
        }
        if (o == null) {
            return null;
        }
        int i = spiProviders.indexOf(o.provider());
        if (i < 0) {
            return null;
        }
        CmIdSpi keep = l.get(i);
        for (CmIdSpi s : l) {
            if (s != keep) {
                s.close();
            }
        }
        provider = o.provider();
        spis = List.of(keep);
        return keep;
    }

    /** The same address kind and port (service ID) with another IP (GID). */
    private static SocketAddress withIp(SocketAddress a, InetAddress ip) {
        if (a instanceof IbSocketAddress ib) {
            return new IbSocketAddress(Gid.ofInetAddress(ip), ib.serviceId(), ib.pkey());
        }
        return new InetSocketAddress(ip, ((InetSocketAddress) a).getPort());
    }

    private static boolean sameFamily(InetAddress a, InetAddress b) {
        return (a instanceof Inet4Address) == (b instanceof Inet4Address) && (a instanceof Inet6Address) == (b instanceof Inet6Address);
    }

    /**
     * rdma_resolve_route: computes the path (locally on RoCE); ROUTE_RESOLVED or ROUTE_ERROR follows.
     *
     * @param timeout how long it may take
     * @throws VerbsException EINVAL before ADDR_RESOLVED
     */
    public void resolveRoute(Duration timeout) {
        checkTimeout(timeout, "rdma_resolve_route");
        requireProvider("rdma_resolve_route").resolveRoute(timeout);
    }

    private static void checkTimeout(Duration timeout, String verb) {
        if (timeout == null || timeout.isNegative() || timeout.isZero()) {
            throw new VerbsException(Errno.EINVAL, verb + ": timeout " + timeout + " (give a positive duration, e.g. 2 s)");
        }
    }

    // ------------------------------------------------------------------ QP

    /**
     * rdma_create_qp: creates the ID's QP on {@code pd} and moves it to INIT (RTS for UD, which needs no
     * connection). CQs left null in {@code attrs} are created on {@link #context()} for the QP (with
     * {@code max_send_wr} / {@code max_recv_wr} entries) and belong to the ID.
     *
     * @param pd    a protection domain allocated on {@link #context()}
     * @param attrs the creation attributes; its type must be the ID's QP type (not modified)
     * @return the QP, owned by this ID
     * @throws VerbsException EINVAL before the ID has a device, for a PD of another context, a type other
     *                        than the ID's, or when the ID has a QP already
     */
    public QueuePair createQp(ProtectionDomain pd, QpInitAttributes attrs) {
        Objects.requireNonNull(attrs, "attrs");
        CmIdSpi s = requireProvider("rdma_create_qp");
        if (pd == null) {
            throw new VerbsException(Errno.EINVAL, "rdma_create_qp: no PD given; allocate one on the ID's context"
                    + " (id.context().allocPd())");
        }
        Context ctx = s.context();
        if (pd.context() != ctx) {
            throw new VerbsException(Errno.EINVAL, "rdma_create_qp: the PD is on " + pd.context().device().name()
                    + " but the CM ID resolved to " + (ctx == null ? "no device" : ctx.device().name())
                    + "; allocate the PD on id.context()");
        }
        if (attrs.type() != qpType) {
            throw new VerbsException(Errno.EINVAL, "rdma_create_qp: a " + attrs.type() + " QP on a CM ID created for "
                    + qpType + " QPs (create the ID with that QP type)");
        }
        synchronized (stateLock) {
            if (s.qp() != null) {
                throw new VerbsException(Errno.EINVAL, "rdma_create_qp: the CM ID has a QP already (0x"
                        + Integer.toHexString(s.qp().qpNum()) + "); destroyQp first");
            }
            QpCapabilities cap = attrs.cap();
            CompletionQueue scq = attrs.sendCq();
            CompletionQueue rcq = attrs.recvCq();
            boolean newS = false;
            boolean newR = false;
            try {
                if (scq == null) {
                    scq = ctx.createCq(Math.max(1, cap.maxSendWr()), null, 0);
                    newS = true;
                }
                if (rcq == null) {
                    rcq = ctx.createCq(Math.max(1, cap.maxRecvWr()), null, 0);
                    newR = true;
                }
                QpInitAttributes a = new QpInitAttributes().type(attrs.type()).sendCq(scq).recvCq(rcq)
                        .srq(attrs.srq()).cap(cap).sqSigAll(attrs.sqSigAll());
                QueuePair qp = s.createQp(pd, a);
                sendCq = scq;
                recvCq = rcq;
                ownsSendCq = newS;
                ownsRecvCq = newR;
                return qp;
            } catch (RuntimeException e) {
                if (newS) {
                    scq.close();
                }
                if (newR) {
                    rcq.close();
                }
                throw e;
            }
        }
    }

    /** {@return the ID's QP ({@code id->qp}), or null} */
    public QueuePair qp() {
        CmIdSpi s = primary();
        return s == null || spis.size() > 1 ? null : s.qp();
    }

    /** {@return the send CQ of the ID's QP (the application's or the one the ID created), or null} */
    public CompletionQueue sendCq() {
        return qp() == null ? null : sendCq;
    }

    /** {@return the receive CQ of the ID's QP, or null} */
    public CompletionQueue recvCq() {
        return qp() == null ? null : recvCq;
    }

    /** rdma_destroy_qp: destroys the ID's QP and the CQs the ID created for it; a no-op without a QP. */
    public void destroyQp() {
        CmIdSpi s = primary();
        if (s == null || spis.size() > 1) {
            return;
        }
        synchronized (stateLock) {
            s.destroyQp();
            closeOwnedCqs();
        }
    }

    private void closeOwnedCqs() {
        CompletionQueue scq = sendCq;
        CompletionQueue rcq = recvCq;
        boolean s = ownsSendCq;
        boolean r = ownsRecvCq;
        sendCq = null;
        recvCq = null;
        ownsSendCq = false;
        ownsRecvCq = false;
        if (s && scq != null) {
            scq.close();
        }
        if (r && rcq != null && rcq != scq) {
            rcq.close();
        }
    }

    /**
     * rdma_init_qp_attr: the attributes the CM computes for moving a QP of this connection to
     * {@code state}, for applications that manage a QP of their own (connect with
     * {@link ConnParam#qpNum(int)}, move the QP with these, then {@link #establish()}).
     *
     * @param state INIT, RTR or RTS (ERR: just the state)
     * @return attributes with the mask of those to apply
     * @throws VerbsException EINVAL before the values are known (RTR before the peer answered)
     */
    public QpAttributes initQpAttr(QpState state) {
        Objects.requireNonNull(state, "state");
        return requireProvider("rdma_init_qp_attr").initQpAttr(state);
    }

    // ------------------------------------------------------------------ connection

    /**
     * rdma_connect: sends the connection request (a REQ; a SIDR_REQ for UD) after ROUTE_RESOLVED.
     *
     * @param param the parameters, or null for {@link ConnParam#defaults()} (librdmacm's NULL)
     * @throws VerbsException EINVAL before ROUTE_RESOLVED, twice, or with more private data than the
     *                        request carries ({@value ConnParam#MAX_CONNECT_PRIVATE_DATA} bytes,
     *                        {@value ConnParam#MAX_UD_CONNECT_PRIVATE_DATA} for UD; with IB addresses,
     *                        which send no rdma_cm header, {@value ConnParam#MAX_IB_CONNECT_PRIVATE_DATA}
     *                        and {@value ConnParam#MAX_IB_UD_CONNECT_PRIVATE_DATA})
     */
    public void connect(ConnParam param) {
        ConnParam p = param == null ? ConnParam.defaults() : param.copy();
        boolean ib = localAddress() instanceof IbSocketAddress; // AF_IB: no rdma_cm header
        int max = qpType == QpType.UD ? (ib ? ConnParam.MAX_IB_UD_CONNECT_PRIVATE_DATA : ConnParam.MAX_UD_CONNECT_PRIVATE_DATA)
                : ib ? ConnParam.MAX_IB_CONNECT_PRIVATE_DATA : ConnParam.MAX_CONNECT_PRIVATE_DATA;
        checkData("rdma_connect", p.privateDataLength(), max);
        requireProvider("rdma_connect").connect(p);
    }

    /**
     * rdma_accept: for the ID of a CONNECT_REQUEST, moves its QP to RTR and RTS and sends the REP
     * (SIDR_REP for UD); ESTABLISHED follows when the peer's RTU arrives.
     *
     * @param param the parameters, or null for {@link ConnParam#defaults()}: depths are the lesser of the
     *              request's and the device's
     * @throws VerbsException EINVAL on an ID that is not a pending request (accepting twice, a listener,
     *                        an active ID), without a QP and without {@link ConnParam#qpNum}, or with
     *                        more than {@value ConnParam#MAX_ACCEPT_PRIVATE_DATA} bytes of private data
     */
    public void accept(ConnParam param) {
        ConnParam p = param == null ? ConnParam.defaults() : param.copy();
        int max = qpType == QpType.UD ? ConnParam.MAX_UD_ACCEPT_PRIVATE_DATA : ConnParam.MAX_ACCEPT_PRIVATE_DATA;
        checkData("rdma_accept", p.privateDataLength(), max);
        if (state == State.LISTEN) {
            throw new VerbsException(Errno.EINVAL, "rdma_accept: this is the listening ID; accept the ID of the"
                    + " CONNECT_REQUEST (event.id())");
        }
        requireProvider("rdma_accept").accept(p);
    }

    /**
     * rdma_reject: refuses a connection request (REJ with reason 28, consumer defined; SIDR_REP with
     * status REJECT for UD). The peer sees REJECTED with this private data.
     *
     * @param privateData up to {@value ConnParam#MAX_REJECT_PRIVATE_DATA} bytes, or null
     * @throws VerbsException EINVAL on an ID that is not a pending request
     */
    public void reject(byte[] privateData) {
        byte[] d = privateData == null ? new byte[0] : privateData.clone();
        int max = qpType == QpType.UD ? ConnParam.MAX_UD_ACCEPT_PRIVATE_DATA : ConnParam.MAX_REJECT_PRIVATE_DATA;
        checkData("rdma_reject", d.length, max);
        requireProvider("rdma_reject").reject(d);
    }

    private static void checkData(String verb, int len, int max) {
        if (len > max) {
            throw new VerbsException(Errno.EINVAL, verb + ": " + len + " bytes of private data, at most " + max
                    + " fit; send the rest over the connection");
        }
    }

    /**
     * rdma_disconnect: moves the QP to ERR (its outstanding requests complete with FLUSH_ERR) and sends a
     * DREQ, or the DREP when the peer's DREQ came first. DISCONNECTED follows on both sides.
     *
     * @throws VerbsException EINVAL if the ID is not connected (disconnecting twice, never connected)
     */
    public void disconnect() {
        requireProvider("rdma_disconnect").disconnect();
    }

    /**
     * rdma_establish: for an ID without a QP of its own, after CONNECT_RESPONSE, reports that the
     * application moved its QP to RTS and sends the RTU.
     *
     * @throws VerbsException EINVAL unless a CONNECT_RESPONSE is pending
     */
    public void establish() {
        requireProvider("rdma_establish").establish();
    }

    /**
     * rdma_set_option.
     *
     * @param <T>    the value type
     * @param option the option
     * @param value  its value
     * @throws VerbsException EINVAL for a bad value; EOPNOTSUPP if the provider cannot honour it
     */
    public <T> void setOption(CmOption<T> option, T value) {
        Objects.requireNonNull(option, "option");
        Objects.requireNonNull(value, "value");
        if (value instanceof Integer i) {
            int max = option == CmOption.MAX_CM_RETRIES ? 15 : option == CmOption.TOS ? 255 : 31;
            if (i < 0 || i > max) {
                throw new VerbsException(Errno.EINVAL, "rdma_set_option " + option + "=" + i + " (expected 0.." + max + ")");
            }
        }
        synchronized (stateLock) {
            if (state == State.CLOSED) {
                throw new VerbsException(Errno.EINVAL, "rdma_set_option: the CM ID is closed");
            }
            for (CmIdSpi s : spis) {
                s.setOption(option, value);
            }
            options.put(option, value);
        }
    }

    /**
     * rdma_migrate_id: moves the ID, and its events not yet taken, to another channel.
     *
     * @param to the channel its events go to from now on (of the same {@link RdmaCm})
     * @throws VerbsException EINVAL for a channel of another provider set, or a closed one
     */
    public void migrate(CmEventChannel to) {
        Objects.requireNonNull(to, "to");
        if (to.cm() != cm) {
            throw new VerbsException(Errno.EINVAL, "rdma_migrate_id: the channel belongs to another RdmaCm");
        }
        synchronized (routeLock) {
            CmEventChannel from = channel;
            if (from == to) {
                return;
            }
            to.register(this);
            List<CmEvent> moved = from.drain(this, true);
            for (CmEvent e : moved) {
                if (e.type() == CmEventType.CONNECT_REQUEST && e.id() != this) {
                    e.id().moveTo(to);
                }
            }
            channel = to;
            from.unregister(this);
            to.adopt(moved);
        }
    }

    private void moveTo(CmEventChannel to) {
        synchronized (routeLock) {
            CmEventChannel from = channel;
            to.register(this);
            List<CmEvent> moved = from.drain(this, false);
            channel = to;
            from.unregister(this);
            to.adopt(moved);
        }
    }

    /**
     * rdma_destroy_id: destroys the ID's QP and the CQs it created, then does what Linux does when an ID
     * goes: a pending request is rejected, an outstanding REQ is rejected with reason 4 (timeout), a
     * connection is disconnected (DREQ), a received DREQ is answered; the port is released. Requests queued
     * on a listener and not taken are rejected. Idempotent.
     *
     * @throws VerbsException EBUSY while events of this ID are unacknowledged: acknowledge them first
     */
    @Override
    public void close() {
        List<CmIdSpi> toClose;
        synchronized (stateLock) {
            if (state == State.CLOSED) {
                return;
            }
            int n = unacked.get();
            if (n > 0) {
                throw new VerbsException(Errno.EBUSY, "rdma_destroy_id: " + n + " event(s) of this CM ID are not"
                        + " acknowledged; ack them first (event.ack() or try-with-resources)");
            }
            state = State.CLOSED;
            toClose = spis;
        }
        CmEventChannel ch;
        synchronized (routeLock) {
            ch = channel;
        }
        for (CmEvent e : ch.drain(this, true)) {
            if (e.type() == CmEventType.CONNECT_REQUEST && e.id() != this) {
                e.id().closeQuietly();
            }
        }
        try {
            if (toClose.size() == 1) {
                toClose.getFirst().destroyQp();
            }
            closeOwnedCqs();
        } finally {
            for (CmIdSpi s : toClose) {
                s.close();
            }
            ch.unregister(this);
        }
    }

    private void closeQuietly() {
        try {
            close();
        } catch (RuntimeException e) {
            // an unretrieved request has no acknowledgements pending; nothing to report
        }
    }

    // ------------------------------------------------------------------ events (package-private)

    void eventTaken() {
        unacked.incrementAndGet();
    }

    void eventAcked() {
        unacked.decrementAndGet();
    }

    /** {@return how many events of this ID were taken and not acknowledged} */
    public int unackedEvents() {
        return unacked.get();
    }

    private void postLocal(CmEventInfo info) {
        deliver(info);
    }

    private void deliver(CmEventInfo info) {
        synchronized (routeLock) {
            if (state != State.CLOSED) {
                channel.enqueue(this, null, info);
            }
        }
    }

    private CmEventSink request(CmIdSpi newId, CmEventInfo info, CmProvider from) {
        CmId child;
        synchronized (routeLock) {
            if (state != State.LISTEN || channel.queuedRequests(this) >= backlog) {
                return null;
            }
            child = new CmId(this, newId, from);
            try {
                channel.register(child);
            } catch (VerbsException closed) {
                return null;
            }
            channel.enqueue(child, this, info);
        }
        return child.new Sink(from);
    }

    private String describeState() {
        return switch (state) {
            case IDLE -> "not bound";
            case BOUND -> "bound to " + localAddress();
            case LISTEN -> "listening on " + localAddress();
            case ACTIVE -> listener != null ? "a connection request's ID" : "resolving or connected";
            case CLOSED -> "closed";
        };
    }

    /** The sink a provider ID reports to: events go to this ID's current channel. */
    private final class Sink implements CmEventSink {
        private final CmProvider from;

        Sink(CmProvider from) {
            this.from = from;
        }

        @Override
        public void post(CmEventInfo event) {
            deliver(event);
        }

        @Override
        public CmEventSink connectRequest(CmIdSpi newId, CmEventInfo event) {
            return request(newId, event, from);
        }
    }

    @Override
    public String toString() {
        SocketAddress l = localAddress();
        SocketAddress r = remoteAddress();
        return "rdma_cm_id{" + portSpace + "/" + qpType + ", " + describeState()
                + (l != null && state != State.BOUND && state != State.LISTEN ? ", local " + l : "")
                + (r != null ? ", peer " + r : "") + '}';
    }
}
