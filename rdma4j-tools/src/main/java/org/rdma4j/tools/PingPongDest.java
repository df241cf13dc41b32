// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.nio.charset.StandardCharsets;

import org.rdma4j.common.Inet6Text;
import org.rdma4j.verbs.Gid;

/**
 * One end of a pingpong connection as the ibv_*_pingpong programs exchange it over TCP
 * (rdma-core libibverbs/examples, {@code struct pingpong_dest}; roce-wire.md 5.1): the text
 * {@code "%04x:%06x:%06x:%s"} of LID, QPN, PSN and the 32-hex-digit wire GID, NUL-terminated in a
 * 52-byte buffer, of which all 52 bytes are sent.
 *
 * @param lid the port LID (0 on RoCE)
 * @param qpn the QP number
 * @param psn the starting PSN (24 bits)
 * @param gid the GID ({@link Gid#ZERO} when no -g was given)
 */
public record PingPongDest(int lid, int qpn, int psn, Gid gid) {
    /** Bytes of one message: {@code sizeof "0000:000000:000000:00000000000000000000000000000000"}. */
    public static final int MESSAGE_BYTES = 52;
    /** The all-zero entry srq_pingpong sends for the QPs it does not use (its array is memset to 0). */
    public static final PingPongDest UNUSED = new PingPongDest(0, 0, 0, Gid.ZERO);
    /** The client's last message: {@code "done"} and its NUL. */
    static final byte[] DONE = {'d', 'o', 'n', 'e', 0};

    /**
     * The message text without its NUL. Fields wider than their width are printed in full, as
     * sprintf does (the sender's buffer would then overflow in C; rdma-core never sends such values).
     *
     * @return e.g. {@code 0000:000011:7d2e1a:fe800000000000000200000000000001}
     */
    public String text() {
        return CFormat.hex(lid & 0xFFFFFFFFL, 4) + ':' + CFormat.hex(qpn & 0xFFFFFFFFL, 6) + ':'
                + CFormat.hex(psn & 0xFFFFFFFFL, 6) + ':' + wireGid(gid);
    }

    /** {@return the 52-byte message: {@link #text()}, a NUL, and zero padding if the text is short} */
    public byte[] encode() {
        byte[] t = text().getBytes(StandardCharsets.US_ASCII);
        if (t.length >= MESSAGE_BYTES) {
            throw new IllegalArgumentException("pingpong address does not fit " + MESSAGE_BYTES + " bytes: " + text());
        }
        byte[] m = new byte[MESSAGE_BYTES];
        System.arraycopy(t, 0, m, 0, t.length);
        return m;
    }

    /**
     * rdma-core's gid_to_wire_gid: the 16 GID bytes in network order as 32 lowercase hex digits (four
     * {@code %08x} of the big-endian 32-bit words).
     *
     * @param gid the GID
     * @return 32 hex digits
     */
    public static String wireGid(Gid gid) {
        return CFormat.hex(gid.hi(), 16) + CFormat.hex(gid.lo(), 16);
    }

    /**
     * Parses a message as the pingpong programs do ({@code sscanf "%x:%x:%x:%s"} then
     * wire_gid_to_gid), but refusing what they would misread: each of the first three fields must be
     * 1..8 hex digits and the GID exactly 32, before the NUL.
     *
     * @param msg the 52 bytes received
     * @return the address
     * @throws IllegalArgumentException naming what is malformed
     */
    public static PingPongDest decode(byte[] msg) {
        if (msg.length != MESSAGE_BYTES) {
            throw new IllegalArgumentException("address message is " + msg.length + " bytes (expected " + MESSAGE_BYTES
                    + ")");
        }
        int end = 0;
        while (end < msg.length && msg[end] != 0) {
            end++;
        }
        String s = new String(msg, 0, end, StandardCharsets.US_ASCII);
        if (end == msg.length) {
            throw new IllegalArgumentException("address message is not NUL-terminated: '" + printable(s) + "'");
        }
        String[] f = s.split(":", -1);
        if (f.length != 4) {
            throw new IllegalArgumentException("address message '" + printable(s)
                    + "' is not lid:qpn:psn:gid (\"%04x:%06x:%06x:%s\")");
        }
        int lid = hexField(f[0], "LID", s);
        int qpn = hexField(f[1], "QPN", s);
        int psn = hexField(f[2], "PSN", s);
        if (f[3].length() != 32 || !isHex(f[3])) {
            throw new IllegalArgumentException("GID in address message '" + printable(s)
                    + "' is not 32 hex digits");
        }
        Gid gid = new Gid(Long.parseUnsignedLong(f[3].substring(0, 16), 16),
                Long.parseUnsignedLong(f[3].substring(16), 16));
        return new PingPongDest(lid, qpn, psn, gid);
    }

    private static int hexField(String f, String what, String s) {
        if (f.isEmpty() || f.length() > 8 || !isHex(f)) {
            throw new IllegalArgumentException(what + " '" + printable(f) + "' in address message '" + printable(s)
                    + "' is not a hex number");
        }
        return (int) Long.parseLong(f, 16);
    }

    private static boolean isHex(String f) {
        for (int i = 0; i < f.length(); i++) {
            if (Character.digit(f.charAt(i), 16) < 0) {
                return false;
            }
        }
        return true;
    }

    private static String printable(String s) {
        StringBuilder b = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c >= 0x20 && c < 0x7F) {
                b.append(c);
            } else {
                b.append(String.format("\\x%02x", (int) c));
            }
        }
        return b.toString();
    }

    /**
     * glibc's {@code inet_ntop(AF_INET6, ...)}, which the pingpong programs use to print GIDs
     * ({@link Inet6Text#ntop}): groups in lowercase hex without leading zeros, the first longest run of two or
     * more zero groups as {@code ::}, and an IPv4-mapped ({@code ::ffff:a.b.c.d}) or IPv4-compatible address
     * with a dotted quad.
     *
     * @param gid the GID
     * @return e.g. {@code fe80::200:ff:fe00:1}, {@code ::ffff:192.168.1.10}, {@code ::}
     */
    public static String ntop(Gid gid) {
        return Inet6Text.ntop(gid.toBytes());
    }
}
