// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;

/**
 * Flyweight over an IPv4 header (RFC 791) without options, as rxe writes it (prepare_ipv4_hdr: version
 * 4, IHL 5, DF, protocol 17). Not thread-safe.
 *
 * <pre>
 *  0: Version|IHL  1: TOS (DSCP|ECN)  2-3: Total Length
 *  4-5: Identification   6-7: Flags(3)|Fragment Offset(13)
 *  8: TTL  9: Protocol  10-11: Header Checksum
 *  12-15: Source Address  16-19: Destination Address
 * </pre>
 */
public final class Ipv4Header {
    /** Creates an {@code Ipv4Header}. */
    public Ipv4Header() {
    }

    /** Length of an IPv4 header without options. */
    public static final int LENGTH = 20;
    /** IP protocol number of UDP. */
    public static final int PROTO_UDP = 17;
    /** The DF (don't fragment) flag in the flags/fragment word. */
    public static final int FLAG_DF = 0x4000;
    /** The MF (more fragments) flag in the flags/fragment word. */
    public static final int FLAG_MF = 0x2000;

    private MemorySegment seg;
    private long off;

    /**
     * Points this view at the header at {@code offset} in {@code segment}.
     *
     * @param segment memory
     * @param offset offset of the header
     * @return this
     */
    public Ipv4Header wrap(MemorySegment segment, long offset) {
        this.seg = segment;
        this.off = offset;
        return this;
    }

    /** {@return the offset of the header in the segment} */
    public long offset() {
        return off;
    }

    /** {@return Version (4 for IPv4)} */
    public int version() {
        return Be.u8(seg, off) >>> 4;
    }

    /**
     * Sets version.
     *
     * @param v Version
     * @return this
     */
    public Ipv4Header version(int v) {
        Be.bits(seg, off, 0xF0, v << 4);
        return this;
    }

    /** {@return IHL: header length in 32-bit words (5 without options)} */
    public int ihl() {
        return Be.u8(seg, off) & 0x0F;
    }

    /**
     * Sets the IHL.
     *
     * @param v IHL
     * @return this
     */
    public Ipv4Header ihl(int v) {
        Be.bits(seg, off, 0x0F, v);
        return this;
    }

    /** {@return TOS byte (DSCP in bits 7..2, ECN in bits 1..0)} */
    public int tos() {
        return Be.u8(seg, off + 1);
    }

    /**
     * Sets the TOS.
     *
     * @param v TOS
     * @return this
     */
    public Ipv4Header tos(int v) {
        Be.u8(seg, off + 1, v);
        return this;
    }

    /** {@return Total Length (header + data)} */
    public int totalLength() {
        return Be.u16(seg, off + 2);
    }

    /**
     * Sets total Length.
     *
     * @param v Total Length
     * @return this
     */
    public Ipv4Header totalLength(int v) {
        Be.u16(seg, off + 2, v);
        return this;
    }

    /** {@return Identification (covered by the ICRC, see {@link Icrc})} */
    public int identification() {
        return Be.u16(seg, off + 4);
    }

    /**
     * Sets identification.
     *
     * @param v Identification
     * @return this
     */
    public Ipv4Header identification(int v) {
        Be.u16(seg, off + 4, v);
        return this;
    }

    /** {@return the flags and fragment offset word (bytes 6-7)} */
    public int flagsFragment() {
        return Be.u16(seg, off + 6);
    }

    /**
     * Sets the flags and fragment offset word.
     *
     * @param v the flags and fragment offset word
     * @return this
     */
    public Ipv4Header flagsFragment(int v) {
        Be.u16(seg, off + 6, v);
        return this;
    }

    /** {@return whether DF is set} */
    public boolean dontFragment() {
        return (flagsFragment() & FLAG_DF) != 0;
    }

    /** {@return whether this is a fragment (MF set or a non-zero offset)} */
    public boolean isFragment() {
        return (flagsFragment() & (FLAG_MF | 0x1FFF)) != 0;
    }

    /** {@return TTL} */
    public int ttl() {
        return Be.u8(seg, off + 8);
    }

    /**
     * Sets the TTL.
     *
     * @param v TTL
     * @return this
     */
    public Ipv4Header ttl(int v) {
        Be.u8(seg, off + 8, v);
        return this;
    }

    /** {@return Protocol} */
    public int protocol() {
        return Be.u8(seg, off + 9);
    }

    /**
     * Sets protocol.
     *
     * @param v Protocol
     * @return this
     */
    public Ipv4Header protocol(int v) {
        Be.u8(seg, off + 9, v);
        return this;
    }

    /** {@return Header Checksum as stored} */
    public int checksum() {
        return Be.u16(seg, off + 10);
    }

    /**
     * Sets header Checksum.
     *
     * @param v Header Checksum
     * @return this
     */
    public Ipv4Header checksum(int v) {
        Be.u16(seg, off + 10, v);
        return this;
    }

    /** {@return Source Address, big-endian in an int (192.168.1.10 = 0xC0A8010A)} */
    public int source() {
        return Be.i32(seg, off + 12);
    }

    /**
     * Sets source Address.
     *
     * @param v Source Address
     * @return this
     */
    public Ipv4Header source(int v) {
        Be.i32(seg, off + 12, v);
        return this;
    }

    /** {@return Destination Address, big-endian in an int} */
    public int destination() {
        return Be.i32(seg, off + 16);
    }

    /**
     * Sets destination Address.
     *
     * @param v Destination Address
     * @return this
     */
    public Ipv4Header destination(int v) {
        Be.i32(seg, off + 16, v);
        return this;
    }

    /**
     * Computes the header checksum (RFC 791/1071: one's complement of the one's complement sum of the
     * header's 16-bit words, with the checksum field taken as zero) over IHL words.
     *
     * @return the checksum the header should carry
     */
    public int computeChecksum() {
        int len = Math.max(ihl(), 5) * 4;
        return InternetChecksum.fold(InternetChecksum.sum(seg, off, 10) + InternetChecksum.sum(seg, off + 12, len - 12));
    }

    /**
     * Stores {@link #computeChecksum()} in the checksum field.
     *
     * @return this
     */
    public Ipv4Header updateChecksum() {
        return checksum(computeChecksum());
    }

    /** {@return whether the stored checksum is right} */
    public boolean checksumValid() {
        return checksum() == computeChecksum();
    }

    /**
     * Writes a header as rxe's prepare_ipv4_hdr does: version 4, IHL 5, DF, protocol UDP, and the
     * checksum; the caller sets TOS, TTL, identification and addresses first or after (then re-run
     * {@link #updateChecksum()}).
     *
     * @param udpLength the UDP datagram's length (header included)
     * @param id        Identification
     * @param ttl       TTL
     * @param src       source address
     * @param dst       destination address
     * @return this
     */
    public Ipv4Header init(int udpLength, int id, int ttl, int src, int dst) {
        Be.u8(seg, off, 0x45);
        tos(0).totalLength(LENGTH + udpLength).identification(id).flagsFragment(FLAG_DF).ttl(ttl)
                .protocol(PROTO_UDP).source(src).destination(dst);
        return updateChecksum();
    }
}
