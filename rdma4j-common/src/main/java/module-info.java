// SPDX-License-Identifier: Apache-2.0
/**
 * Shared building blocks of rdma4j, with no dependencies: clocks, PSN arithmetic, agents with idle
 * strategies ({@code org.rdma4j.common.agent}) and lock-free rings ({@code org.rdma4j.common.concurrent}).
 */
module org.rdma4j.common {
    exports org.rdma4j.common;
    exports org.rdma4j.common.agent;
    exports org.rdma4j.common.concurrent;
}
