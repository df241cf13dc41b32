// SPDX-License-Identifier: Apache-2.0
/**
 * Shared building blocks of rdma4j: clocks, PSN arithmetic, and what every module observes itself with:
 * JFR events ({@link org.rdma4j.common.RdmaEvents}), a rate-limited logger and counters other processes
 * can read ({@link org.rdma4j.common.CounterFile}). Depends on the JDK only.
 */
module org.rdma4j.common {
    requires jdk.jfr;

    exports org.rdma4j.common;
}
