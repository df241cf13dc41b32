// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.cm;

import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Objects;

import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.VerbsException;

/**
 * A connected endpoint: an RC (or UC) QP in RTS with its CQs and PD, connected by the CM to a peer, as
 * DiSNI's endpoints and JUCX's listener hand them out. Made by {@link #connect} or
 * {@link RdmaServer#accept}; post on {@link #qp()}, poll {@link #sendCq()} and {@link #recvCq()}, register
 * memory on {@link #pd()}. {@link #close()} disconnects and frees everything the endpoint made (close the
 * memory regions registered on its PD first, or tie them to it with {@link #closeWith}). Thread-safe for the
 * calls here; the verbs objects follow their own rules.
 *
 * <pre>{@code
 * try (RdmaServer server = RdmaServer.bind(new InetSocketAddress(7471), new EndpointOptions());
 *      RdmaEndpoint client = RdmaEndpoint.connect(new InetSocketAddress("10.0.0.1", 7471));
 *      RdmaEndpoint accepted = server.accept()) {
 *     // client.qp() and accepted.qp() are connected and in RTS
 * }
 * }</pre>
 */
public final class RdmaEndpoint implements AutoCloseable {
    private static final Duration SLICE = Duration.ofMillis(50);

    private final CmEventChannel channel;
    private final CmId id;
    private final ProtectionDomain pd;
    private final QueuePair qp;
    private volatile byte[] peerData = new byte[0];
    private volatile ConnParam peerParam;
    private volatile boolean connected;
    private volatile boolean closed;
    private volatile boolean disconnecting;

    private final boolean ownsPd;
    private final Deque<AutoCloseable> resources = new ArrayDeque<>();
    private volatile byte[] ownData;

    private final Duration disconnectTimeout;

    private RdmaEndpoint(CmEventChannel channel, CmId id, ProtectionDomain pd, boolean ownsPd, QueuePair qp,
            byte[] ownData, Duration disconnectTimeout) {
        this.disconnectTimeout = disconnectTimeout;
        this.channel = channel;
        this.id = id;
        this.pd = pd;
        this.ownsPd = ownsPd;
        this.qp = qp;
        this.ownData = ownData;
    }

    /**
     * Connects with the default options.
     *
     * @param to the server
     * @return the connected endpoint
     * @throws RdmaConnectException when the connection does not come up
     */
    public static RdmaEndpoint connect(InetSocketAddress to) {
        return connect(to, new EndpointOptions());
    }

    /**
     * Connects: resolves the address and route, creates the PD, CQs and QP on the device that reaches
     * {@code to}, runs {@link EndpointOptions#beforeConnect}, sends the request and waits for ESTABLISHED.
     *
     * @param to      the server
     * @param options how
     * @return the connected endpoint
     * @throws RdmaConnectException when the connection does not come up: ECONNREFUSED when rejected (the
     *                              reason and the peer's data are in the exception), ETIMEDOUT when the
     *                              peer does not answer within the connect timeout, the resolution's
     *                              errno when no device reaches {@code to}
     */
    public static RdmaEndpoint connect(InetSocketAddress to, EndpointOptions options) {
        EndpointOptions o = options.copy();
        long deadline = System.nanoTime() + o.connectTimeout().toNanos();
        CmEventChannel ch = o.cm().createEventChannel();
        CmId id = null;
        RdmaEndpoint ep = null;
        try {
            id = ch.createId(PortSpace.TCP, o.qpType());
            if (o.tos() >= 0) {
                id.setOption(CmOption.TOS, o.tos());
            }
            id.resolveAddr(o.source(), to, o.resolveTimeout());
            expect(ch, CmEventType.ADDR_RESOLVED, deadline, to).ack();
            id.resolveRoute(o.resolveTimeout());
            expect(ch, CmEventType.ROUTE_RESOLVED, deadline, to).ack();
            ep = create(ch, id, o);
            o.beforeConnect().accept(ep);
            id.connect(ep.param(o));
            CmEvent est = expect(ch, CmEventType.ESTABLISHED, deadline, to);
            ep.established(est, true);
            return ep;
        } catch (RuntimeException e) {
            if (ep != null) {
                ep.closeQuietly();
            } else {
                cleanup(ch, id);
            }
            throw e;
        }
    }

    static RdmaEndpoint create(CmEventChannel ch, CmId id, EndpointOptions o) {
        Context ctx = id.context();
        boolean own = o.protectionDomains() == null;
        ProtectionDomain pd = own ? ctx.allocPd() : o.protectionDomains().apply(ctx);
        if (pd == null || pd.context() != ctx) {
            throw new VerbsException(Errno.EINVAL, "EndpointOptions.protectionDomains returned " + pd
                    + " for " + ctx + "; return a PD allocated on that context");
        }
        try {
            QueuePair qp = id.createQp(pd, new QpInitAttributes().type(o.qpType())
                    .cap(new QpCapabilities(o.sendQueueDepth(), o.recvQueueDepth(), o.maxSge(), o.maxSge(), o.maxInlineData())));
            return new RdmaEndpoint(ch, id, pd, own, qp, o.privateData(), o.disconnectTimeout());
        } catch (RuntimeException e) {
            if (own) {
                pd.close();
            }
            throw e;
        }
    }

