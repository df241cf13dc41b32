// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;

/**
 * Validates received RoCEv2 packets and counts every drop by reason. {@link #parse} takes a UDP payload as
 * a socket delivers it, plus the IP/UDP fields the ICRC covers; {@link #parseIpPacket} takes a whole IPv4 or
 * IPv6 packet (raw socket, pcap, tests) and reads those fields from it. Neither throws on any content of the
 * bytes: the result is {@link RoceStatus#OK} or a counted drop reason. Not thread-safe: one per receive
 * thread (it owns an {@link Icrc}).
 */
public final class RoceParser {
    /** How {@link #parse} checks the ICRC of a packet whose IP header it has not seen. */
    public enum IcrcCheck {
        /** Use the {@link PseudoHeader} as given, IPv4 ID included. */
        EXACT,
        /**
         * IPv6: as EXACT. IPv4: find the identification that makes the ICRC match ({@link Icrc#solveIpv4Id});
         * the packet is accepted if one exists. Lets corruption through with probability 2^-16.
         */
        SOLVE_IPV4_ID,
        /** No ICRC check at all (rxe's UDP checksum is 0, so this means no integrity check). */
        NONE
    }

    private static final RoceStatus[] STATUSES = RoceStatus.values();

    private final Icrc icrc = new Icrc();
    private final IcrcCheck check;
    private final long[] counts = new long[STATUSES.length];
    private final Ipv4Header ip4 = new Ipv4Header();
    private final Ipv6Header ip6 = new Ipv6Header();
    private final UdpHeader udp = new UdpHeader();
    private final PseudoHeader ipFields = new PseudoHeader();
    private int lastIpv4Id = -1;

    /** A parser that solves for the IPv4 identification ({@link IcrcCheck#SOLVE_IPV4_ID}). */
    public RoceParser() {
        this(IcrcCheck.SOLVE_IPV4_ID);
    }

    /**
     * Creates a parser.
     *
     * @param check how {@link #parse} checks the ICRC
     */
    public RoceParser(IcrcCheck check) {
        this.check = check;
    }

    /**
     * Validates a UDP payload: structure ({@link RocePacket#wrap}) then ICRC, as rxe_rcv does.
     *
     * @param pkt the flyweight to position (its headers readable when the result is OK, CNP, BAD_LENGTH or BAD_PAD)
     * @param seg memory holding the UDP payload
     * @param off offset of the BTH
     * @param len UDP payload length
     * @param ip  IP/UDP fields of the datagram: addresses and ports (and the ID for {@link IcrcCheck#EXACT})
     * @return OK, or the drop reason (counted)
     */
    public RoceStatus parse(RocePacket pkt, MemorySegment seg, long off, int len, PseudoHeader ip) {
        return tally(parse0(pkt, seg, off, len, ip, check));
    }

    private RoceStatus parse0(RocePacket pkt, MemorySegment seg, long off, int len, PseudoHeader ip, IcrcCheck mode) {
        RoceStatus s = pkt.wrap(seg, off, len);
        if (!pkt.isValid()) {
            return s; // too short, bad version, unknown opcode: rxe_rcv drops these before its ICRC check
        }
        // A length or pad error is reported only for a packet whose ICRC is good: rxe checks the ICRC in
        // rxe_rcv and the lengths later in the responder (rxe_resp_check_length), which NAKs.
        lastIpv4Id = -1;
        switch (mode) {
            case NONE -> {
            }
            case EXACT -> {
                if (!icrc.verify(ip, seg, off, len)) {
                    return RoceStatus.BAD_ICRC;
                }
                lastIpv4Id = ip.isIpv6() ? -1 : ip.ipId();
            }
            case SOLVE_IPV4_ID -> {
                if (ip.isIpv6()) {
                    if (!icrc.verify(ip, seg, off, len)) {
                        return RoceStatus.BAD_ICRC;
                    }
                } else {
                    int id = icrc.solveIpv4Id(ip, seg, off, len);
                    if (id < 0) {
                        return RoceStatus.BAD_ICRC;
                    }
                    lastIpv4Id = id;
                }
            }
        }
        return s;
    }

