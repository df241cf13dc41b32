// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.spi;

import java.net.SocketAddress;
import java.time.Duration;

import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.cm.CmOption;
import org.rdma4j.verbs.cm.CmRoute;
import org.rdma4j.verbs.cm.ConnParam;

/**
 * A provider's CM ID: the part of an {@link org.rdma4j.verbs.cm.CmId} after the front has chosen the
 * provider. Each method is the librdmacm call of the same name, with its semantics and errnos; the
 * front has checked the arguments' shape (non-null, lengths, port ranges) and forwards state errors
 * to the provider, which must throw {@link org.rdma4j.verbs.VerbsException} with Linux's errno (EINVAL
 * for a call in the wrong state, as {@code cma_comp_exch} fails) and a message that says what to do.
 * Asynchronous results are reported through the {@link CmEventSink} the ID was created with.
 * Implementations must be thread-safe.
 */
public interface CmIdSpi {
    /**
     * rdma_bind_addr.
     *
     * @param address an {@link java.net.InetSocketAddress} with one of the provider's
     *                {@link CmProvider#addresses()} or a wildcard address and a port (0: the provider picks
     *                a free one), or an {@link org.rdma4j.verbs.cm.IbSocketAddress} (AF_IB: a GID of the
     *                provider or the zero GID, and a service ID)
     * @throws org.rdma4j.verbs.VerbsException EADDRINUSE if the port is taken in the ID's port space,
     *                                         EINVAL if the ID is bound already
     */
    void bind(SocketAddress address);

    /** {@return the bound address and port (rdma_get_local_addr), or null before binding} */
    SocketAddress localAddress();

    /** {@return the peer's address and port (rdma_get_peer_addr), or null while unknown} */
    SocketAddress remoteAddress();

    /**
     * rdma_listen: connection requests to the bound port arrive as
     * {@link CmEventSink#connectRequest} calls. The front applies the backlog.
     *
     * @param backlog as given by the application (the front has made it positive)
     */
    void listen(int backlog);

    /**
     * rdma_resolve_addr: binds the ID to {@code source} if it is not bound, then resolves the peer's
     * address; reports ADDR_RESOLVED or ADDR_ERROR.
     *
     * @param source      the local address chosen by the front, one of the provider's, with the bound
     *                    port or 0; a wildcard address (with the bound port) when the ID was bound to one
     *                    and the front found no route: the provider routes itself
     * @param destination the peer (the same kind of address as {@code source})
     * @param timeout     how long resolution may take before ADDR_ERROR with -ETIMEDOUT
     */
    void resolveAddr(SocketAddress source, SocketAddress destination, Duration timeout);

    /**
     * rdma_resolve_route: reports ROUTE_RESOLVED (with {@link #route()} set) or ROUTE_ERROR.
     *
     * @param timeout how long resolution may take
     */
    void resolveRoute(Duration timeout);

    /**
     * The device context the ID's address belongs to ({@code id->verbs}): the same object for every ID of
     * the provider on that device (the front checks a PD's context by identity), owned by the provider.
     *
     * @return the context, or null while unknown
     */
    Context context();

    /** {@return the port of that device ({@code id->port_num}), or 0 while unknown} */
    int portNum();

    /** {@return the resolved path, or null before ROUTE_RESOLVED (passive IDs: from the request)} */
    CmRoute route();

    /**
     * rdma_create_qp: creates the ID's QP on {@code pd} (which must be on {@link #context()}) and moves
     * it as librdmacm does: RC/UC to INIT with {@link #initQpAttr}, UD to RTS.
     *
     * @param pd    the protection domain
     * @param attrs creation attributes with both CQs set (the front creates missing CQs)
     * @return the QP, owned by the ID
     */
    QueuePair createQp(ProtectionDomain pd, QpInitAttributes attrs);

    /** {@return the ID's QP, or null} */
    QueuePair qp();

    /** rdma_destroy_qp: destroys the ID's QP; a no-op without one. */
    void destroyQp();

    /**
     * rdma_init_qp_attr: the attributes and mask the CM computes for moving a QP of this connection to
     * {@code state} (INIT, RTR or RTS; ERR gives just the state).
     *
     * @param state the target state
     * @return attributes with the mask of the ones to apply
     */
    QpAttributes initQpAttr(QpState state);

    /**
     * rdma_connect: sends the REQ (SIDR_REQ for UD).
     *
     * @param param the parameters (never null: the front substitutes {@link ConnParam#defaults()})
     */
    void connect(ConnParam param);

    /**
     * rdma_accept: for an ID from a CONNECT_REQUEST, moves its QP to RTR and RTS and sends the REP
     * (SIDR_REP for UD).
     *
     * @param param the parameters (never null)
     */
    void accept(ConnParam param);

    /**
     * rdma_reject: sends a REJ with reason 28 and the private data (SIDR_REP with status REJECT for UD).
     *
     * @param privateData the data, at most 148 bytes (may be empty)
     */
    void reject(byte[] privateData);

    /** rdma_disconnect: moves the QP to ERR and sends a DREQ, or the DREP if a DREQ arrived. */
    void disconnect();

    /**
     * rdma_establish: for an ID without a QP of its own, after CONNECT_RESPONSE, sends the RTU
     * (the application has moved its QP to RTR and RTS).
     */
    void establish();

    /**
     * rdma_set_option.
     *
     * @param <T>    the value type
     * @param option the option
     * @param value  its value
     * @throws org.rdma4j.verbs.VerbsException EOPNOTSUPP for an option the provider cannot honour,
     *                                         EINVAL for a bad value or the wrong state
     */
    <T> void setOption(CmOption<T> option, T value);

    /**
     * rdma_destroy_id: what Linux does when an ID goes (REJ for a pending request, DREQ for a connection,
     * REJ 4 for an outstanding REQ, DREP for a received DREQ); releases the port. The front has
     * destroyed the ID's QP first. Idempotent.
     */
    void close();
}
