// SPDX-License-Identifier: Apache-2.0
/**
 * The rdma4j conformance kit: abstract JUnit 5 suites every rdma4j device subclasses, the
 * {@link org.rdma4j.testkit.Fabric} fixture contract, rdma-core-style players and a leak check;
 * jqwik property suites live in {@code org.rdma4j.testkit.model}.
 */
module org.rdma4j.testkit {
    requires transitive org.rdma4j.verbs;
    requires transitive org.rdma4j.common;
    requires transitive org.junit.jupiter.api;
    requires transitive org.junit.jupiter.params;
    requires transitive net.jqwik.api;

    exports org.rdma4j.testkit;
    exports org.rdma4j.testkit.model;

    opens org.rdma4j.testkit to org.junit.platform.commons;
    opens org.rdma4j.testkit.model to org.junit.platform.commons;
}
