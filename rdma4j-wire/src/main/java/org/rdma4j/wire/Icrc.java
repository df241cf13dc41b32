// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.util.zip.CRC32;

/**
 * The RoCEv2 invariant CRC (IBA A17.4.3), computed exactly as rdma_rxe does (rxe_icrc.c
 * rxe_icrc_hdr / rxe_icrc_generate / rxe_icrc_check).
 *
 * <p>The CRC is the standard reflected CRC-32 (poly 0xEDB88320, as Ethernet and {@link CRC32}) over
 * <ol>
 * <li>eight 0xFF bytes standing for the masked LRH (rxe starts from the seed 0xDEBB20E3, the CRC
 * register after them),</li>
 * <li>the IPv4 header with TOS, TTL and header checksum set to ones, or the IPv6 header with traffic
 * class, flow label and hop limit set to ones,</li>
 * <li>the UDP header with its checksum set to ones,</li>
 * <li>the BTH with byte 4 (FECN, BECN, Resv6) set to ones,</li>
 * <li>the rest of the packet up to the ICRC: extension headers, payload and pad.</li>
 * </ol>
 * The 32-bit result is stored after the pad <em>least significant byte first</em> (rxe writes the host-order
 * u32 on little-endian CPUs: {@code *icrcp = ~icrc}).
 *
 * <h2>The IPv4 identification</h2>
 * The IPv4 Identification and flags are <em>not</em> masked, so the ICRC depends on an ID the kernel
 * picks when a plain UDP socket sends, and a receiver that only gets the UDP payload never sees it.
 * A sender gets ID 0 from Linux with an unconnected socket in IP_PMTUDISC_DO mode (ip_select_ident_segs;
 * DF set, see roce-wire.md 1.6) and computes the ICRC with {@link PseudoHeader#ipId(int) ID 0}. A receiver
 * uses {@link #solveIpv4Id}: CRC-32 is affine over GF(2), so for two messages of the same length
 * {@code crc(a) ^ crc(b) = crcRaw(a ^ b)} with a zero initial register and no final inversion. Taking b as the
 * packet with ID 0, {@code icrcOnWire ^ icrc(ID=0)} is a linear function of the 16 ID bits: the sum of those
 * columns {@code crcRaw(e_i || zeros(L))} whose bit is set, L being the number of bytes after the ID. CRC-32
 * detects every burst of up to 32 bits, so the 16 columns are independent: a solution, when there is
 * one, is unique. A corrupted packet passes with probability 2^-16 (one in 65536 corrupted ones), which is
 * the price of not seeing the IP header.
 *
 * <p>One instance per thread: it keeps a {@link CRC32}, a scratch buffer and a small per-length cache of the
 * ID solver, so that computing and checking allocate nothing once warm.
 */
public final class Icrc {
    /** Length of the ICRC trailer. */
    public static final int LENGTH = 4;
    /** {@link #solveIpv4Id} result: no identification makes the ICRC match. */
    public static final int NO_ID = -1;
    /** {@link #solveIpv4Id} result: more than one identification would match (never expected; see class doc). */
    public static final int AMBIGUOUS_ID = -2;
    /** Minimum UDP payload the ICRC is defined on: BTH + ICRC. */
    public static final int MIN_LENGTH = Bth.LENGTH + LENGTH;

    /** The largest UDP payload an IPv4 packet can carry (65535 - 20 - 8). */
    public static final int MAX_IPV4_UDP_PAYLOAD = 0xFFFF - Ipv4Header.LENGTH - UdpHeader.LENGTH;

    private static final int POLY = 0xEDB88320;
    /** Offset of the IPv4 Identification in the CRC'd stream: after the 8 FF bytes and 4 bytes of IPv4 header. */
    private static final int ID_STREAM_OFFSET = 8 + 4;
    /** ZERO_POW[k] = the GF(2) matrix of feeding 2^k zero bytes to a raw CRC register (column i = image of bit i). */
    private static final int[][] ZERO_POW = new int[17][];
    /** raw CRC (register 0) of the two ID bytes with only bit i of the ID set. */
    private static final int[] ID_BIT = new int[16];
    private static final int CACHE = 64;

    static {
        int[] one = new int[32];
        for (int i = 0; i < 32; i++) {
            one[i] = step8(1 << i);
        }
        ZERO_POW[0] = one;
        for (int k = 1; k < ZERO_POW.length; k++) {
            int[] prev = ZERO_POW[k - 1];
            int[] sq = new int[32];
            for (int i = 0; i < 32; i++) {
                sq[i] = apply(prev, prev[i]);
            }
            ZERO_POW[k] = sq;
        }
        for (int i = 0; i < 16; i++) {
            int id = 1 << i;
            ID_BIT[i] = step8(step8(id >>> 8) ^ (id & 0xFF));
        }
    }

