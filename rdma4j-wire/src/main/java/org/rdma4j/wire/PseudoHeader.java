// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

/**
 * The IP and UDP fields a RoCEv2 ICRC covers that are not in the UDP payload (IBA A17.4.3; rxe
 * rxe_icrc_hdr): addresses, the IPv4 identification and flags, and the UDP ports. Lengths are derived
 * from the UDP payload's length, and the fields the ICRC masks (TOS/traffic class, flow label, TTL/hop
 * limit, IP and UDP checksums) are not needed. A mutable holder meant to be reused: a sender fills it once
 * per QP (addresses, ports; ID 0 with DF, see {@link Icrc}), a receiver per datagram. Not thread-safe.
 */
public final class PseudoHeader {
    /** Creates a {@code PseudoHeader}. */
    public PseudoHeader() {
    }

    private boolean ipv6;
    private int src4;
    private int dst4;
    private int ipId;
    private int flagsFragment = Ipv4Header.FLAG_DF;
    private long srcHi;
    private long srcLo;
    private long dstHi;
    private long dstLo;
    private int srcPort = Roce.SOURCE_PORT_BASE;
    private int dstPort = Roce.UDP_PORT;

    /**
     * Selects IPv4 framing with these addresses. The identification stays as set (default 0) and the
     * flags/fragment word as set (default DF, offset 0: what rxe sends).
     *
     * @param src source address, big-endian in an int
     * @param dst destination address, big-endian in an int
     * @return this
     */
    public PseudoHeader ipv4(int src, int dst) {
        ipv6 = false;
        src4 = src;
        dst4 = dst;
        return this;
    }

    /**
     * Selects IPv6 framing with these addresses.
     *
     * @param srcHigh source address, high 64 bits
     * @param srcLow  source address, low 64 bits
     * @param dstHigh destination address, high 64 bits
     * @param dstLow  destination address, low 64 bits
     * @return this
     */
    public PseudoHeader ipv6(long srcHigh, long srcLow, long dstHigh, long dstLow) {
        ipv6 = true;
        srcHi = srcHigh;
        srcLo = srcLow;
        dstHi = dstHigh;
        dstLo = dstLow;
        return this;
    }

    /**
     * Selects the framing from two GIDs as rxe does (IPv4 when the GIDs are IPv4-mapped, rdma_gid2ip).
     *
     * @param sgid source GID (16 bytes)
     * @param dgid destination GID (16 bytes)
     * @return this
     * @throws IllegalArgumentException if one GID is IPv4-mapped and the other is not
     */
    public PseudoHeader gids(byte[] sgid, byte[] dgid) {
        boolean s4 = Gids.isIpv4Mapped(sgid);
        if (s4 != Gids.isIpv4Mapped(dgid)) {
            throw new IllegalArgumentException("cannot mix an IPv4-mapped and an IPv6 GID: " + Gids.toString(sgid)
                    + " -> " + Gids.toString(dgid));
        }
        return s4 ? ipv4(Gids.ipv4(sgid), Gids.ipv4(dgid)) : ipv6(Gids.hi(sgid), Gids.lo(sgid), Gids.hi(dgid), Gids.lo(dgid));
    }

    /**
     * Sets the UDP ports.
     *
     * @param src UDP source port
     * @param dst UDP destination port (normally {@link Roce#UDP_PORT})
     * @return this
     */
    public PseudoHeader ports(int src, int dst) {
        srcPort = src & 0xFFFF;
        dstPort = dst & 0xFFFF;
        return this;
    }

    /**
     * Sets the IPv4 Identification (16 bits).
     *
     * @param id IPv4 Identification (16 bits)
     * @return this
     */
    public PseudoHeader ipId(int id) {
        ipId = id & 0xFFFF;
        return this;
    }

    /**
     * Sets the IPv4 flags and fragment offset word (default {@link Ipv4Header#FLAG_DF}).
     *
     * @param v IPv4 flags and fragment offset word (default {@link Ipv4Header#FLAG_DF})
     * @return this
     */
    public PseudoHeader flagsFragment(int v) {
        flagsFragment = v & 0xFFFF;
        return this;
    }

    /**
     * Copies the fields from a received IPv4 header and its UDP header.
     *
     * @param ip  the IPv4 header
     * @param udp the UDP header
     * @return this
     */
    public PseudoHeader from(Ipv4Header ip, UdpHeader udp) {
        return ipv4(ip.source(), ip.destination()).ipId(ip.identification()).flagsFragment(ip.flagsFragment())
                .ports(udp.sourcePort(), udp.destinationPort());
    }

