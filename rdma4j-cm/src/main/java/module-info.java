// SPDX-License-Identifier: Apache-2.0
/**
 * The connection manager in user space, wire compatible with Linux: a MAD layer on each port's GSI QP
 * (QP1), the IB CM state machine of Linux's cm.c, and rdma_cm's semantics (cma.c) behind the
 * provider-neutral CM API of {@code org.rdma4j.verbs.cm}. Serves the devices that give it their QP1
 * through {@link org.rdma4j.verbs.spi.GsiAccess} (the soft device, in process and over RoCEv2).
 */
module org.rdma4j.cm {
    requires transitive org.rdma4j.verbs;
    requires transitive org.rdma4j.common;

    exports org.rdma4j.cm;

    provides org.rdma4j.verbs.spi.CmProvider with org.rdma4j.cm.UserCmProvider;
}
