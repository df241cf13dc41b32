// SPDX-License-Identifier: Apache-2.0
/**
 * rdma4j's examples, written as an application would be: against the verbs and CM API only; the devices
 * (the soft device and its connection manager) are found at run time.
 */
module org.rdma4j.examples {
    requires org.rdma4j.verbs;

    exports org.rdma4j.examples;
}