    /**
     * Validates a whole IP packet: IPv4 without options (rxe's ICRC assumes a 20-byte header) or IPv6 without
     * extension headers, UDP to port 4791 with a right or zero UDP checksum, then the RoCE packet with the exact ICRC. Bytes after the IP total
     * length (Ethernet padding) are ignored, and the RoCE packet's length comes from the UDP header, as in
     * rxe_udp_encap_recv.
     *
     * @param pkt the flyweight to position
     * @param seg memory holding the IP packet
     * @param off offset of the IP header
     * @param len bytes available
     * @return OK, or the drop reason (counted); on OK {@link #ipFields()} holds the packet's addresses and ports
     */
    public RoceStatus parseIpPacket(RocePacket pkt, MemorySegment seg, long off, int len) {
        if (len < 0 || off < 0 || off > seg.byteSize() - len) {
            throw new IndexOutOfBoundsException("packet [" + off + ", +" + len + ") outside a segment of "
                    + seg.byteSize() + " bytes");
        }
        if (len < 1) {
            return tally(RoceStatus.BAD_IP);
        }
        int version = Be.u8(seg, off) >>> 4;
        long udpOff;
        int ipPayload;
        if (version == 4) {
            if (len < Ipv4Header.LENGTH) {
                return tally(RoceStatus.BAD_IP);
            }
            ip4.wrap(seg, off);
            int total = ip4.totalLength();
            if (ip4.ihl() != 5 || total > len || total < Ipv4Header.LENGTH || ip4.isFragment() || !ip4.checksumValid()) {
                return tally(RoceStatus.BAD_IP);
            }
            if (ip4.protocol() != Ipv4Header.PROTO_UDP) {
                return tally(RoceStatus.NOT_ROCE);
            }
            udpOff = off + Ipv4Header.LENGTH;
            ipPayload = total - Ipv4Header.LENGTH;
        } else if (version == 6) {
            if (len < Ipv6Header.LENGTH) {
                return tally(RoceStatus.BAD_IP);
            }
            ip6.wrap(seg, off);
            ipPayload = ip6.payloadLength();
            if (ipPayload > len - Ipv6Header.LENGTH) {
                return tally(RoceStatus.BAD_IP);
            }
            if (ip6.nextHeader() != Ipv4Header.PROTO_UDP) {
                return tally(RoceStatus.NOT_ROCE);
            }
            udpOff = off + Ipv6Header.LENGTH;
        } else {
            return tally(RoceStatus.BAD_IP);
        }
        if (ipPayload < UdpHeader.LENGTH) {
            return tally(RoceStatus.BAD_IP);
        }
        udp.wrap(seg, udpOff);
        int udpLen = udp.length();
        if (udpLen < UdpHeader.LENGTH || udpLen > ipPayload) {
            return tally(RoceStatus.BAD_IP);
        }
        if (udp.destinationPort() != Roce.UDP_PORT) {
            return tally(RoceStatus.NOT_ROCE);
        }
        if (version == 4) {
            ipFields.from(ip4, udp);
        } else {
            ipFields.from(ip6, udp);
        }
        if (udp.checksum() != 0 && udp.computeChecksum(ipFields, seg, udpOff + UdpHeader.LENGTH) != udp.checksum()) {
            return tally(RoceStatus.BAD_IP); // the kernel drops it before rxe (or a Java socket) sees it; 0 = none
        }
        return tally(parse0(pkt, seg, udpOff + UdpHeader.LENGTH, udpLen - UdpHeader.LENGTH, ipFields, IcrcCheck.EXACT));
    }

    private RoceStatus tally(RoceStatus s) {
        counts[s.ordinal()]++;
        return s;
    }

    /** {@return the IP/UDP fields of the last packet given to {@link #parseIpPacket}} */
    public PseudoHeader ipFields() {
        return ipFields;
    }

    /**
     * {@return the IPv4 identification of the last packet accepted with an ICRC check (solved or given), -1 for
     * IPv6 or when the ICRC was not checked}
     *
     */
    public int lastIpv4Id() {
        return lastIpv4Id;
    }

    /** {@return the ICRC calculator this parser uses (same thread only)} */
    public Icrc icrc() {
        return icrc;
    }

    /** {@return how {@link #parse} checks the ICRC} */
    public IcrcCheck icrcCheck() {
        return check;
    }

    /**
     * {@return how many parses ended with it}
     *
     * @param s a status
     */
    public long count(RoceStatus s) {
        return counts[s.ordinal()];
    }

    /** {@return packets accepted (OK)} */
    public long accepted() {
        return counts[RoceStatus.OK.ordinal()];
    }

    /** {@return packets dropped, all reasons (CNPs included)} */
    public long dropped() {
        long n = 0;
        for (int i = 0; i < counts.length; i++) {
            if (i != RoceStatus.OK.ordinal()) {
                n += counts[i];
            }
        }
        return n;
    }

    /** Sets every counter to 0. */
    public void resetCounters() {
        java.util.Arrays.fill(counts, 0);
    }

    @Override
    public String toString() {
        StringBuilder b = new StringBuilder("RoceParser{");
        for (RoceStatus s : STATUSES) {
            if (counts[s.ordinal()] != 0) {
                b.append(s).append('=').append(counts[s.ordinal()]).append(' ');
            }
        }
        return b.append('}').toString();
    }
}
