// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

/** What an {@link IpoibInterface} counts: traffic, and every packet it drops, by reason. */
public enum IpoibCounter {
    /** IP packets taken from the TUN interface and posted to the fabric. */
    TX_PACKETS,
    /** Their bytes (IP packet lengths). */
    TX_BYTES,
    /** IP packets from the fabric written to the TUN interface. */
    RX_PACKETS,
    /** Their bytes. */
    RX_BYTES,
    /** ARP packets taken from the fabric (valid, not spoofed, not our own). */
    RX_ARP,
    /** ARP requests sent (first ones and retries). */
    ARP_REQUESTS_SENT,
    /** ARP replies sent. */
    ARP_REPLIES_SENT,
    /** Neighbours whose hardware address was learned or changed. */
    NEIGHBOURS_LEARNED,
    /** Neighbours forgotten by aging or failed resolution. */
    NEIGHBOURS_EXPIRED,
    /** TX drop: not an IPv4 packet from the kernel, or shorter than its header says. */
    TX_DROP_MALFORMED,
    /** TX drop: IPv6 (datagram-mode neighbour discovery is not implemented yet). */
    TX_DROP_IPV6,
    /** TX drop: destination outside the interface's subnet (no gateway support). */
    TX_DROP_NO_ROUTE,
    /** TX drop: resolution queue full, neighbour table full, or resolution failed. */
    TX_DROP_UNRESOLVED,
    /** TX drop: the device could not DMA-map the send buffer (IOMMU window or bounce pool full). */
    TX_DROP_DMA,
    /** TX drop: send ring full for longer than the wait bound. */
    TX_DROP_RING_FULL,
    /** Send work requests refused by the QP or completed in error. */
    TX_ERRORS,
    /** RX drop: our own multicast packet looped back by the fabric (ipoib_ib_handle_rx_wc does the same). */
    RX_DROP_OWN,
    /** RX drop: shorter than GRH + header, or an IPv4 header that does not fit. */
    RX_DROP_MALFORMED,
    /** RX drop: an ARP packet that is not IPoIB ARP (hardware type 32, length 20, IPv4). */
    RX_DROP_BAD_ARP,
    /** RX drop: an ARP sender address that is not the QPN and GID the message came from. */
    RX_DROP_ARP_SPOOFED,
    /** RX drop: an EtherType other than IPv4 or ARP (IPv6 included, for now). */
    RX_DROP_UNKNOWN_TYPE,
    /** RX drop: the TUN interface did not take the packet (its queue was full). */
    RX_DROP_TUN,
    /** Receive completions in error (other than flushes at close). */
    RX_ERRORS,
    /** Connected mode: IP packets sent as RC messages (also in TX_PACKETS). */
    TX_CM_PACKETS,
    /** Connected mode: IP packets received on RC connections (also in RX_PACKETS). */
    RX_CM_PACKETS,
    /** Connected mode: connections started (a CM ID resolving towards a neighbour; the CM retransmits its REQ itself). */
    CM_REQ_SENT,
    /** Connected mode: connections this side opened that were established (REP taken, RTU sent). */
    CM_CONNECTED,
    /** Connected mode: connections a peer opened to us that we accepted (REP sent). */
    CM_ACCEPTED,
    /** Connected mode: requests we refused (bad private data, too many connections, no QP). */
    CM_REJ_SENT,
    /** Connected mode: our requests the peer refused (that neighbour then gets datagrams). */
    CM_REJ_RECEIVED,
    /** Connected mode: neighbours whose CM did not answer our requests (they get datagrams for a while). */
    CM_FALLBACK,
    /** Connected mode: connections torn down after a send completed in error (the next packet reconnects). */
    CM_TX_ERRORS,
    /** TX drop: larger than the path allows (datagram-only neighbour or group); an ICMP "fragmentation needed" went to the stack. */
    TX_DROP_TOO_BIG,
    /** TX drop: larger than the UD MTU while the neighbour's connection is being set up. */
    TX_DROP_CM_CONNECTING,
    /** Connected mode: a REQ or REP whose private data is not RFC 4755's (shorter, or a receive size below 580). */
    RX_DROP_BAD_CM
}
