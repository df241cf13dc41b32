// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.UnknownHostException;

import org.rdma4j.common.Inet6Text;

/**
 * RoCEv2 GIDs: a GID is the port's IP address as 16 bytes (IBA A17.4.5.1). An IPv4 address appears
 * IPv4-mapped, {@code ::ffff:a.b.c.d}, as rxe maps a received IPv4 destination with
 * ipv6_addr_set_v4mapped before its GID-table lookup (rxe_chk_dgid) and picks IPv4 framing when the
 * DGID is v4-mapped (rdma_gid2ip / network_type). Pure functions on {@code byte[16]}.
 */
public final class Gids {
    /** Length of a GID in bytes. */
    public static final int LENGTH = 16;

    private Gids() {
    }

    /**
     * {@return {@code ::ffff:a.b.c.d} as a new 16-byte array}
     *
     * @param ipv4 an IPv4 address, big-endian in an int (192.168.1.10 = 0xC0A8010A)
     */
    public static byte[] ipv4Mapped(int ipv4) {
        return of(0L, 0x0000_FFFF_0000_0000L | (ipv4 & 0xFFFF_FFFFL));
    }

    /**
     * {@return whether the GID is IPv4-mapped ({@code ::ffff:0:0/96})}
     *
     * @param gid 16 bytes
     */
    public static boolean isIpv4Mapped(byte[] gid) {
        check(gid);
        return hi(gid) == 0 && (lo(gid) >>> 32) == 0xFFFF;
    }

    /**
     * {@return its IPv4 address, big-endian in an int}
     *
     * @param gid an IPv4-mapped GID
     * @throws IllegalArgumentException if the GID is not IPv4-mapped
     */
    public static int ipv4(byte[] gid) {
        if (!isIpv4Mapped(gid)) {
            throw new IllegalArgumentException("GID is not IPv4-mapped: " + toString(gid));
        }
        return (int) lo(gid);
    }

    /**
     * {@return the link-local GID {@code fe80::<modified EUI-64>} (RFC 4291 appendix A: FF FE inserted in the
     * middle, the universal/local bit inverted), the default GID at index 0 of a RoCE port}
     *
     * @param mac a 6-byte Ethernet address
     */
    public static byte[] linkLocal(byte[] mac) {
        if (mac == null || mac.length != 6) {
            throw new IllegalArgumentException("a MAC address has 6 bytes");
        }
        byte[] g = new byte[LENGTH];
        g[0] = (byte) 0xFE;
        g[1] = (byte) 0x80;
        g[8] = (byte) (mac[0] ^ 0x02);
        g[9] = mac[1];
        g[10] = mac[2];
        g[11] = (byte) 0xFF;
        g[12] = (byte) 0xFE;
        g[13] = mac[3];
        g[14] = mac[4];
        g[15] = mac[5];
        return g;
    }

    /**
     * {@return its GID (IPv4 addresses mapped)}
     *
     * @param address an IPv4 or IPv6 address
     */
    public static byte[] of(InetAddress address) {
        return switch (address) {
            case Inet4Address a -> ipv4Mapped(ipv4(a));
            case Inet6Address a -> a.getAddress();
            default -> throw new IllegalArgumentException("not an IP address: " + address);
        };
    }

    /**
     * {@return it, big-endian in an int}
     *
     * @param address an IPv4 address
     */
    public static int ipv4(Inet4Address address) {
        byte[] b = address.getAddress();
        return ((b[0] & 0xFF) << 24) | ((b[1] & 0xFF) << 16) | ((b[2] & 0xFF) << 8) | (b[3] & 0xFF);
    }

    /**
     * {@return an {@link Inet4Address} for an IPv4-mapped GID, else an {@link Inet6Address}}
     *
     * @param gid 16 bytes
     */
    public static InetAddress toInetAddress(byte[] gid) {
        check(gid);
        try {
            // getByAddress turns an IPv4-mapped 16-byte address into an Inet4Address by itself
            return InetAddress.getByAddress(gid.clone());
        } catch (UnknownHostException e) {
            throw new AssertionError("16 bytes are always an address", e);
        }
    }

    /**
     * {@return the text inet_ntop(AF_INET6) gives (RFC 5952: lower-case hex, the longest run of two or more zero
     * groups as "::"), with {@code ::ffff:a.b.c.d} for IPv4-mapped GIDs, as ibv_rc_pingpong prints GIDs
     * ({@link Inet6Text#ntop})}
     *
     * @param gid 16 bytes
     */
    public static String toString(byte[] gid) {
        check(gid);
        return Inet6Text.ntop(gid);
    }

    /**
     * {@return the high 64 bits, big-endian}
     *
     * @param gid 16 bytes
     */
    public static long hi(byte[] gid) {
        check(gid);
        long v = 0;
        for (int i = 0; i < 8; i++) {
            v = (v << 8) | (gid[i] & 0xFF);
        }
        return v;
    }

    /**
     * {@return the low 64 bits, big-endian}
     *
     * @param gid 16 bytes
     */
    public static long lo(byte[] gid) {
        check(gid);
        long v = 0;
        for (int i = 8; i < 16; i++) {
            v = (v << 8) | (gid[i] & 0xFF);
        }
        return v;
    }

    /**
     * {@return a new 16-byte GID}
     *
     * @param hi high 64 bits
     * @param lo low 64 bits
     */
    public static byte[] of(long hi, long lo) {
        byte[] g = new byte[LENGTH];
        for (int i = 0; i < 8; i++) {
            g[i] = (byte) (hi >>> (56 - 8 * i));
            g[8 + i] = (byte) (lo >>> (56 - 8 * i));
        }
        return g;
    }

    private static void check(byte[] gid) {
        if (gid == null || gid.length != LENGTH) {
            throw new IllegalArgumentException("a GID has 16 bytes, got " + (gid == null ? "null" : gid.length));
        }
    }
}
