// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;

/**
 * The Internet checksum (RFC 1071): the one's complement of the one's complement sum of 16-bit big-endian words,
 * an odd last byte padded with a zero byte. IPv4 headers ({@link Ipv4Header}), UDP ({@link UdpHeader}) and ICMP
 * use it. A sum may be built from several pieces ({@link #sum}, added together) and folded once at the end
 * ({@link #fold}), as RFC 1071 section 2 (B) allows, so fields that live apart (a pseudo-header) need no copy.
 */
public final class InternetChecksum {
    private InternetChecksum() {
    }

    /**
     * The unfolded sum of {@code len} bytes as big-endian 16-bit words; an odd last byte counts as its high half.
     * Pieces may be added (up to 2^31 bytes in all without overflow); only the last piece may have an odd length.
     *
     * @param s   memory
     * @param off where the bytes start
     * @param len how many
     * @return the partial sum, to add to others and pass to {@link #fold}
     */
    public static long sum(MemorySegment s, long off, int len) {
        long sum = 0;
        int k = 0;
        for (; k + 1 < len; k += 2) {
            sum += Be.u16(s, off + k);
        }
        if (k < len) {
            sum += Be.u8(s, off + k) << 8;
        }
        return sum;
    }

    /**
     * {@return the checksum: the one's complement of the sum folded to 16 bits}
     *
     * @param sum a sum of {@link #sum} pieces (and of any 16-bit values added by hand)
     */
    public static int fold(long sum) {
        while ((sum >>> 16) != 0) {
            sum = (sum & 0xFFFF) + (sum >>> 16);
        }
        return (int) (~sum & 0xFFFF);
    }

    /**
     * The checksum of a block of bytes; over a block that holds its own correct checksum the result is 0.
     *
     * @param s   memory
     * @param off where the bytes start
     * @param len how many
     * @return the checksum to store
     */
    public static int compute(MemorySegment s, long off, int len) {
        return fold(sum(s, off, len));
    }
}
