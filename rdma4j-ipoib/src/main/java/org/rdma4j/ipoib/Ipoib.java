// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import org.rdma4j.verbs.Gid;

/**
 * Constants and the encapsulation header of IPoIB datagram mode (RFC 4391).
 *
 * <p>Every IPoIB message starts with a 4-byte header: the 16-bit EtherType of the payload, then 16
 * reserved bits, zero on send and ignored on receive (RFC 4391 section 6, frame format). A UD receive buffer holds the
 * 40-byte GRH area first (ibv_post_recv), so a received packet's header sits at byte 40.
 */
public final class Ipoib {
    /** Encapsulation header length. */
    public static final int HEADER_BYTES = 4;
    /** The GRH area at the start of every UD receive buffer. */
    public static final int GRH_BYTES = 40;
    /** EtherType of IPv4. */
    public static final int TYPE_IPV4 = 0x0800;
    /** EtherType of ARP. */
    public static final int TYPE_ARP = 0x0806;
    /** EtherType of IPv6. */
    public static final int TYPE_IPV6 = 0x86DD;
    /**
     * The default IPoIB MTU: a 2048-byte IB MTU less the header (RFC 4391 section 7: the link MTU is the
     * broadcast group's MTU minus 4).
     */
    public static final int DEFAULT_MTU = 2044;
    /** The default partition key (full member of the default partition). */
    public static final int DEFAULT_PKEY = 0xFFFF;
    /**
     * The broadcast group's Q_Key when the subnet manager configures nothing else: OpenSM's
     * OSM_IPOIB_BROADCAST_MGRP_QKEY (osm_base.h), which Linux IPoIB learns from the group's
     * MCMemberRecord.
     */
    public static final int DEFAULT_QKEY = 0x0000_0B1B;

    /** Network-order field layouts, for this package's codecs. */
    static final ValueLayout.OfShort SHORT_BE = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    static final ValueLayout.OfInt INT_BE = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    static final ValueLayout.OfLong LONG_BE = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private Ipoib() {
    }

    /**
     * The IPv4 broadcast group of a partition (RFC 4391 sections 4 and 4.1): {@code ff1<scope>:401b:<P_Key>::ffff:ffff},
     * link-local scope 2, with the full-membership bit of the P_Key set.
     *
     * @param pkey the partition key
     * @return the broadcast-GID
     */
    public static Gid broadcastGid(int pkey) {
        long hi = 0xFF12_401BL << 32 | (long) ((pkey | 0x8000) & 0xFFFF) << 16;
        return new Gid(hi, 0x0000_0000_FFFF_FFFFL);
    }

    /**
     * The broadcast group on a RoCEv2 device with IPv4 GIDs, which carries groups as IPv4 multicast
     * (::ffff:a.b.c.d, as rdma_cm maps IPv4 groups for RoCE). RFC 4391 defines no IPv4 form; rdma4j uses the
     * administratively scoped 239.64.&lt;P_Key&gt; (239.64: the 0x40 of the 0x401b IPoIB signature).
     *
     * @param pkey the partition key
     * @return ::ffff:239.64.p.p
     */
    public static Gid broadcastGidIpv4(int pkey) {
        int p = (pkey | 0x8000) & 0xFFFF;
        return new Gid(0, 0x0000_FFFF_0000_0000L | (0xEF40L << 16) | p);
    }

    /**
     * Writes the encapsulation header.
     *
     * @param seg    buffer
     * @param offset where the header goes
     * @param type   the payload's EtherType
     */
    public static void writeHeader(MemorySegment seg, long offset, int type) {
        seg.set(SHORT_BE, offset, (short) type);
        seg.set(SHORT_BE, offset + 2, (short) 0);
    }

    /**
     * {@return the payload's EtherType}
     *
     * @param seg    buffer
     * @param offset where the header is
     */
    public static int readType(MemorySegment seg, long offset) {
        return seg.get(SHORT_BE, offset) & 0xFFFF;
    }
}