    /**
     * Ties a resource to the endpoint: {@link #close()} closes it after the QP and before the PD, the last
     * tied first, also when the connection fails to come up after {@link EndpointOptions#beforeConnect}
     * ran. For the memory regions registered on {@link #pd()} and their buffers.
     *
     * @param <T>      the resource's type
     * @param resource what to close
     * @return {@code resource}
     */
    public <T extends AutoCloseable> T closeWith(T resource) {
        synchronized (resources) {
            resources.push(Objects.requireNonNull(resource, "resource"));
        }
        return resource;
    }

    /**
     * Replaces, for this endpoint only, the private data its request (connect) or accept (server) carries;
     * call it from {@link EndpointOptions#beforeConnect}, e.g. to send the address and rkey of memory
     * registered there.
     *
     * @param data at most {@value ConnParam#MAX_CONNECT_PRIVATE_DATA} bytes for a request,
     *             {@value ConnParam#MAX_ACCEPT_PRIVATE_DATA} for an accept (copied), or null for none
     * @throws VerbsException EINVAL once the connection is made
     */
    public void privateData(byte[] data) {
        if (connected || closed) {
            throw new VerbsException(Errno.EINVAL, "the private data goes with the request or accept; set it in"
                    + " EndpointOptions.beforeConnect");
        }
        ownData = data == null ? null : data.clone();
    }

    /** The connection parameters of the options: the read depth capped at the device's, finite retries. */
    ConnParam param(EndpointOptions o) {
        var dev = context().queryDevice();
        int resp = Math.min(o.readDepth(), dev.maxQpRdAtom());
        int init = Math.min(o.readDepth(), dev.maxQpInitRdAtom());
        return new ConnParam().responderResources(resp).initiatorDepth(init).retryCount(o.retryCount())
                .rnrRetryCount(o.rnrRetryCount()).privateData(ownData);
    }

    /** The connection is up; the active side takes the accept's private data and parameters from it. */
    void established(CmEvent e, boolean active) {
        try (e) {
            if (active) {
                peerData = e.privateData();
                peerParam = e.connParam();
            }
            connected = true;
        }
    }

    /**
     * Waits for the event that must come next; anything else ends the attempt.
     *
     * @throws RdmaConnectException for an error event or the deadline
     */
    static CmEvent expect(CmEventChannel ch, CmEventType type, long deadline, SocketAddress to) {
        long left = deadline - System.nanoTime();
        CmEvent e = left > 0 ? ch.getEvent(Duration.ofNanos(left)) : null;
        if (e == null) {
            throw new RdmaConnectException(Errno.ETIMEDOUT, "no " + type.rdmaName() + " from " + to
                    + " within the connect timeout (is a server listening there? raise EndpointOptions.connectTimeout"
                    + " if it is slow)", null, -Errno.ETIMEDOUT.value(), null);
        }
        if (e.type() == type) {
            return e;
        }
        try (e) {
            throw failure(e, to);
        }
    }

    static RdmaConnectException failure(CmEvent e, SocketAddress to) {
        return switch (e.type()) {
            case REJECTED -> new RdmaConnectException(Errno.ECONNREFUSED, to + " rejected the connection: "
                    + (e.rejectReason() == null ? "reason " + e.status() : e.rejectReason().description())
                    + (e.rejectReason() == RejectReason.INVALID_SERVICE_ID ? " (nobody listens on that port)" : ""),
                    e.type(), e.status(), e.privateData());
            case UNREACHABLE -> new RdmaConnectException(e.status() == -Errno.ETIMEDOUT.value() ? Errno.ETIMEDOUT
                    : Errno.EHOSTUNREACH, to + " did not answer the connection request"
                    + (e.detail() != null ? ": " + e.detail() : ""), e.type(), e.status(), e.privateData());
            default -> new RdmaConnectException(e.errno() != null ? e.errno() : Errno.ECONNREFUSED,
                    e.type().rdmaName() + " connecting to " + to + (e.detail() != null ? ": " + e.detail() : ""),
                    e.type(), e.status(), e.privateData());
        };
    }

    static void cleanup(CmEventChannel ch, CmId id) {
        for (CmEvent e; (e = ch.pollEvent()) != null; ) {
            e.ack();
        }
        if (id != null) {
            try {
                id.close();
            } catch (VerbsException ignored) {
                // unwinding a failed attempt
            }
        }
        try {
            ch.close();
        } catch (VerbsException ignored) {
            // unwinding a failed attempt
        }
    }

