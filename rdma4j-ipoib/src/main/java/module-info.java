// SPDX-License-Identifier: Apache-2.0
/**
 * IP over InfiniBand, datagram mode (RFC 4391, RFC 4392): a Linux TUN interface whose IPv4 packets travel
 * in UD messages of any verbs device, with ARP over the partition's broadcast multicast group.
 */
module org.rdma4j.ipoib {
    requires transitive org.rdma4j.verbs;
    requires transitive org.rdma4j.common; // Config and NeighbourCache take a NanoClock

    exports org.rdma4j.ipoib;

    uses org.rdma4j.verbs.spi.VerbsProvider;
}
