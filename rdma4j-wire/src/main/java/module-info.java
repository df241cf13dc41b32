// SPDX-License-Identifier: Apache-2.0
/** RoCEv2 wire format: flyweight codecs for IPv4/IPv6, UDP, BTH and the extension headers, the ICRC, and UDP sockets through FFM. */
module org.rdma4j.wire {
    requires transitive org.rdma4j.common;
    requires transitive org.rdma4j.libc;

    exports org.rdma4j.wire;
    exports org.rdma4j.wire.net;
}
