// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;

/**
 * Flyweight over an IPv6 fixed header (RFC 8200, 40 bytes). Addresses are exposed as two big-endian
 * longs (high and low 64 bits) or copied to and from 16-byte arrays. Not thread-safe.
 *
 * <pre>
 *  0-3: Version(4)|Traffic Class(8)|Flow Label(20)
 *  4-5: Payload Length  6: Next Header  7: Hop Limit
 *  8-23: Source Address  24-39: Destination Address
 * </pre>
 */
public final class Ipv6Header {
    /** Creates an {@code Ipv6Header}. */
    public Ipv6Header() {
    }

    /** Length of the IPv6 fixed header. */
    public static final int LENGTH = 40;

    private MemorySegment seg;
    private long off;

    /**
     * Points this view at the header at {@code offset} in {@code segment}.
     *
     * @param segment memory
     * @param offset offset of the header
     * @return this
     */
    public Ipv6Header wrap(MemorySegment segment, long offset) {
        this.seg = segment;
        this.off = offset;
        return this;
    }

    /** {@return the offset of the header in the segment} */
    public long offset() {
        return off;
    }

    /** {@return Version (6)} */
    public int version() {
        return Be.u8(seg, off) >>> 4;
    }

    /**
     * Sets version.
     *
     * @param v Version
     * @return this
     */
    public Ipv6Header version(int v) {
        Be.bits(seg, off, 0xF0, v << 4);
        return this;
    }

    /** {@return Traffic Class} */
    public int trafficClass() {
        return (Be.i32(seg, off) >>> 20) & 0xFF;
    }

    /**
     * Sets traffic Class.
     *
     * @param v Traffic Class
     * @return this
     */
    public Ipv6Header trafficClass(int v) {
        int w = Be.i32(seg, off);
        Be.i32(seg, off, (w & 0xF00F_FFFF) | ((v & 0xFF) << 20));
        return this;
    }

    /** {@return Flow Label (20 bits)} */
    public int flowLabel() {
        return Be.i32(seg, off) & 0xF_FFFF;
    }

    /**
     * Sets flow Label.
     *
     * @param v Flow Label
     * @return this
     */
    public Ipv6Header flowLabel(int v) {
        int w = Be.i32(seg, off);
        Be.i32(seg, off, (w & 0xFFF0_0000) | (v & 0xF_FFFF));
        return this;
    }

    /** {@return Payload Length (bytes after this header)} */
    public int payloadLength() {
        return Be.u16(seg, off + 4);
    }

    /**
     * Sets payload Length.
     *
     * @param v Payload Length
     * @return this
     */
    public Ipv6Header payloadLength(int v) {
        Be.u16(seg, off + 4, v);
        return this;
    }

    /** {@return Next Header (17 = UDP)} */
    public int nextHeader() {
        return Be.u8(seg, off + 6);
    }

    /**
     * Sets next Header.
     *
     * @param v Next Header
     * @return this
     */
    public Ipv6Header nextHeader(int v) {
        Be.u8(seg, off + 6, v);
        return this;
    }

    /** {@return Hop Limit} */
    public int hopLimit() {
        return Be.u8(seg, off + 7);
    }

    /**
     * Sets hop Limit.
     *
     * @param v Hop Limit
     * @return this
     */
    public Ipv6Header hopLimit(int v) {
        Be.u8(seg, off + 7, v);
        return this;
    }

    /** {@return the source address's high 64 bits} */
    public long sourceHi() {
        return Be.i64(seg, off + 8);
    }

    /** {@return the source address's low 64 bits} */
    public long sourceLo() {
        return Be.i64(seg, off + 16);
    }

    /** {@return the destination address's high 64 bits} */
    public long destinationHi() {
        return Be.i64(seg, off + 24);
    }

    /** {@return the destination address's low 64 bits} */
    public long destinationLo() {
        return Be.i64(seg, off + 32);
    }

    /**
     * Sets the source address from its two halves.
     *
     * @param hi high 64 bits
     * @param lo low 64 bits
     * @return this
     */
    public Ipv6Header source(long hi, long lo) {
        Be.i64(seg, off + 8, hi);
        Be.i64(seg, off + 16, lo);
        return this;
    }

    /**
     * Sets the destination address from its two halves.
     *
     * @param hi high 64 bits
     * @param lo low 64 bits
     * @return this
     */
    public Ipv6Header destination(long hi, long lo) {
        Be.i64(seg, off + 24, hi);
        Be.i64(seg, off + 32, lo);
        return this;
    }

    /**
     * Sets the 16 bytes.
     *
     * @param addr 16 bytes
     * @return this
     */
    public Ipv6Header source(byte[] addr) {
        return source(Gids.hi(addr), Gids.lo(addr));
    }

    /**
     * Sets the 16 bytes.
     *
     * @param addr 16 bytes
     * @return this
     */
    public Ipv6Header destination(byte[] addr) {
        return destination(Gids.hi(addr), Gids.lo(addr));
    }

    /** {@return the source address as a new 16-byte array (allocates: not for hot paths)} */
    public byte[] source() {
        return Gids.of(sourceHi(), sourceLo());
    }

    /** {@return the destination address as a new 16-byte array (allocates: not for hot paths)} */
    public byte[] destination() {
        return Gids.of(destinationHi(), destinationLo());
    }

    /**
     * Writes a header as rxe's prepare_ipv6_hdr does: version 6, flow label 0, next header UDP.
     *
     * @param udpLength    the UDP datagram's length (header included) = Payload Length
     * @param trafficClass Traffic Class
     * @param hopLimit     Hop Limit
     * @param src          source address (16 bytes)
     * @param dst          destination address (16 bytes)
     * @return this
     */
    public Ipv6Header init(int udpLength, int trafficClass, int hopLimit, byte[] src, byte[] dst) {
        Be.i32(seg, off, 0x6000_0000 | ((trafficClass & 0xFF) << 20));
        return payloadLength(udpLength).nextHeader(Ipv4Header.PROTO_UDP).hopLimit(hopLimit).source(src).destination(dst);
    }
}
