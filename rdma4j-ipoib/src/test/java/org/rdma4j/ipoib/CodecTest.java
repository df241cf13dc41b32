// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HexFormat;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.Gid;

/** The IPoIB header, the 20-byte hardware address, IPoIB ARP and the broadcast GIDs, byte by byte. */
class CodecTest {
    private static final HexFormat HEX = HexFormat.of();

    private static byte[] bytes(MemorySegment s, int off, int len) {
        return s.asSlice(off, len).toArray(ValueLayout.JAVA_BYTE);
    }

    @Test
    void headerIsTypeThenTwoZeroBytes() {
        MemorySegment s = Arena.ofAuto().allocate(8);
        s.fill((byte) 0x55);
        Ipoib.writeHeader(s, 2, Ipoib.TYPE_ARP);
        assertEquals("5555" + "0806" + "0000" + "5555", HEX.formatHex(bytes(s, 0, 8)));
        assertEquals(Ipoib.TYPE_ARP, Ipoib.readType(s, 2));
        Ipoib.writeHeader(s, 0, Ipoib.TYPE_IPV6);
        assertEquals(0x86DD, Ipoib.readType(s, 0));
    }

    @Test
    void broadcastGidOfDefaultPartitionIsRfc4391s() {
        // RFC 4391 section 4.1: ff12:401b:<P_Key>::ffff:ffff with the full-membership P_Key 0xffff
        assertEquals("ff12:401b:ffff:0000:0000:0000:ffff:ffff", Ipoib.broadcastGid(0xFFFF).toString());
        // a limited-member P_Key still names the full-member group
        assertEquals("ff12:401b:8001:0000:0000:0000:ffff:ffff", Ipoib.broadcastGid(0x0001).toString());
        assertTrue(Ipoib.broadcastGid(0x7FFF).isMulticast());
        Gid v4 = Ipoib.broadcastGidIpv4(0xFFFF);
        assertTrue(v4.isIpv4Mapped() && v4.isMulticast(), v4.toString());
        assertEquals("239.64.255.255", v4.toInetAddress().getHostAddress());
    }

    @Test
    void hardwareAddressIsFlagsQpnThenGid() {
        Gid g = new Gid(0xFE80_0000_0000_0000L, 0x0200_00FF_FE00_0101L);
        HardwareAddress a = new HardwareAddress(0, 0x12, g);
        MemorySegment s = Arena.ofAuto().allocate(24);
        a.encode(s, 2);
        assertEquals("00000012" + "fe80000000000000" + "020000fffe000101", HEX.formatHex(bytes(s, 2, 20)));
        assertEquals(a, HardwareAddress.decode(s, 2));
        assertTrue(a.matches(s, 2));
        assertFalse(new HardwareAddress(0, 0x13, g).matches(s, 2));
        assertEquals("00:00:00:12:fe:80:00:00:00:00:00:00:02:00:00:ff:fe:00:01:01", a.toString());
        assertThrows(IllegalArgumentException.class, () -> new HardwareAddress(0, 1 << 24, g));
        assertThrows(IllegalArgumentException.class, () -> new HardwareAddress(256, 1, g));
    }

    @Property(tries = 200)
    void hardwareAddressRoundTrips(@ForAll @IntRange(min = 0, max = 255) int flags,
                                   @ForAll @IntRange(min = 0, max = 0xFFFFFF) int qpn, @ForAll long hi, @ForAll long lo) {
        HardwareAddress a = new HardwareAddress(flags, qpn, new Gid(hi, lo));
        MemorySegment s = Arena.ofAuto().allocate(20);
        a.encode(s, 0);
        assertEquals(a, HardwareAddress.decode(s, 0));
    }

    @Test
    void arpRequestHasRfc4391Layout() {
        HardwareAddress sha = new HardwareAddress(0, 0x11, new Gid(0, 0x0000_FFFF_0AC9_0001L));
        MemorySegment s = Arena.ofAuto().allocate(ArpPacket.BYTES);
        s.fill((byte) 0x77);
        new ArpPacket().wrap(s, 0).write(ArpPacket.OP_REQUEST, sha, 0x0AC8_0001, null, 0x0AC8_0002);
        String hex = HEX.formatHex(bytes(s, 0, ArpPacket.BYTES));
        // htype 32, ptype 0x0800, hlen 20, plen 4, op 1
        assertEquals("0020" + "0800" + "14" + "04" + "0001", hex.substring(0, 16));
        assertEquals("00000011" + "00000000000000000000ffff0ac90001", hex.substring(16, 56));
        assertEquals("0ac80001", hex.substring(56, 64));
        assertEquals("00".repeat(20), hex.substring(64, 104), "target hardware unknown in a request");
        assertEquals("0ac80002", hex.substring(104, 112));
        ArpPacket a = new ArpPacket().wrap(s, 0);
        assertEquals(ArpPacket.Verdict.OK, a.validate(ArpPacket.BYTES));
        assertEquals(sha, a.senderHardware());
        assertEquals(0x0AC8_0001, a.senderIp());
        assertEquals(0x0AC8_0002, a.targetIp());
        assertEquals(ArpPacket.OP_REQUEST, a.operation());
    }