    private final CRC32 crc = new CRC32();
    private final byte[] scratch = new byte[8 + Ipv6Header.LENGTH + UdpHeader.LENGTH + Bth.LENGTH];
    private final byte[] copyBuf = new byte[512];
    private MemorySegment viewOf;
    private ByteBuffer view;
    // Direct-mapped cache of ID solvers keyed by UDP payload length: a reduced basis indexed by top bit.
    private final int[] cacheKey = new int[CACHE];
    private final int[] cacheVec = new int[CACHE * 32];
    private final int[] cacheComb = new int[CACHE * 32];
    private final boolean[] cacheAmbiguous = new boolean[CACHE];

    /** A calculator with empty caches. */
    public Icrc() {
        java.util.Arrays.fill(cacheKey, -1);
        for (int i = 0; i < 8; i++) {
            scratch[i] = (byte) 0xFF;
        }
    }

    /**
     * Computes the ICRC of a RoCEv2 packet.
     *
     * @param ip  IP/UDP fields the ICRC covers (the IPv4 ID included)
     * @param seg memory holding the UDP payload
     * @param off offset of the BTH
     * @param len UDP payload length: BTH through ICRC, at least {@link #MIN_LENGTH}
     * @return the ICRC value; the wire carries it least significant byte first
     */
    public int compute(PseudoHeader ip, MemorySegment seg, long off, int len) {
        if (len < MIN_LENGTH) {
            throw new IllegalArgumentException("a RoCE packet has at least " + MIN_LENGTH + " bytes, got " + len);
        }
        int n = 8 + ip.writeMasked(scratch, 8, len);
        MemorySegment.copy(seg, ValueLayout.JAVA_BYTE, off, scratch, n, Bth.LENGTH);
        scratch[n + 4] = (byte) 0xFF; // FECN, BECN, Resv6 (rxe: bth->qpn |= ~BTH_QPN_MASK)
        crc.reset();
        crc.update(scratch, 0, n + Bth.LENGTH);
        update(seg, off + Bth.LENGTH, len - Bth.LENGTH - LENGTH);
        return (int) crc.getValue();
    }

    /** Feeds n bytes of seg at o to the CRC without allocating (a cached ByteBuffer view of the segment). */
    private void update(MemorySegment seg, long o, int n) {
        if (n <= 0) {
            return;
        }
        if (seg != viewOf) {
            viewOf = seg;
            ByteBuffer b = seg.byteSize() <= Integer.MAX_VALUE ? seg.asByteBuffer() : null;
            // CRC32 reads direct buffers by address and heap buffers through their array; a read-only heap
            // buffer would make it copy into a fresh array, so such segments take the copy loop below.
            view = b != null && (b.isDirect() || b.hasArray()) ? b : null;
        }
        if (view != null) {
            view.clear();
            view.position((int) o).limit((int) o + n);
            crc.update(view);
            return;
        }
        while (n > 0) {
            int k = Math.min(n, copyBuf.length);
            MemorySegment.copy(seg, ValueLayout.JAVA_BYTE, o, copyBuf, 0, k);
            crc.update(copyBuf, 0, k);
            o += k;
            n -= k;
        }
    }

    /**
     * {@return the ICRC stored in the last four bytes (read little-endian)}
     *
     * @param seg memory holding the UDP payload
     * @param off offset of the BTH
     * @param len UDP payload length
     */
    public static int stored(MemorySegment seg, long off, int len) {
        return seg.get(Be.I32_LE, off + len - LENGTH);
    }

    /**
     * Computes the ICRC and stores it in the last four bytes.
     *
     * @param ip  IP/UDP fields
     * @param seg memory holding the UDP payload
     * @param off offset of the BTH
     * @param len UDP payload length
     * @return the ICRC value
     */
    public int store(PseudoHeader ip, MemorySegment seg, long off, int len) {
        int v = compute(ip, seg, off, len);
        seg.set(Be.I32_LE, off + len - LENGTH, v);
        return v;
    }

    /**
     * {@return whether the stored ICRC equals the computed one for exactly these IP/UDP fields}
     *
     * @param ip  IP/UDP fields, the IPv4 ID included
     * @param seg memory holding the UDP payload
     * @param off offset of the BTH
     * @param len UDP payload length
     */
    public boolean verify(PseudoHeader ip, MemorySegment seg, long off, int len) {
        return compute(ip, seg, off, len) == stored(seg, off, len);
    }

