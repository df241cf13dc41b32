// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.cm;

import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.time.Duration;

import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;

/**
 * A listener on an IP address and port (rdma_cm's TCP port space) that hands out connected
 * {@link RdmaEndpoint}s, as a {@link java.net.ServerSocket} hands out sockets. Each accepted endpoint has
 * its own event channel, PD, CQs and QP on the device the request arrived on; the options' private data
 * goes out with every accept and {@link EndpointOptions#beforeConnect} runs on every endpoint before it
 * is accepted. A request whose connection does not come up (the peer gives up, its RTU never arrives
 * within the connect timeout) is cleaned up and the next one is taken. Thread-safe: concurrent
 * {@link #accept} calls take turns.
 *
 * <pre>{@code
 * EndpointOptions o = new EndpointOptions().beforeConnect(ep -> postReceives(ep));
 * try (RdmaServer server = RdmaServer.bind(new InetSocketAddress(7471), o)) {
 *     while (true) {
 *         RdmaEndpoint ep = server.accept();
 *         serve(ep); // close it when done
 *     }
 * }
 * }</pre>
 */
public final class RdmaServer implements AutoCloseable {
    private final EndpointOptions options;
    private final CmEventChannel channel;
    private final CmId listener;
    private final Object acceptLock = new Object();
    private volatile boolean closed;

    private RdmaServer(EndpointOptions options, CmEventChannel channel, CmId listener) {
        this.options = options;
        this.channel = channel;
        this.listener = listener;
    }

    /**
     * Listens with the default options.
     *
     * @param address the address and port (wildcard address: every RDMA device; port 0: one is chosen)
     * @return the listening server
     */
    public static RdmaServer bind(InetSocketAddress address) {
        return bind(address, new EndpointOptions());
    }

    /**
     * Binds and listens.
     *
     * @param address the address and port (wildcard address: every RDMA device; port 0: one is chosen)
     * @param options the endpoints' options and the backlog
     * @return the listening server
     * @throws VerbsException EADDRINUSE when the port is taken, EADDRNOTAVAIL when no local RDMA device has
     *                        the address, ENODEV when the address is on a device without RDMA
     */
    public static RdmaServer bind(InetSocketAddress address, EndpointOptions options) {
        EndpointOptions o = options.copy();
        CmEventChannel ch = o.cm().createEventChannel();
        CmId id = null;
        try {
            id = ch.createId(PortSpace.TCP, o.qpType());
            if (o.tos() >= 0) {
                id.setOption(CmOption.TOS, o.tos());
            }
            id.bindAddr(address);
            id.listen(o.backlog());
            return new RdmaServer(o, ch, id);
        } catch (RuntimeException e) {
            RdmaEndpoint.cleanup(ch, id);
            throw e;
        }
    }

    /** {@return the address and port listened on} */
    public SocketAddress localAddress() {
        return listener.localAddress();
    }

    /** {@return the listening CM ID} */
    public CmId cmId() {
        return listener;
    }

    /**
     * Waits for the next connection and returns it connected.
     *
     * @return the endpoint
     * @throws VerbsException EINVAL once the server is closed
     */
    public RdmaEndpoint accept() {
        RdmaEndpoint ep;
        do {
            ep = accept(Duration.ofDays(1));
        } while (ep == null);
        return ep;
    }

    /**
     * Waits up to {@code timeout} for a connection request and returns its endpoint connected.
     *
     * @param timeout how long to wait for a request (the handshake after it has the connect timeout)
     * @return the endpoint, or null if no request came in time
     * @throws VerbsException EINVAL once the server is closed
     */
    public RdmaEndpoint accept(Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        synchronized (acceptLock) {
            while (true) {
                if (closed) {
                    throw new VerbsException(Errno.EINVAL, "the RDMA server on " + localAddress() + " is closed; bind a new one");
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return null;
                }
                CmEvent e = channel.getEvent(Duration.ofNanos(Math.min(left, Duration.ofMillis(100).toNanos())));
                if (e == null) {
                    continue;
                }
                if (e.type() != CmEventType.CONNECT_REQUEST) {
                    boolean removed = e.type() == CmEventType.DEVICE_REMOVAL;
                    e.ack();
                    if (removed) {
                        throw new VerbsException(Errno.ENODEV, "the device of " + localAddress() + " went away");
                    }
                    continue;
                }
                RdmaEndpoint ep = take(e);
                if (ep != null) {
                    return ep;
                }
            }
        }
    }

    /** Accepts one request; null when its connection did not come up. */
    private RdmaEndpoint take(CmEvent req) {
        CmId child = req.id();
        byte[] data = req.privateData();
        ConnParam theirs = req.connParam();
        req.ack();
        CmEventChannel ch = options.cm().createEventChannel();
        RdmaEndpoint ep = null;
        try {
            child.migrate(ch);
            ep = RdmaEndpoint.create(ch, child, options);
            ep.peerRequest(data, theirs);
            options.beforeConnect().accept(ep);
            ConnParam p = ep.param(options);
            if (theirs != null) {
                // the request's view: its responder resources bound what this side may initiate
                p.initiatorDepth(Math.min(p.initiatorDepth(), theirs.initiatorDepth()));
            }
            child.accept(p);
            long deadline = System.nanoTime() + options.connectTimeout().toNanos();
            CmEvent est = RdmaEndpoint.expect(ch, CmEventType.ESTABLISHED, deadline, child.remoteAddress());
            ep.established(est, false);
            return ep;
        } catch (VerbsException e) {
            if (ep != null) {
                ep.closeQuietly();
            } else {
                RdmaEndpoint.cleanup(ch, child);
            }
            return null;
        }
    }

    /**
     * Stops listening: requests not yet accepted are rejected. Endpoints already accepted stay connected.
     */
    @Override
    public void close() {
        closed = true;
        synchronized (acceptLock) {
            RdmaEndpoint.cleanup(channel, listener);
        }
    }

    @Override
    public String toString() {
        return "RdmaServer{" + localAddress() + (closed ? ", closed" : "") + '}';
    }
}
