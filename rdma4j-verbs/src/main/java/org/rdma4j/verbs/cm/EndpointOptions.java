// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.cm;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Consumer;
import java.util.function.Function;

import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.VerbsException;

/**
 * How {@link RdmaEndpoint#connect} and {@link RdmaServer} set up a connection. Every value has a default
 * that suits a request/response program: an RC QP with 64 sends and 64 receives of one SGE, 16
 * outstanding RDMA READs each way (or the device's maximum if lower), 6 transport and 6 RNR retries
 * (finite: rxe treats 7 as "retry forever", which turns a dead peer into a hang), a 10-second connect
 * deadline, 2 seconds for address and route resolution, up to a second in {@link RdmaEndpoint#close()}
 * for the peer to answer the disconnect. Mutable builder; copied when used.
 */
public final class EndpointOptions {
    private RdmaCm cm;
    private QpType qpType = QpType.RC;
    private int sendQueueDepth = 64;
    private int recvQueueDepth = 64;
    private int maxSge = 1;
    private int maxInlineData;
    private int readDepth = 16;
    private int retryCount = 6;
    private int rnrRetryCount = 6;
    private Duration connectTimeout = Duration.ofSeconds(10);
    private Duration resolveTimeout = Duration.ofSeconds(2);
    private Duration disconnectTimeout = Duration.ofSeconds(1);
    private InetSocketAddress source;
    private byte[] privateData;
    private int tos = -1;
    private int backlog = 128;
    private Consumer<RdmaEndpoint> beforeConnect = e -> { };
    private Function<Context, ProtectionDomain> protectionDomains;

    /** A set of defaults. */
    public EndpointOptions() {
    }

    /** {@return a copy} */
    public EndpointOptions copy() {
        EndpointOptions o = new EndpointOptions();
        o.cm = cm;
        o.qpType = qpType;
        o.sendQueueDepth = sendQueueDepth;
        o.recvQueueDepth = recvQueueDepth;
        o.maxSge = maxSge;
        o.maxInlineData = maxInlineData;
        o.readDepth = readDepth;
        o.retryCount = retryCount;
        o.rnrRetryCount = rnrRetryCount;
        o.connectTimeout = connectTimeout;
        o.resolveTimeout = resolveTimeout;
        o.disconnectTimeout = disconnectTimeout;
        o.source = source;
        o.privateData = privateData == null ? null : privateData.clone();
        o.tos = tos;
        o.backlog = backlog;
        o.beforeConnect = beforeConnect;
        o.protectionDomains = protectionDomains;
        return o;
    }

    /** {@return the providers used ({@link RdmaCm#system()} unless set)} */
    public RdmaCm cm() {
        return cm == null ? RdmaCm.system() : cm;
    }

    /**
     * Uses these providers instead of the installed ones (tests, or one provider only).
     *
     * @param c the providers
     * @return this
     */
    public EndpointOptions cm(RdmaCm c) {
        this.cm = Objects.requireNonNull(c);
        return this;
    }

    /** {@return the QP type: RC (default) or UC} */
    public QpType qpType() {
        return qpType;
    }

    /**
     * Sets the QP type of the connection.
     *
     * @param t RC or UC (UD has no connection: use the CM API's UDP port space)
     * @return this
     */
    public EndpointOptions qpType(QpType t) {
        if (t != QpType.RC && t != QpType.UC) {
            throw new VerbsException(Errno.EINVAL, "an endpoint is connected: RC or UC, not " + t);
        }
        this.qpType = t;
        return this;
    }

    /** {@return outstanding send requests} */
    public int sendQueueDepth() {
        return sendQueueDepth;
    }

    /**
     * Sets the send queue depth (the send CQ gets as many entries).
     *
     * @param n 1 or more
     * @return this
     */
    public EndpointOptions sendQueueDepth(int n) {
        this.sendQueueDepth = positive("send queue depth", n);
        return this;
    }

