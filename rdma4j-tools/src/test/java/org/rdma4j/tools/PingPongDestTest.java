// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.Gid;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;

/** The 52-byte pingpong address message of roce-wire.md 5.1 and the inet_ntop GID text. */
class PingPongDestTest {
    private static final Gid IPV4 = Gid.ofInetAddress(ipv4(192, 168, 1, 10));

    private static java.net.InetAddress ipv4(int a, int b, int c, int d) {
        try {
            return java.net.InetAddress.getByAddress(new byte[] {(byte) a, (byte) b, (byte) c, (byte) d});
        } catch (java.net.UnknownHostException e) {
            throw new AssertionError(e);
        }
    }

    private static byte[] bytes(String text) {
        byte[] t = text.getBytes(StandardCharsets.US_ASCII);
        return Arrays.copyOf(t, PingPongDest.MESSAGE_BYTES);
    }

    @Test
    void roceWireExampleByteForByte() {
        // roce-wire.md 5.1: IPv4 192.168.1.10, QPN 0x11, PSN 0x7d2e1a.
        byte[] m = new PingPongDest(0, 0x11, 0x7d2e1a, IPV4).encode();
        assertEquals(52, m.length);
        assertArrayEquals(bytes("0000:000011:7d2e1a:00000000000000000000ffffc0a8010a"), m);
        assertEquals(0, m[51], "the NUL is the 52nd byte");
        assertEquals(51, "0000:000011:7d2e1a:00000000000000000000ffffc0a8010a".length());
    }

    @Test
    void linkLocalGidAndZeroGid() {
        Gid ll = new Gid(0xfe80_0000_0000_0000L, 0x0200_00ff_fe00_0abcL);
        assertArrayEquals(bytes("0000:000abc:000001:fe80000000000000020000fffe000abc"),
                new PingPongDest(0, 0xabc, 1, ll).encode());
        // No -g: a zero GID (rdma-core memsets it); srq's unused entries are all zero.
        assertArrayEquals(bytes("0000:000000:000000:00000000000000000000000000000000"),
                PingPongDest.UNUSED.encode());
        assertArrayEquals(bytes("0001:ffffff:ffffff:00000000000000000000000000000000"),
                new PingPongDest(1, 0xFFFFFF, 0xFFFFFF, Gid.ZERO).encode());
    }

    @Test
    void decodesWhatRdmaCoreSends() {
        PingPongDest d = PingPongDest.decode(bytes("0000:00001e:325d8b:fe800000000000005054fffffe990002"));
        assertEquals(new PingPongDest(0, 0x1e, 0x325d8b, new Gid(0xfe80_0000_0000_0000L, 0x5054_ffff_fe99_0002L)), d);
        // sscanf %x reads any width and either case.
        assertEquals(new PingPongDest(0x12, 0xAB, 0x7, Gid.ZERO),
                PingPongDest.decode(bytes("12:AB:7:00000000000000000000000000000000")));
    }

    @Test
    void refusesMalformedMessages() {
        assertThrows(IllegalArgumentException.class, () -> PingPongDest.decode(new byte[51]));
        assertThrows(IllegalArgumentException.class, () -> PingPongDest.decode(bytes("garbage")));
        assertThrows(IllegalArgumentException.class,
                () -> PingPongDest.decode(bytes("0000:0000zz:000000:00000000000000000000000000000000")));
        assertThrows(IllegalArgumentException.class,
                () -> PingPongDest.decode(bytes("0000:000011:000000:0000000000000000000000000000000")));
        byte[] noNul = new byte[52];
        Arrays.fill(noNul, (byte) '0');
        var e = assertThrows(IllegalArgumentException.class, () -> PingPongDest.decode(noNul));
        assertTrue(e.getMessage().contains("NUL"), e.getMessage());
    }

    @Property(tries = 300)
    void encodeDecodeRoundTrip(@ForAll @IntRange(min = 0, max = 0xFFFF) int lid,
                               @ForAll @IntRange(min = 0, max = 0xFFFFFF) int qpn,
                               @ForAll @IntRange(min = 0, max = 0xFFFFFF) int psn, @ForAll long hi, @ForAll long lo) {
        PingPongDest d = new PingPongDest(lid, qpn, psn, new Gid(hi, lo));
        byte[] m = d.encode();
        assertEquals(52, m.length);
        assertEquals(0, m[51]);
        assertEquals(d, PingPongDest.decode(m));
        // The GID is the 16 bytes in network order as lowercase hex (gid_to_wire_gid).
        StringBuilder hex = new StringBuilder();
        for (byte b : d.gid().toBytes()) {
            hex.append(String.format("%02x", b & 0xFF));
        }
        assertEquals(hex.toString(), PingPongDest.wireGid(d.gid()));
        assertEquals(String.format("%04x:%06x:%06x:%s", lid, qpn, psn, hex), d.text());
    }

    @Test
    void ntopAsGlibc() {
        assertEquals("::", PingPongDest.ntop(Gid.ZERO));
        assertEquals("::ffff:192.168.1.10", PingPongDest.ntop(IPV4));
        assertEquals("::ffff:10.99.0.2", PingPongDest.ntop(Gid.ofInetAddress(ipv4(10, 99, 0, 2))));
        assertEquals("fe80::5054:ff:fe99:2", PingPongDest.ntop(new Gid(0xfe80_0000_0000_0000L, 0x5054_00ff_fe99_0002L)));
        assertEquals("fe80::200:ff:fe00:101", PingPongDest.ntop(new Gid(0xfe80_0000_0000_0000L, 0x0200_00ff_fe00_0101L)));
        assertEquals("fd99::2", PingPongDest.ntop(new Gid(0xfd99_0000_0000_0000L, 2)));
        assertEquals("::1", PingPongDest.ntop(new Gid(0, 1)));
        assertEquals("1::", PingPongDest.ntop(new Gid(0x0001_0000_0000_0000L, 0)));
        // IPv4-compatible (::a.b.c.d, six zero groups) is dotted too; ::0.0.0.1 is not (seven).
        assertEquals("::10.0.0.1", PingPongDest.ntop(new Gid(0, 0x0a00_0001L)));
        // The first of two equally long runs is compressed; a single zero group never is.
        assertEquals("1::2:0:0:3:4", PingPongDest.ntop(new Gid(0x0001_0000_0000_0002L, 0x0000_0000_0003_0004L)));
        assertEquals("1:0:2:3:4:5:6:7", PingPongDest.ntop(new Gid(0x0001_0000_0002_0003L, 0x0004_0005_0006_0007L)));
        assertEquals("1:0:0:2::3", PingPongDest.ntop(new Gid(0x0001_0000_0000_0002L, 0x0000_0000_0000_0003L)));
    }
}
