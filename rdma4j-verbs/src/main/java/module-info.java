// SPDX-License-Identifier: Apache-2.0
/**
 * The rdma4j verbs API: devices, protection domains, memory regions, completion queues and channels,
 * queue pairs, shared receive queues and address handles, with the semantics of InfiniBand verbs as
 * Linux implements them. Providers plug in through {@link org.rdma4j.verbs.spi.VerbsProvider}.
 */
module org.rdma4j.verbs {
    exports org.rdma4j.verbs;
    exports org.rdma4j.verbs.spi;

    uses org.rdma4j.verbs.spi.VerbsProvider;
}
