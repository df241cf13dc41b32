package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;

/**
 * Flyweight over a UDP header (RFC 768, 8 bytes): {@code 0-1 source port, 2-3 destination port, 4-5
 * length (header + data), 6-7 checksum}. rxe sends checksum 0 on IPv4 and IPv6 (prepare_udp_hdr); the
 * ICRC masks it. Not thread-safe.
 */
public final class UdpHeader {
    /** Length of the UDP header. */
    public static final int LENGTH = 8;

    private MemorySegment seg;
    private long off;

    /** @param segment memory @param offset offset of the header @return this */
    public UdpHeader wrap(MemorySegment segment, long offset) {
        this.seg = segment;
        this.off = offset;
        return this;
    }

    /** @return the offset of the header in the segment */
    public long offset() {
        return off;
    }

    /** @return source port */
    public int sourcePort() {
        return Be.u16(seg, off);
    }

    /** @param v source port @return this */
    public UdpHeader sourcePort(int v) {
        Be.u16(seg, off, v);
        return this;
    }

    /** @return destination port */
    public int destinationPort() {
        return Be.u16(seg, off + 2);
    }

    /** @param v destination port @return this */
    public UdpHeader destinationPort(int v) {
        Be.u16(seg, off + 2, v);
        return this;
    }

    /** @return length (header + data) */
    public int length() {
        return Be.u16(seg, off + 4);
    }

    /** @param v length @return this */
    public UdpHeader length(int v) {
        Be.u16(seg, off + 4, v);
        return this;
    }

    /** @return checksum (0 = none) */
    public int checksum() {
        return Be.u16(seg, off + 6);
    }

    /** @param v checksum @return this */
    public UdpHeader checksum(int v) {
        Be.u16(seg, off + 6, v);
        return this;
    }
}