    /** {@return outstanding receive requests} */
    public int recvQueueDepth() {
        return recvQueueDepth;
    }

    /**
     * Sets the receive queue depth (the receive CQ gets as many entries).
     *
     * @param n 1 or more
     * @return this
     */
    public EndpointOptions recvQueueDepth(int n) {
        this.recvQueueDepth = positive("receive queue depth", n);
        return this;
    }

    /** {@return scatter/gather entries per request} */
    public int maxSge() {
        return maxSge;
    }

    /**
     * Sets the scatter/gather entries per send and receive request.
     *
     * @param n 1 or more
     * @return this
     */
    public EndpointOptions maxSge(int n) {
        this.maxSge = positive("max SGE", n);
        return this;
    }

    /** {@return inline bytes per send} */
    public int maxInlineData() {
        return maxInlineData;
    }

    /**
     * Sets the inline data per send request.
     *
     * @param n bytes, 0 or more
     * @return this
     */
    public EndpointOptions maxInlineData(int n) {
        if (n < 0) {
            throw new VerbsException(Errno.EINVAL, "max inline data " + n);
        }
        this.maxInlineData = n;
        return this;
    }

    /** {@return RDMA READ / atomic requests outstanding in each direction (capped at the device's maximum)} */
    public int readDepth() {
        return readDepth;
    }

    /**
     * Sets the responder resources and initiator depth of the connection.
     *
     * @param n 0 (no RDMA READ or atomic) to 255; above the device's maximum means its maximum
     * @return this
     */
    public EndpointOptions readDepth(int n) {
        if (n < 0 || n > 255) {
            throw new VerbsException(Errno.EINVAL, "read depth " + n + " (expected 0..255)");
        }
        this.readDepth = n;
        return this;
    }

    /** {@return transport retries} */
    public int retryCount() {
        return retryCount;
    }

    /**
     * Sets the transport retry count.
     *
     * @param n 0..7 (7: forever on rxe)
     * @return this
     */
    public EndpointOptions retryCount(int n) {
        this.retryCount = range("retry count", n, 7);
        return this;
    }

    /** {@return RNR retries} */
    public int rnrRetryCount() {
        return rnrRetryCount;
    }

    /**
     * Sets the RNR retry count (how often the peer may retry when this side has no receive posted).
     *
     * @param n 0..7 (7: forever)
     * @return this
     */
    public EndpointOptions rnrRetryCount(int n) {
        this.rnrRetryCount = range("RNR retry count", n, 7);
        return this;
    }

    /** {@return how long a connect may take, resolution included} */
    public Duration connectTimeout() {
        return connectTimeout;
    }

    /**
     * Sets the connect deadline: past it, the attempt is abandoned (the CM ID is destroyed, which sends
     * Linux's REJ "timeout") and connect throws ETIMEDOUT.
     *
     * @param d a positive duration
     * @return this
     */
    public EndpointOptions connectTimeout(Duration d) {
        this.connectTimeout = positive("connect timeout", d);
        return this;
    }

    /** {@return the timeout of address and of route resolution} */
    public Duration resolveTimeout() {
        return resolveTimeout;
    }

    /**
     * Sets the timeout of address and of route resolution (each).
     *
     * @param d a positive duration
     * @return this
     */
    public EndpointOptions resolveTimeout(Duration d) {
        this.resolveTimeout = positive("resolve timeout", d);
        return this;
    }

    /** {@return how long {@link RdmaEndpoint#close()} waits for the peer to answer the disconnect} */
    public Duration disconnectTimeout() {
        return disconnectTimeout;
    }

    /**
     * Sets how long {@link RdmaEndpoint#close()} waits for the peer's answer to its DREQ before destroying
     * the connection (which stops retransmitting the DREQ, as rdma_destroy_id does). The peer answers
     * when its application disconnects too; an {@link RdmaEndpoint} does so as soon as it sees the
     * DISCONNECTED event.
     *
     * @param d zero (do not wait) or a positive duration
     * @return this
     */
    public EndpointOptions disconnectTimeout(Duration d) {
        if (d == null || d.isNegative()) {
            throw new VerbsException(Errno.EINVAL, "disconnect timeout " + d + " (expected zero or more)");
        }
        this.disconnectTimeout = d;
        return this;
    }

