// SPDX-License-Identifier: Apache-2.0
/**
 * Shared building blocks of rdma4j, on the JDK alone: clocks, PSN arithmetic, agents with idle
 * strategies ({@code org.rdma4j.common.agent}), lock-free rings ({@code org.rdma4j.common.concurrent}),
 * and what every module observes itself with: JFR events ({@link org.rdma4j.common.RdmaEvents}), a
 * rate-limited logger and counters other processes can read ({@link org.rdma4j.common.CounterFile}).
 */
module org.rdma4j.common {
    requires jdk.jfr;

    exports org.rdma4j.common;
    exports org.rdma4j.common.agent;
    exports org.rdma4j.common.concurrent;
}
