// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;

/**
 * Flyweight over a UDP header (RFC 768, 8 bytes): {@code 0-1 source port, 2-3 destination port, 4-5
 * length (header + data), 6-7 checksum}. rxe sends checksum 0 on IPv4 and IPv6 (prepare_udp_hdr); the
 * ICRC masks it. Not thread-safe.
 */
public final class UdpHeader {
    /** Creates an {@code UdpHeader}. */
    public UdpHeader() {
    }

    /** Length of the UDP header. */
    public static final int LENGTH = 8;

    private MemorySegment seg;
    private long off;

    /**
     * Points this view at the header at {@code offset} in {@code segment}.
     *
     * @param segment memory
     * @param offset offset of the header
     * @return this
     */
    public UdpHeader wrap(MemorySegment segment, long offset) {
        this.seg = segment;
        this.off = offset;
        return this;
    }

    /** {@return the offset of the header in the segment} */
    public long offset() {
        return off;
    }

    /** {@return source port} */
    public int sourcePort() {
        return Be.u16(seg, off);
    }

    /**
     * Sets the source port.
     *
     * @param v source port
     * @return this
     */
    public UdpHeader sourcePort(int v) {
        Be.u16(seg, off, v);
        return this;
    }

    /** {@return destination port} */
    public int destinationPort() {
        return Be.u16(seg, off + 2);
    }

    /**
     * Sets the destination port.
     *
     * @param v destination port
     * @return this
     */
    public UdpHeader destinationPort(int v) {
        Be.u16(seg, off + 2, v);
        return this;
    }

    /** {@return length (header + data)} */
    public int length() {
        return Be.u16(seg, off + 4);
    }

    /**
     * Sets the length.
     *
     * @param v length
     * @return this
     */
    public UdpHeader length(int v) {
        Be.u16(seg, off + 4, v);
        return this;
    }

    /** {@return checksum (0 = none)} */
    public int checksum() {
        return Be.u16(seg, off + 6);
    }

    /**
     * Sets the checksum.
     *
     * @param v checksum
     * @return this
     */
    public UdpHeader checksum(int v) {
        Be.u16(seg, off + 6, v);
        return this;
    }

    /**
     * Computes the UDP checksum (RFC 768 over the IPv4 pseudo-header, RFC 8200 8.1 over the IPv6 one) of this
     * header, whose length field must be set, and a payload that may live elsewhere. The ICRC masks the UDP
     * checksum, so RoCE does not depend on it, but IPv6 forbids a zero checksum on the wire (RFC 8200 8.1;
     * rxe nevertheless sends 0, which its own receive socket accepts).
     *
     * @param ip         addresses (and the IP version)
     * @param payload    memory holding the UDP payload
     * @param payloadOff offset of the payload
     * @return the checksum to store (never 0: a computed 0 is sent as 0xFFFF)
     */
    public int computeChecksum(PseudoHeader ip, MemorySegment payload, long payloadOff) {
        int len = length();
        long sum = 0;
        if (ip.isIpv6()) {
            sum += fold(ip.ipv6SourceHi()) + fold(ip.ipv6SourceLo()) + fold(ip.ipv6DestinationHi())
                    + fold(ip.ipv6DestinationLo());
        } else {
            sum += fold(ip.ipv4Source() & 0xFFFF_FFFFL) + fold(ip.ipv4Destination() & 0xFFFF_FFFFL);
        }
        sum += Ipv4Header.PROTO_UDP + len;
        sum += sourcePort() + destinationPort() + len;
        sum += InternetChecksum.sum(payload, payloadOff, len - LENGTH);
        int c = InternetChecksum.fold(sum);
        return c == 0 ? 0xFFFF : c;
    }

    /** Sum of the four 16-bit words of v. */
    private static long fold(long v) {
        return (v >>> 48) + ((v >>> 32) & 0xFFFF) + ((v >>> 16) & 0xFFFF) + (v & 0xFFFF);
    }
}
