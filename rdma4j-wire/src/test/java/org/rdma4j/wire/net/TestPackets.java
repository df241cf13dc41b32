// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire.net;

import java.util.HexFormat;
import java.util.zip.CRC32;

/**
 * Test-only RoCEv2 helpers: the ICRC as roce-wire.md section 3.1 describes it (rxe
 * {@code rxe_icrc_hdr}/{@code rxe_icrc_generate}), written independently of the production ICRC in
 * org.rdma4j.wire so these tests do not depend on it, and a UD SEND_ONLY builder.
 */
final class TestPackets {
    private static final byte[] FF8 = {-1, -1, -1, -1, -1, -1, -1, -1};

    private TestPackets() {
    }

    /**
     * @param ip a full IPv4 or IPv6 packet: IP header (no options), UDP, BTH .. pad, ICRC
     * @param ipLen 20 or 40
     * @return the ICRC value over everything before the last 4 bytes
     */
    static int icrc(byte[] ip, int ipLen) {
        int hdr = ipLen + 8 + 12;
        byte[] h = java.util.Arrays.copyOf(ip, hdr);
        if (ipLen == 20) {
            h[1] = h[8] = h[10] = h[11] = (byte) 0xFF;
        } else {
            h[0] |= 0x0F;
            h[1] = h[2] = h[3] = h[7] = (byte) 0xFF;
        }
        h[ipLen + 6] = h[ipLen + 7] = (byte) 0xFF;
        h[ipLen + 8 + 4] = (byte) 0xFF;
        CRC32 c = new CRC32();
        c.update(FF8);
        c.update(h);
        c.update(ip, hdr, ip.length - 4 - hdr);
        return (int) c.getValue();
    }

    /** @return the last 4 bytes read little-endian (the ICRC as rxe stores it) */
    static int wireIcrc(byte[] ip) {
        int n = ip.length;
        return (ip[n - 4] & 0xFF) | (ip[n - 3] & 0xFF) << 8 | (ip[n - 2] & 0xFF) << 16 | (ip[n - 1] & 0xFF) << 24;
    }

    /** Writes the ICRC into the last 4 bytes. */
    static void sealIcrc(byte[] ip, int ipLen) {
        int c = icrc(ip, ipLen);
        int n = ip.length;
        ip[n - 4] = (byte) c;
        ip[n - 3] = (byte) (c >>> 8);
        ip[n - 2] = (byte) (c >>> 16);
        ip[n - 1] = (byte) (c >>> 24);
    }

    /** UD SEND_ONLY (opcode 0x64): BTH + DETH + payload + pad + room for the ICRC. */
    static byte[] udSendOnly(int destQp, int psn, int qkey, int srcQp, byte[] payload) {
        int pad = (4 - payload.length % 4) % 4;
        byte[] b = new byte[12 + 8 + payload.length + pad + 4];
        b[0] = 0x64;
        b[1] = (byte) (pad << 4);
        b[2] = (byte) 0xFF;
        b[3] = (byte) 0xFF;
        putInt(b, 4, destQp & 0xFFFFFF);
        putInt(b, 8, psn & 0xFFFFFF);
        putInt(b, 12, qkey);
        putInt(b, 16, srcQp & 0xFFFFFF);
        System.arraycopy(payload, 0, b, 20, payload.length);
        return b;
    }

    /** IPv4 header (DF, TTL 64, checksum left 0: masked in the ICRC) + UDP header in front of {@code udpPayload}. */
    static byte[] ipv4Udp(int src, int dst, int sport, int dport, int id, byte[] udpPayload) {
        int udpLen = 8 + udpPayload.length;
        byte[] p = new byte[20 + udpLen];
        p[0] = 0x45;
        putShort(p, 2, 20 + udpLen);
        putShort(p, 4, id);
        putShort(p, 6, 0x4000);
        p[8] = 64;
        p[9] = 17;
        putInt(p, 12, src);
        putInt(p, 16, dst);
        putShort(p, 20, sport);
        putShort(p, 22, dport);
        putShort(p, 24, udpLen);
        System.arraycopy(udpPayload, 0, p, 28, udpPayload.length);
        return p;
    }

    /** IPv6 header (hop limit 64) + UDP header in front of {@code udpPayload}. */
    static byte[] ipv6Udp(byte[] src, byte[] dst, int sport, int dport, byte[] udpPayload) {
        int udpLen = 8 + udpPayload.length;
        byte[] p = new byte[40 + udpLen];
        p[0] = 0x60;
        putShort(p, 4, udpLen);
        p[6] = 17;
        p[7] = 64;
        System.arraycopy(src, 0, p, 8, 16);
        System.arraycopy(dst, 0, p, 24, 16);
        putShort(p, 40, sport);
        putShort(p, 42, dport);
        putShort(p, 44, udpLen);
        System.arraycopy(udpPayload, 0, p, 48, udpPayload.length);
        return p;
    }

    static void putShort(byte[] b, int off, int v) {
        b[off] = (byte) (v >>> 8);
        b[off + 1] = (byte) v;
    }

    static void putInt(byte[] b, int off, int v) {
        b[off] = (byte) (v >>> 24);
        b[off + 1] = (byte) (v >>> 16);
        b[off + 2] = (byte) (v >>> 8);
        b[off + 3] = (byte) v;
    }

    static int getShort(byte[] b, int off) {
        return (b[off] & 0xFF) << 8 | (b[off + 1] & 0xFF);
    }

    static int getInt(byte[] b, int off) {
        return (b[off] & 0xFF) << 24 | (b[off + 1] & 0xFF) << 16 | (b[off + 2] & 0xFF) << 8 | (b[off + 3] & 0xFF);
    }

    static byte[] hex(String s) {
        return HexFormat.of().parseHex(s);
    }
}