    @Test
    void arpValidationNamesWhatIsWrong() {
        MemorySegment s = Arena.ofAuto().allocate(ArpPacket.BYTES);
        ArpPacket a = new ArpPacket().wrap(s, 0);
        HardwareAddress sha = new HardwareAddress(0, 0x11, Gid.ZERO);
        a.write(ArpPacket.OP_REPLY, sha, 1, sha, 2);
        assertEquals(ArpPacket.Verdict.TRUNCATED, a.validate(ArpPacket.BYTES - 1));
        byte[] good = bytes(s, 0, ArpPacket.BYTES);
        s.set(ValueLayout.JAVA_BYTE, 1, (byte) 1); // Ethernet hardware type
        assertEquals(ArpPacket.Verdict.BAD_HARDWARE, a.validate(ArpPacket.BYTES));
        MemorySegment.copy(good, 0, s, ValueLayout.JAVA_BYTE, 0, good.length);
        s.set(ValueLayout.JAVA_BYTE, 4, (byte) 6); // 6-byte MAC length
        assertEquals(ArpPacket.Verdict.BAD_HARDWARE, a.validate(ArpPacket.BYTES));
        MemorySegment.copy(good, 0, s, ValueLayout.JAVA_BYTE, 0, good.length);
        s.set(ValueLayout.JAVA_BYTE, 2, (byte) 0x86);
        assertEquals(ArpPacket.Verdict.BAD_PROTOCOL, a.validate(ArpPacket.BYTES));
        MemorySegment.copy(good, 0, s, ValueLayout.JAVA_BYTE, 0, good.length);
        s.set(ValueLayout.JAVA_BYTE, 7, (byte) 3); // RARP request
        assertEquals(ArpPacket.Verdict.BAD_OPERATION, a.validate(ArpPacket.BYTES));
        MemorySegment.copy(good, 0, s, ValueLayout.JAVA_BYTE, 0, good.length);
        assertEquals(ArpPacket.Verdict.OK, a.validate(ArpPacket.BYTES));
        assertArrayEquals(good, bytes(s, 0, ArpPacket.BYTES));
    }

    @Test
    void fragmentationNeededQuotesHeaderAndEightBytes() {
        // a 9000-byte TCP segment with DF from 10.200.0.1 to 10.200.0.2 (its first 28 bytes), answered with next-hop
        // MTU 2044: an IPv4 header from .2 to .1 (protocol 1, TTL 64, no DF), type 3 code 4, both checksums right
        MemorySegment in = MemorySegment.ofArray(HEX.parseHex("ffff"
                + "45002328123440004006f0090ac800010ac80002" + "0102030405060708"));
        try (Arena arena = Arena.ofConfined()) {
            IcmpTooBig icmp = new IcmpTooBig(arena);
            int n = icmp.build(in, 2, 9000, 2044);
            assertEquals(56, n);
            assertEquals("4500003800000000400165330ac800020ac80001" + "0304e4eb000007fc"
                    + "45002328123440004006f0090ac800010ac80002" + "0102030405060708",
                    HEX.formatHex(bytes(icmp.message(), 0, n)));
            // none about a non-initial fragment (RFC 1122 3.2.2) or an ICMP error message
            in.set(ValueLayout.JAVA_BYTE, 2 + 7, (byte) 1);
            assertEquals(0, icmp.build(in, 2, 9000, 2044));
            MemorySegment err = MemorySegment.ofArray(HEX.parseHex(
                    "45000038123440004001f0090ac800010ac80002" + "0304000000000000"));
            assertEquals(0, icmp.build(err, 0, 1500, 1400));
            err.set(ValueLayout.JAVA_BYTE, 20, (byte) 8); // an echo request does get one
            assertEquals(56, icmp.build(err, 0, 1500, 1400));
        }
    }
}
