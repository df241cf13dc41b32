// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.util.HexFormat;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

class GidsAndPortsTest {
    @Test
    void sourcePortIsRxesHashOfTheQpn() {
        // values from roce-wire.md 1.2 (rxe_qp_init_req's formula with GOLDEN_RATIO_32)
        assertEquals(0xD872, Roce.sourcePort(1));
        assertEquals(0xDF94, Roce.sourcePort(0x11));
        assertEquals(0xF806, Roce.sourcePort(0x12));
        // and the vectors V3/V6/V8 were sent from those ports
        assertEquals(0xDF94, new UdpHeader().wrap(TestPackets.hex(IcrcTest.V3), 20).sourcePort());
        assertEquals(0xF806, new UdpHeader().wrap(TestPackets.hex(IcrcTest.V6), 20).sourcePort());
        assertEquals(0xD872, new UdpHeader().wrap(TestPackets.hex(IcrcTest.V8), 20).sourcePort());
        assertThrows(IllegalArgumentException.class, () -> Roce.hash32(1, 0));
    }

    @Property(tries = 1000)
    void sourcePortStaysInTheDynamicRange(@ForAll @IntRange(min = 0, max = 0xFFFFFF) int qpn) {
        int p = Roce.sourcePort(qpn);
        assertTrue(p >= 0xC000 && p <= 0xFFFF, "port " + p);
        assertEquals(p, Roce.sourcePort(qpn), "a pure function");
    }

    @Test
    void ipv4MappedGids() throws Exception {
        byte[] g = Gids.ipv4Mapped(0xC0A8010A);
        assertEquals("00000000000000000000ffffc0a8010a", HexFormat.of().formatHex(g));
        assertTrue(Gids.isIpv4Mapped(g));
        assertEquals(0xC0A8010A, Gids.ipv4(g));
        assertEquals("::ffff:192.168.1.10", Gids.toString(g));
        InetAddress a = Gids.toInetAddress(g);
        assertInstanceOf(Inet4Address.class, a);
        assertEquals("192.168.1.10", a.getHostAddress());
        assertArrayEquals(g, Gids.of(InetAddress.getByName("192.168.1.10")));
        byte[] v6 = Gids.of(InetAddress.getByName("fe80::1"));
        assertFalse(Gids.isIpv4Mapped(v6));
        assertInstanceOf(Inet6Address.class, Gids.toInetAddress(v6));
        assertThrows(IllegalArgumentException.class, () -> Gids.ipv4(v6));
        assertThrows(IllegalArgumentException.class, () -> Gids.isIpv4Mapped(new byte[4]));
    }

    @Test
    void textLikeInetNtop() {
        assertEquals("fe80::1", Gids.toString(HexFormat.of().parseHex("fe800000000000000000000000000001")));
        assertEquals("::", Gids.toString(new byte[16]));
        assertEquals("::1", Gids.toString(HexFormat.of().parseHex("00000000000000000000000000000001")));
        assertEquals("2001:db8::1:0:0:1", Gids.toString(HexFormat.of().parseHex("20010db8000000000001000000000001")));
        assertEquals("2001:db8:0:1:1:1:1:1", Gids.toString(HexFormat.of().parseHex("20010db8000000010001000100010001")));
        assertEquals("1::", Gids.toString(HexFormat.of().parseHex("00010000000000000000000000000000")));
    }

    @Test
    void linkLocalFromMac() {
        byte[] g = Gids.linkLocal(HexFormat.of().parseHex("525400123456"));
        assertEquals("fe80::5054:ff:fe12:3456", Gids.toString(g));
    }

    @Property(tries = 500)
    void halvesRoundTrip(@ForAll @Size(16) byte[] gid) {
        assertArrayEquals(gid, Gids.of(Gids.hi(gid), Gids.lo(gid)));
        assertArrayEquals(gid, Gids.of(Gids.toInetAddress(gid)));
    }

    @Test
    void pseudoHeaderFromGids() {
        PseudoHeader p = new PseudoHeader().gids(Gids.ipv4Mapped(1), Gids.ipv4Mapped(2));
        assertFalse(p.isIpv6());
        assertEquals(1, p.ipv4Source());
        assertEquals(2, p.ipv4Destination());
        assertArrayEquals(Gids.ipv4Mapped(2), p.destinationGid());
        byte[] a = Gids.linkLocal(new byte[6]);
        PseudoHeader q = new PseudoHeader().gids(a, a);
        assertTrue(q.isIpv6());
        assertArrayEquals(a, q.sourceGid());
        assertThrows(IllegalArgumentException.class, () -> new PseudoHeader().gids(a, Gids.ipv4Mapped(1)));
    }
}