    /**
     * Copies the fields from a received IPv6 header and its UDP header.
     *
     * @param ip  the IPv6 header
     * @param udp the UDP header
     * @return this
     */
    public PseudoHeader from(Ipv6Header ip, UdpHeader udp) {
        return ipv6(ip.sourceHi(), ip.sourceLo(), ip.destinationHi(), ip.destinationLo())
                .ports(udp.sourcePort(), udp.destinationPort());
    }

    /** {@return whether the framing is IPv6} */
    public boolean isIpv6() {
        return ipv6;
    }

    /** {@return the IPv4 source address} */
    public int ipv4Source() {
        return src4;
    }

    /** {@return the IPv4 destination address} */
    public int ipv4Destination() {
        return dst4;
    }

    /** {@return the IPv4 Identification} */
    public int ipId() {
        return ipId;
    }

    /** {@return the IPv4 flags/fragment word} */
    public int flagsFragment() {
        return flagsFragment;
    }

    /** {@return IPv6 source, high 64 bits} */
    public long ipv6SourceHi() {
        return srcHi;
    }

    /** {@return IPv6 source, low 64 bits} */
    public long ipv6SourceLo() {
        return srcLo;
    }

    /** {@return IPv6 destination, high 64 bits} */
    public long ipv6DestinationHi() {
        return dstHi;
    }

    /** {@return IPv6 destination, low 64 bits} */
    public long ipv6DestinationLo() {
        return dstLo;
    }

    /** {@return UDP source port} */
    public int sourcePort() {
        return srcPort;
    }

    /** {@return UDP destination port} */
    public int destinationPort() {
        return dstPort;
    }

    /** {@return the source as a GID (IPv4-mapped for IPv4; allocates)} */
    public byte[] sourceGid() {
        return ipv6 ? Gids.of(srcHi, srcLo) : Gids.ipv4Mapped(src4);
    }

    /** {@return the destination as a GID (IPv4-mapped for IPv4; allocates)} */
    public byte[] destinationGid() {
        return ipv6 ? Gids.of(dstHi, dstLo) : Gids.ipv4Mapped(dst4);
    }

    /** {@return bytes of IP header: 20 or 40} */
    public int ipHeaderLength() {
        return ipv6 ? Ipv6Header.LENGTH : Ipv4Header.LENGTH;
    }

    /**
     * Writes the masked IP and UDP headers the ICRC covers (rxe_icrc_hdr): IPv4 TOS, TTL and checksum, or
     * IPv6 traffic class, flow label and hop limit, and the UDP checksum, all set to ones.
     *
     * @param b         destination
     * @param o         offset in b
     * @param udpPayLen the UDP payload's length (BTH through ICRC)
     * @return bytes written (28 or 48)
     */
    int writeMasked(byte[] b, int o, int udpPayLen) {
        int udpLen = UdpHeader.LENGTH + udpPayLen;
        int p;
        if (ipv6) {
            b[o] = 0x6F;
            b[o + 1] = b[o + 2] = b[o + 3] = (byte) 0xFF;
            put16(b, o + 4, udpLen);
            b[o + 6] = Ipv4Header.PROTO_UDP;
            b[o + 7] = (byte) 0xFF;
            put64(b, o + 8, srcHi);
            put64(b, o + 16, srcLo);
            put64(b, o + 24, dstHi);
            put64(b, o + 32, dstLo);
            p = o + Ipv6Header.LENGTH;
        } else {
            b[o] = 0x45;
            b[o + 1] = (byte) 0xFF;
            put16(b, o + 2, Ipv4Header.LENGTH + udpLen);
            put16(b, o + 4, ipId);
            put16(b, o + 6, flagsFragment);
            b[o + 8] = (byte) 0xFF;
            b[o + 9] = Ipv4Header.PROTO_UDP;
            b[o + 10] = b[o + 11] = (byte) 0xFF;
            put32(b, o + 12, src4);
            put32(b, o + 16, dst4);
            p = o + Ipv4Header.LENGTH;
        }
        put16(b, p, srcPort);
        put16(b, p + 2, dstPort);
        put16(b, p + 4, udpLen);
        b[p + 6] = b[p + 7] = (byte) 0xFF;
        return p + UdpHeader.LENGTH - o;
    }

    private static void put16(byte[] b, int o, int v) {
        b[o] = (byte) (v >>> 8);
        b[o + 1] = (byte) v;
    }

    private static void put32(byte[] b, int o, int v) {
        put16(b, o, v >>> 16);
        put16(b, o + 2, v);
    }

    private static void put64(byte[] b, int o, long v) {
        put32(b, o, (int) (v >>> 32));
        put32(b, o + 4, (int) v);
    }

    @Override
    public String toString() {
        return (ipv6 ? "IPv6 " : "IPv4 id=" + ipId + " ") + Gids.toString(sourceGid()) + ":" + srcPort + " -> "
                + Gids.toString(destinationGid()) + ":" + dstPort;
    }
}
