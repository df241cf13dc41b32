// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.rdma4j.wire.InternetChecksum;
import org.rdma4j.wire.Ipv4Header;

/**
 * ICMP "destination unreachable, fragmentation needed and DF set" (RFC 792 type 3 code 4, with the next-hop MTU of
 * RFC 1191) about a packet too big for the way it must take, written as if from the packet's destination so the
 * kernel lowers its path MTU towards it. Linux's {@code ipoib_cm_skb_too_long} sends the same
 * ({@code icmp_ndo_send(skb, ICMP_DEST_UNREACH, ICMP_FRAG_NEEDED, htonl(mtu))}). Not thread-safe: one scratch buffer.
 *
 * <pre>
 *  0: IPv4 header (20 bytes, protocol 1, TTL 64, from the packet's destination to its source)
 * 20: type 3, code 4, checksum, unused (2 bytes), next-hop MTU (2 bytes)
 * 28: the packet's IP header and its first 8 payload bytes (RFC 792)
 * </pre>
 */
final class IcmpTooBig {
    private static final int PROTO_ICMP = 1;
    private static final int ICMP_HEADER = 8;
    /** Largest message: 20 + 8 + a 60-byte IP header + 8. */
    private static final int MAX_BYTES = Ipv4Header.LENGTH + ICMP_HEADER + 60 + 8;

    private final MemorySegment out;
    private final Ipv4Header outIp = new Ipv4Header();
    private final Ipv4Header inIp = new Ipv4Header();

    IcmpTooBig(Arena arena) {
        this.out = arena.allocate(MAX_BYTES, 8);
        outIp.wrap(out, 0);
    }

    /** {@return the message {@link #build} wrote, from offset 0} */
    MemorySegment message() {
        return out;
    }

    /**
     * Builds the answer to an IPv4 packet.
     *
     * @param seg        memory holding the packet
     * @param p          where its IP header starts
     * @param n          its length
     * @param nextHopMtu the MTU it must fit
     * @return the message's length, or 0 when none may be sent: a malformed packet, a non-initial fragment
     *     (RFC 1122 3.2.2), or an ICMP error message itself (only echo request and reply get one here)
     */
    int build(MemorySegment seg, long p, int n, int nextHopMtu) {
        Ipv4Header in = inIp.wrap(seg, p);
        int ihl = in.ihl() * 4;
        if (ihl < Ipv4Header.LENGTH || n < ihl + 8 || (in.flagsFragment() & 0x1FFF) != 0) {
            return 0;
        }
        if (in.protocol() == PROTO_ICMP) {
            int type = seg.get(ValueLayout.JAVA_BYTE, p + ihl) & 0xFF;
            if (type != 0 && type != 8) {
                return 0;
            }
        }
        int quote = ihl + 8;
        int total = Ipv4Header.LENGTH + ICMP_HEADER + quote;
        out.asSlice(0, Ipv4Header.LENGTH + ICMP_HEADER).fill((byte) 0);
        outIp.version(4).ihl(5).totalLength(total).ttl(64).protocol(PROTO_ICMP).source(in.destination())
                .destination(in.source()).updateChecksum();
        long icmp = Ipv4Header.LENGTH;
        out.set(ValueLayout.JAVA_BYTE, icmp, (byte) 3);
        out.set(ValueLayout.JAVA_BYTE, icmp + 1, (byte) 4);
        out.set(Ipoib.SHORT_BE, icmp + 6, (short) nextHopMtu);
        MemorySegment.copy(seg, p, out, icmp + ICMP_HEADER, quote);
        out.set(Ipoib.SHORT_BE, icmp + 2, (short) InternetChecksum.compute(out, icmp, ICMP_HEADER + quote));
        return total;
    }
}
