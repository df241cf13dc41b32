// SPDX-License-Identifier: Apache-2.0
/**
 * IP over InfiniBand (RFC 4391, RFC 4392 datagram mode; RFC 4755 connected mode): a Linux TUN interface whose
 * IPv4 packets travel in UD messages of any verbs device, with ARP over the partition's broadcast multicast group,
 * or on RC connections to neighbours that offer them.
 */
module org.rdma4j.ipoib {
    requires transitive org.rdma4j.verbs;
    requires transitive org.rdma4j.common;
    requires org.rdma4j.libc;
    requires org.rdma4j.wire;

    exports org.rdma4j.ipoib;

    uses org.rdma4j.verbs.spi.VerbsProvider;
}
