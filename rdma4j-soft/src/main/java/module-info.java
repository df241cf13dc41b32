// SPDX-License-Identifier: Apache-2.0
/**
 * The in-process software RDMA device: an rxe-style engine (requester, responder, completer, receive
 * dispatcher) behind the rdma4j verbs API. Devices on one {@link org.rdma4j.soft.SoftFabric} act as
 * hosts on one network.
 */
module org.rdma4j.soft {
    requires transitive org.rdma4j.verbs;
    requires transitive org.rdma4j.common;
    requires transitive org.rdma4j.dma;
    requires org.rdma4j.wire;

    exports org.rdma4j.soft;

    provides org.rdma4j.verbs.spi.VerbsProvider with org.rdma4j.soft.SoftProvider;
}
