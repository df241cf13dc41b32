// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire.net;

import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * Recovers the IPv4 Identification of a received RoCEv2 packet from its ICRC, so that a receiver
 * on a plain UDP socket (which never sees the IP header) can still verify the ICRC.
 *
 * <p>Why: the ICRC covers the IPv4 ID (rxe {@code rxe_icrc_hdr} masks only TOS, TTL and the header
 * checksum), and rxe sends a hashed ID ({@code __ip_select_ident}). Everything else the ICRC needs
 * is known to a UDP receiver: addresses (source from {@code recvfrom}, destination = the bound
 * address), total length (20 + UDP length), flags/fragment (DF, offset 0: rxe always sets DF),
 * protocol and ports.
 *
 * <p>How: CRC-32 is affine, so for two inputs of equal length that differ only in the two ID bytes,
 * {@code crc(a) ^ crc(b) = crc0(idBytes ‖ zeros(n))}, where {@code crc0} is the CRC register run
 * from 0 with no final inversion (linear over GF(2)) and {@code n} the number of ICRC bytes after
 * the ID field. Computing the ICRC with ID 0 and XORing it with the received ICRC gives a 32-bit
 * value that must be a combination of 16 known vectors, one per ID bit: a 32×16 linear system.
 * If it has a solution, that is the only ID that makes the ICRC valid (the 16 vectors are
 * independent: multiplication by x^k modulo the CRC polynomial is invertible). If it has none,
 * the packet is corrupt for every possible ID.
 *
 * <p>Strength: the check keeps 16 of the ICRC's 32 bits of error detection; an error burst of up
 * to 32 bits passes with probability 2^-16 instead of 0. Shorter errors fare better or worse by their
 * distance from the ID field (measured in Ipv4IdSolverTest: among single-byte errors, only those at
 * one distance, 115 bytes after the ID field, ever passed, and then for a few byte values). Use
 * {@link RawIpv4Socket#openCapture()} to see the real ID when that matters. Thread-safe; the
 * per-length basis is computed once and cached (the cache is a 64 Ki-entry reference array).
 */
public final class Ipv4IdSolver {
    /** ICRC bytes after the ID field that are not in the UDP datagram: IPv4 header bytes 6..19. */
    private static final int IP_BYTES_AFTER_ID = 14;
    private static final int[] TABLE = new int[256];
    /** ZERO_OPS[k] = the linear map "append 2^k zero bytes" on the CRC register, as 32 columns. */
    private static final int[][] ZERO_OPS = new int[17][];
    private static final AtomicReferenceArray<Basis> CACHE = new AtomicReferenceArray<>(0x10000);

    static {
        for (int n = 0; n < 256; n++) {
            int c = n;
            for (int k = 0; k < 8; k++) {
                c = (c & 1) != 0 ? 0xEDB88320 ^ (c >>> 1) : c >>> 1;
            }
            TABLE[n] = c;
        }
        int[] one = new int[32];
        for (int bit = 0; bit < 32; bit++) {
            one[bit] = zeroByte(1 << bit);
        }
        ZERO_OPS[0] = one;
        for (int k = 1; k < ZERO_OPS.length; k++) {
            ZERO_OPS[k] = square(ZERO_OPS[k - 1]);
        }
    }

    /** Reduced basis for one length: vectors by pivot bit, and which ID bits make each. */
    private record Basis(int[] vectors, int[] combos) {
    }

    private Ipv4IdSolver() {
    }

    /**
     * {@return the ID (0..65535) that makes the ICRC valid, or -1 if none does (corrupt packet)}
     *
     * @param icrcWithIdZero the ICRC (CRC-32 value, as {@code java.util.zip.CRC32} returns it) computed
     *     over the packet with the IPv4 ID field set to 0 and DF set
     * @param icrcOnWire the packet's ICRC (its last 4 bytes read little-endian)
     * @param udpLength the UDP length field (8 + BTH .. ICRC)
     */
    public static int solve(int icrcWithIdZero, int icrcOnWire, int udpLength) {
        if (udpLength < 8 + 4 || udpLength > 0xFFFF - 20) {
            throw new IllegalArgumentException("UDP length " + udpLength);
        }
        int diff = icrcWithIdZero ^ icrcOnWire;
        if (diff == 0) {
            return 0;
        }
        // ICRC bytes after the ID: IP header bytes 6..19, then the UDP datagram without the ICRC.
        Basis b = basis(IP_BYTES_AFTER_ID + udpLength - 4);
        int id = 0;
        for (int bit = 31; bit >= 0 && diff != 0; bit--) {
            if ((diff >>> bit & 1) != 0) {
                int v = b.vectors[bit];
                if (v == 0) {
                    return -1;
                }
                diff ^= v;
                id ^= b.combos[bit];
            }
        }
        return diff == 0 ? id : -1;
    }

    private static Basis basis(int trailing) {
        Basis b = CACHE.get(trailing);
        if (b == null) {
            b = computeBasis(trailing);
            CACHE.set(trailing, b);
        }
        return b;
    }

    private static Basis computeBasis(int trailing) {
        int[] vectors = new int[32];
        int[] combos = new int[32];
        for (int j = 0; j < 16; j++) {
            // ID bit j lives in byte 0 (bits 8..15, the high byte comes first on the wire) or byte 1.
            int hi = j >= 8 ? 1 << (j - 8) : 0;
            int lo = j < 8 ? 1 << j : 0;
            int c = TABLE[hi & 0xFF];
            c = TABLE[(c ^ lo) & 0xFF] ^ (c >>> 8);
            int v = appendZeros(c, trailing);
            int combo = 1 << j;
            for (int bit = 31; bit >= 0 && v != 0; bit--) {
                if ((v >>> bit & 1) == 0) {
                    continue;
                }
                if (vectors[bit] == 0) {
                    vectors[bit] = v;
                    combos[bit] = combo;
                    v = 0;
                } else {
                    v ^= vectors[bit];
                    combo ^= combos[bit];
                }
            }
            if (v != 0 || combo == 0) {
                throw new AssertionError("ID bit vectors are dependent for " + trailing + " trailing bytes");
            }
        }
        return new Basis(vectors, combos);
    }

    /** {@return the register after feeding {@code n} zero bytes to a CRC register holding {@code c}} */
    private static int appendZeros(int c, int n) {
        for (int k = 0; n != 0; k++, n >>>= 1) {
            if ((n & 1) != 0) {
                c = apply(ZERO_OPS[k], c);
            }
        }
        return c;
    }

    private static int zeroByte(int c) {
        return TABLE[c & 0xFF] ^ (c >>> 8);
    }

    private static int apply(int[] op, int v) {
        int r = 0;
        for (int bit = 0; v != 0; bit++, v >>>= 1) {
            if ((v & 1) != 0) {
                r ^= op[bit];
            }
        }
        return r;
    }

    private static int[] square(int[] op) {
        int[] r = new int[32];
        for (int bit = 0; bit < 32; bit++) {
            r[bit] = apply(op, op[bit]);
        }
        return r;
    }
}
