// SPDX-License-Identifier: Apache-2.0
/**
 * The rdma4j verbs API: devices, protection domains, memory regions, completion queues and channels,
 * queue pairs, shared receive queues and address handles, with the semantics of InfiniBand verbs as
 * Linux implements them; the connection manager API ({@code org.rdma4j.verbs.cm}, rdma_cm's shape).
 * Providers plug in through {@link org.rdma4j.verbs.spi.VerbsProvider} and
 * {@link org.rdma4j.verbs.spi.CmProvider}.
 */
module org.rdma4j.verbs {
    exports org.rdma4j.verbs;
    exports org.rdma4j.verbs.cm;
    exports org.rdma4j.verbs.spi;

    uses org.rdma4j.verbs.spi.VerbsProvider;
    uses org.rdma4j.verbs.spi.CmProvider;
}
