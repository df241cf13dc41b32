// SPDX-License-Identifier: Apache-2.0
/** Shared building blocks of rdma4j: clocks and small utilities with no dependencies. */
module org.rdma4j.common {
    exports org.rdma4j.common;
}
