// SPDX-License-Identifier: Apache-2.0
/**
 * The connection manager: rdma_cm's model in Java, provider-neutral. An {@link org.rdma4j.verbs.cm.RdmaCm}
 * is a set of providers ({@link org.rdma4j.verbs.cm.RdmaCm#system()}: all installed ones); an
 * {@link org.rdma4j.verbs.cm.CmEventChannel} queues the events of its {@link org.rdma4j.verbs.cm.CmId}s;
 * each event ({@link org.rdma4j.verbs.cm.CmEvent}) is taken, read and acknowledged. Names, states,
 * errnos and event sequences are librdmacm's and the kernel's, so rdma_cm knowledge (and the man pages)
 * applies; the soft device implements it with the IB CM on QP1 (rdma4j-cm), wire compatible with Linux.
 *
 * <p>A client, as rping's:
 * <pre>{@code
 * try (CmEventChannel ch = CmEventChannel.create();
 *      CmId id = ch.createId(PortSpace.TCP)) {
 *     id.resolveAddr(null, new InetSocketAddress("10.99.0.2", 7174), Duration.ofSeconds(2));
 *     expect(ch, CmEventType.ADDR_RESOLVED);            // id.context() is now the device owning the route
 *     id.resolveRoute(Duration.ofSeconds(2));
 *     expect(ch, CmEventType.ROUTE_RESOLVED);
 *     try (ProtectionDomain pd = id.context().allocPd()) {
 *         QueuePair qp = id.createQp(pd, new QpInitAttributes().type(QpType.RC)
 *                 .cap(new QpCapabilities(16, 2, 1, 1, 0)));   // CQs created by the ID: id.sendCq()
 *         id.connect(new ConnParam().responderResources(1).initiatorDepth(1).retryCount(7).rnrRetryCount(7));
 *         expect(ch, CmEventType.ESTABLISHED);              // the QP is in RTS
 *         // ... post to qp, poll id.sendCq() / id.recvCq() ...
 *         id.disconnect();
 *         expect(ch, CmEventType.DISCONNECTED);
 *         id.destroyQp();                                   // before the PD closes
 *     }
 * }
 *
 * static void expect(CmEventChannel ch, CmEventType type) {
 *     try (CmEvent e = ch.getEvent(Duration.ofSeconds(10))) {   // close() acknowledges
 *         if (e == null || e.type() != type) {
 *             throw new IllegalStateException("expected " + type + ", got " + e);
 *         }
 *     }
 * }
 * }</pre>
 * A server binds and listens ({@code id.bindAddr(new InetSocketAddress(port)); id.listen(8)}), takes a
 * CONNECT_REQUEST, creates a QP on {@code event.id()} with a PD of {@code event.id().context()} and
 * calls {@code event.id().accept(param)}; the ESTABLISHED of that ID follows the peer's RTU.
 *
 * <p>Private data has rdma_cm's sizes ({@link org.rdma4j.verbs.cm.ConnParam} constants): 56 bytes with a
 * request, 196 with an accept, 148 with a reject; events report the full field (a CONNECT_REQUEST carries
 * 56 bytes whatever was sent), so applications carry their own lengths.
 *
 * <p>On top, the connection API hands out connected endpoints as sockets do: {@link
 * org.rdma4j.verbs.cm.RdmaServer#bind} listens on an {@link java.net.InetSocketAddress} and
 * {@link org.rdma4j.verbs.cm.RdmaServer#accept} returns {@link org.rdma4j.verbs.cm.RdmaEndpoint}s;
 * {@link org.rdma4j.verbs.cm.RdmaEndpoint#connect} returns one connected to a server. Each has its PD, CQs
 * and RC QP in RTS; {@link org.rdma4j.verbs.cm.EndpointOptions} holds the defaults (finite retries,
 * deadlines) and the hook that registers memory and posts receives before the connection is made.
 */
package org.rdma4j.verbs.cm;