    /** {@return the local address to connect from, or null (the routing table decides)} */
    public InetSocketAddress source() {
        return source;
    }

    /**
     * Sets the local address to connect from.
     *
     * @param a an address of a local RDMA device (port 0: any), or null
     * @return this
     */
    public EndpointOptions source(InetSocketAddress a) {
        this.source = a;
        return this;
    }

    /** {@return the private data sent with the request (connect) or the accept (server), or null} */
    public byte[] privateData() {
        return privateData == null ? null : privateData.clone();
    }

    /**
     * Sets the private data of the request (at most {@value ConnParam#MAX_CONNECT_PRIVATE_DATA} bytes) or of
     * the accept (at most {@value ConnParam#MAX_ACCEPT_PRIVATE_DATA}).
     *
     * @param d the bytes (copied), or null
     * @return this
     */
    public EndpointOptions privateData(byte[] d) {
        this.privateData = d == null ? null : d.clone();
        return this;
    }

    /** {@return the IP ToS, or -1 for the default} */
    public int tos() {
        return tos;
    }

    /**
     * Sets the IP ToS / traffic class of the connection.
     *
     * @param t 0..255, or -1 for the default
     * @return this
     */
    public EndpointOptions tos(int t) {
        this.tos = range("ToS", t + 1, 256) - 1;
        return this;
    }

    /** {@return how many requests a server lets wait} */
    public int backlog() {
        return backlog;
    }

    /**
     * Sets the server's backlog.
     *
     * @param n 1..{@value CmId#MAX_BACKLOG}
     * @return this
     */
    public EndpointOptions backlog(int n) {
        this.backlog = range("backlog", positive("backlog", n), CmId.MAX_BACKLOG);
        return this;
    }

    /** {@return what runs on an endpoint after its QP exists and before the connection is made} */
    public Consumer<RdmaEndpoint> beforeConnect() {
        return beforeConnect;
    }

    /**
     * Sets what runs on each endpoint once its QP exists (in INIT) and before the request is sent or
     * accepted: the place to register memory and post the first receives, so nothing the peer sends first
     * meets an empty receive queue.
     *
     * @param c the action
     * @return this
     */
    public EndpointOptions beforeConnect(Consumer<RdmaEndpoint> c) {
        this.beforeConnect = Objects.requireNonNull(c);
        return this;
    }

    /** {@return where endpoints get their PD, or null: each allocates its own and frees it on close} */
    public Function<Context, ProtectionDomain> protectionDomains() {
        return protectionDomains;
    }

    /**
     * Shares protection domains: each endpoint asks {@code pds} for the PD of the device its connection
     * resolved to (so one memory region serves every connection on that device, as a server's shared
     * table does) and leaves it open on close. The function is called on the connecting or accepting
     * thread; it must return a PD of the given context.
     *
     * @param pds the PD of a context, or null to let every endpoint allocate its own
     * @return this
     */
    public EndpointOptions protectionDomains(Function<Context, ProtectionDomain> pds) {
        this.protectionDomains = pds;
        return this;
    }

    private static int positive(String what, int n) {
        if (n < 1) {
            throw new VerbsException(Errno.EINVAL, what + " " + n + " (expected 1 or more)");
        }
        return n;
    }

    private static int range(String what, int n, int max) {
        if (n < 0 || n > max) {
            throw new VerbsException(Errno.EINVAL, what + " " + n + " (expected 0.." + max + ")");
        }
        return n;
    }

    private static Duration positive(String what, Duration d) {
        if (d == null || d.isNegative() || d.isZero()) {
            throw new VerbsException(Errno.EINVAL, what + " " + d + " (expected a positive duration)");
        }
        return d;
    }
}