    /** {@return the device context of the connection} */
    public Context context() {
        return id.context();
    }

    /** {@return the protection domain the endpoint allocated (register memory here)} */
    public ProtectionDomain pd() {
        return pd;
    }

    /** {@return the QP, in RTS once connected} */
    public QueuePair qp() {
        return qp;
    }

    /** {@return the send CQ} */
    public CompletionQueue sendCq() {
        return id.sendCq();
    }

    /** {@return the receive CQ} */
    public CompletionQueue recvCq() {
        return id.recvCq();
    }

    /** {@return the CM ID of the connection (for its route, addresses, options)} */
    public CmId cmId() {
        return id;
    }

    /** {@return the peer's private data: 196 bytes of its accept (client), 56 of its request (server)} */
    public byte[] peerPrivateData() {
        return peerData.clone();
    }

    /** {@return the peer's connection parameters from this side's view, or null} */
    public ConnParam peerParam() {
        ConnParam p = peerParam;
        return p == null ? null : p.copy();
    }

    /** {@return the local address} */
    public SocketAddress localAddress() {
        return id.localAddress();
    }

    /** {@return the peer's address} */
    public SocketAddress remoteAddress() {
        return id.remoteAddress();
    }

    void peerRequest(byte[] data, ConnParam param) {
        peerData = data;
        peerParam = param;
    }

    /**
     * Whether the connection is still up: false once the peer disconnected (its DREQ arrived) or this side
     * closed. Does not block.
     *
     * @return whether connected
     */
    public boolean isConnected() {
        drainEvents(Duration.ZERO);
        return connected;
    }

    /**
     * Waits until the peer disconnects.
     *
     * @param timeout how long
     * @return true if it did
     */
    public boolean awaitDisconnect(Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (connected) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return false;
            }
            drainEvents(Duration.ofNanos(left));
        }
        return true;
    }

    /** Takes the channel's events, waiting at most {@code wait} (in slices, so close is not held up). */
    private void drainEvents(Duration wait) {
        Duration slice = wait.compareTo(SLICE) < 0 ? wait : SLICE;
        synchronized (this) {
            for (CmEvent e = closed ? null : channel.getEvent(slice); e != null; e = channel.pollEvent()) {
                CmEventType t = e.type();
                e.ack();
                if (t == CmEventType.DISCONNECTED || t == CmEventType.DEVICE_REMOVAL) {
                    if (connected && !disconnecting) {
                        answerDisconnect();
                    }
                    connected = false;
                }
            }
        }
    }

    /** The peer disconnected: answer its DREQ now (the QP goes to ERR), as rping does on DISCONNECTED. */
    private void answerDisconnect() {
        disconnecting = true;
        try {
            id.disconnect();
        } catch (VerbsException ignored) {
            // the CM already answered (the DREQ timed out, or the device went)
        }
    }

    /**
     * Disconnects (the QP's outstanding requests flush), waits for the peer's answer (up to
     * {@link EndpointOptions#disconnectTimeout}, a second by default), then
     * destroys the QP, its CQs, what {@link #closeWith} tied to the endpoint, the PD (unless it came from
     * {@link EndpointOptions#protectionDomains}), the CM ID and its channel.
     *
     * @throws VerbsException EBUSY if memory regions registered on {@link #pd()} are still open (and the
     *                        endpoint allocated the PD)
     */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        if (connected && !disconnecting) {
            disconnecting = true;
            try {
                id.disconnect();
            } catch (VerbsException ignored) {
                // the peer's DREQ came first and was answered
            }
            awaitDisconnect(disconnectTimeout);
        }
        closed = true;
        connected = false;
        for (CmEvent e; (e = channel.pollEvent()) != null; ) {
            e.ack();
        }
        try {
            id.destroyQp();
            RuntimeException failed = closeResources();
            if (failed != null) {
                throw failed;
            }
            if (ownsPd) {
                pd.close();
            }
        } finally {
            id.close();
            channel.close();
        }
    }

    private RuntimeException closeResources() {
        RuntimeException failed = null;
        while (true) {
            AutoCloseable r;
            synchronized (resources) {
                r = resources.poll();
            }
            if (r == null) {
                return failed;
            }
            try {
                r.close();
            } catch (Exception e) {
                RuntimeException x = e instanceof RuntimeException re ? re
                        : new VerbsException(Errno.EINVAL, "closing " + r + " with the endpoint failed: " + e);
                if (failed == null) {
                    failed = x;
                } else {
                    failed.addSuppressed(x);
                }
            }
        }
    }

    void closeQuietly() {
        try {
            close();
        } catch (VerbsException ignored) {
            // unwinding a failed attempt
        }
    }

    @Override
    public String toString() {
        return "RdmaEndpoint{" + localAddress() + " -> " + remoteAddress() + ", qp 0x" + Integer.toHexString(qp.qpNum())
                + (connected ? ", connected" : "") + '}';
    }
}