    /**
     * Finds the IPv4 Identification the sender's IP header must have carried for the stored ICRC to be
     * right, without seeing the IP header (see the class doc). {@code ip}'s other fields (addresses, flags,
     * ports) must be those of the packet; its ID is ignored and left unchanged.
     *
     * @param ip  IPv4 fields
     * @param seg memory holding the UDP payload
     * @param off offset of the BTH
     * @param len UDP payload length
     * @return the ID (0..65535), {@link #NO_ID} when none matches (a corrupted packet), or {@link #AMBIGUOUS_ID}
     */
    public int solveIpv4Id(PseudoHeader ip, MemorySegment seg, long off, int len) {
        if (ip.isIpv6()) {
            throw new IllegalArgumentException("IPv6 has no identification: verify the ICRC directly");
        }
        int saved = ip.ipId();
        int c0 = compute(ip.ipId(0), seg, off, len);
        ip.ipId(saved);
        int diff = c0 ^ stored(seg, off, len);
        if (diff == 0) {
            return 0; // the common case: a Linux sender with DF and an unconnected socket sends ID 0
        }
        int slot = solver(len);
        int base = slot * 32;
        int x = 0;
        for (int bit = 31; bit >= 0; bit--) {
            if ((diff >>> bit & 1) != 0) {
                int v = cacheVec[base + bit];
                if (v == 0) {
                    return NO_ID;
                }
                diff ^= v;
                x ^= cacheComb[base + bit];
            }
        }
        return cacheAmbiguous[slot] ? AMBIGUOUS_ID : x;
    }

    /**
     * {@return the 16 vectors {@code crcRaw(e_i || zeros(L))}: how each ID bit (bit 15 = MSB) flips the ICRC}
     *
     * @param len UDP payload length
     */
    public static int[] ipv4IdBasis(int len) {
        if (len < MIN_LENGTH || len > MAX_IPV4_UDP_PAYLOAD) {
            throw new IllegalArgumentException("UDP payload length out of range: " + len);
        }
        // bytes after the ID in the CRC'd stream: 8 FF + 20 IP + 8 UDP + (len - 4), minus the 14 up to the ID's end
        int zeros = 8 + Ipv4Header.LENGTH + UdpHeader.LENGTH + len - LENGTH - (ID_STREAM_OFFSET + 2);
        int[] basis = new int[16];
        for (int i = 0; i < 16; i++) {
            basis[i] = shiftZeros(ID_BIT[i], zeros);
        }
        return basis;
    }

    /** {@return the cache slot holding the reduced basis for this length, filling it if needed} */
    private int solver(int len) {
        int slot = (len >>> 2) & (CACHE - 1);
        if (cacheKey[slot] == len) {
            return slot;
        }
        int[] basis = ipv4IdBasis(len);
        int base = slot * 32;
        java.util.Arrays.fill(cacheVec, base, base + 32, 0);
        java.util.Arrays.fill(cacheComb, base, base + 32, 0);
        boolean ambiguous = false;
        for (int i = 0; i < 16; i++) {
            int v = basis[i];
            int c = 1 << i;
            while (v != 0) {
                int top = 31 - Integer.numberOfLeadingZeros(v);
                if (cacheVec[base + top] == 0) {
                    cacheVec[base + top] = v;
                    cacheComb[base + top] = c;
                    break;
                }
                v ^= cacheVec[base + top];
                c ^= cacheComb[base + top];
            }
            ambiguous |= v == 0;
        }
        cacheAmbiguous[slot] = ambiguous;
        cacheKey[slot] = len;
        return slot;
    }

    /** Feeds {@code count} zero bytes to a raw CRC register (no init, no final inversion). */
    static int shiftZeros(int reg, long count) {
        for (int k = 0; count != 0; k++, count >>>= 1) {
            if ((count & 1) != 0) {
                reg = apply(ZERO_POW[k], reg);
            }
        }
        return reg;
    }

    private static int apply(int[] matrix, int v) {
        int r = 0;
        for (int i = 0; v != 0; i++, v >>>= 1) {
            if ((v & 1) != 0) {
                r ^= matrix[i];
            }
        }
        return r;
    }

    /** One byte (already XORed into the low bits of the register) through the reflected CRC-32. */
    private static int step8(int r) {
        for (int i = 0; i < 8; i++) {
            r = (r >>> 1) ^ (POLY & -(r & 1));
        }
        return r;
    }

    /**
     * A plain bitwise CRC-32 update on a raw register, for tests and reference.
     *
     * @param reg raw register
     * @param b   bytes
     * @param o   offset
     * @param n   count
     * @return the register after the bytes
     */
    static int rawUpdate(int reg, byte[] b, int o, int n) {
        for (int i = 0; i < n; i++) {
            reg = step8(reg ^ (b[o + i] & 0xFF));
        }
        return reg;
    }
}
