// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import org.junit.jupiter.api.Test;

/** Every getter/setter of the header flyweights: byte positions from the IBA layouts, and no field bleeding into another. */
class HeaderCodecTest {
    private static MemorySegment seg(int n) {
        return MemorySegment.ofArray(new byte[n + 5]).asSlice(5); // odd offset: unaligned access
    }

    @Test
    void bthFieldsSitWhereIbaPutsThem() {
        MemorySegment s = seg(12);
        Bth b = new Bth().wrap(s, 0);
        b.opcode(0x0A).solicited(true).migReq(true).padCount(3).tver(0).pkey(0x1234).fecn(true).becn(false)
                .resv6(0x15).destQp(0xABCDEF).ackReq(true).resv7(0x55).psn(0x123456);
        assertEquals("0af0123495abcdefd5123456", TestPackets.hex(s, 0, 12));
        assertEquals(0x0A, b.opcode());
        assertTrue(b.solicited());
        assertTrue(b.migReq());
        assertEquals(3, b.padCount());
        assertEquals(0, b.tver());
        assertEquals(0x1234, b.pkey());
        assertTrue(b.fecn());
        assertFalse(b.becn());
        assertEquals(0x15, b.resv6());
        assertEquals(0xABCDEF, b.destQp());
        assertTrue(b.ackReq());
        assertEquals(0x55, b.resv7());
        assertEquals(0x123456, b.psn());
        b.destQp(0x1FFFFFF).psn(-1); // 24-bit fields truncate, not spill into byte 4 / byte 8
        assertEquals(0xFFFFFF, b.destQp());
        assertEquals(0x95, s.get(ValueLayout.JAVA_BYTE, 4) & 0xFF);
        assertEquals(0xD5, s.get(ValueLayout.JAVA_BYTE, 8) & 0xFF);
    }

    @Property(tries = 300)
    void bthBitFieldsAreIndependent(@ForAll int op, @ForAll boolean se, @ForAll boolean m, @ForAll int pad, @ForAll int tver,
                                    @ForAll boolean fecn, @ForAll boolean becn, @ForAll int resv6, @ForAll boolean a,
                                    @ForAll int resv7) {
        MemorySegment s = seg(12);
        s.fill((byte) 0xA5);
        Bth b = new Bth().wrap(s, 0);
        b.tver(tver & 15).padCount(pad & 3).migReq(m).solicited(se).opcode(op & 0xFF).resv6(resv6 & 63).becn(becn).fecn(fecn)
                .resv7(resv7 & 127).ackReq(a);
        assertEquals(op & 0xFF, b.opcode());
        assertEquals(se, b.solicited());
        assertEquals(m, b.migReq());
        assertEquals(pad & 3, b.padCount());
        assertEquals(tver & 15, b.tver());
        assertEquals(fecn, b.fecn());
        assertEquals(becn, b.becn());
        assertEquals(resv6 & 63, b.resv6());
        assertEquals(a, b.ackReq());
        assertEquals(resv7 & 127, b.resv7());
        assertEquals(0xA5A5, b.pkey());
        assertEquals(0xA5A5A5, b.destQp());
        assertEquals(0xA5A5A5, b.psn());
    }

    @Test
    void extensionHeaders() {
        MemorySegment s = seg(28);
        new Reth().wrap(s, 0).va(0x0102030405060708L).rkey(0x090A0B0C).dmaLength(0x0D0E0F10);
        assertEquals("0102030405060708090a0b0c0d0e0f10", TestPackets.hex(s, 0, 16));
        Reth r = new Reth().wrap(s, 0);
        assertEquals(0x0102030405060708L, r.va());
        assertEquals(0x090A0B0C, r.rkey());
        assertEquals(0x0D0E0F10, r.dmaLength());

        AtomicEth at = new AtomicEth().wrap(s, 0).va(-2).rkey(0x11223344).swapAdd(0x5566778899AABBCCL).compare(7);
        assertEquals("fffffffffffffffe112233445566778899aabbcc0000000000000007", TestPackets.hex(s, 0, 28));
        assertEquals(-2, at.va());
        assertEquals(0x11223344, at.rkey());
        assertEquals(0x5566778899AABBCCL, at.swapAdd());
        assertEquals(7, at.compare());

        Aeth ae = new Aeth().wrap(s, 0).syndrome(0x61).msn(0xFEDCBA);
        assertEquals("61fedcba", TestPackets.hex(s, 0, 4));
        assertEquals(Aeth.NAK, ae.kind());
        assertEquals(Aeth.NAK_INVALID_REQUEST, ae.code());
        assertEquals(0xFEDCBA, ae.msn());
        ae.syndrome(0x20 | 14);
        assertEquals(Aeth.RNR_NAK, ae.kind());
        assertEquals(14, ae.code());
        ae.syndrome(Aeth.CREDITS_INVALID);
        assertEquals(Aeth.ACK, ae.kind());

        new AtomicAckEth().wrap(s, 0).origRemoteData(0x8877665544332211L);
        assertEquals("8877665544332211", TestPackets.hex(s, 0, 8));
        assertEquals(0x8877665544332211L, new AtomicAckEth().wrap(s, 0).origRemoteData());

        assertEquals(0xCAFEBABE, new ImmDt().wrap(s, 0).imm(0xCAFEBABE).imm());
        assertEquals("cafebabe", TestPackets.hex(s, 0, 4));
        assertEquals(0x1234, new Ieth().wrap(s, 0).rkey(0x1234).rkey());
        assertEquals("00001234", TestPackets.hex(s, 0, 4));

        Deth d = new Deth().wrap(s, 0).qkey(Deth.GSI_QKEY).reserved(0).srcQp(0x1000001);
        assertEquals("8001000000000001", TestPackets.hex(s, 0, 8));
        assertEquals(Deth.GSI_QKEY, d.qkey());
        assertEquals(1, d.srcQp());

        Feth f = new Feth().wrap(s, 0).word(0x31);
        assertEquals(1, f.placementType());
        assertEquals(3, f.selectivityLevel());
    }

    @Test
    void ipv4HeaderAndChecksum() {
        // V1's header (ConnectX-4 capture) carries checksum 0x9161
        MemorySegment v1 = TestPackets.hex(IcrcTest.V1);
        Ipv4Header h = new Ipv4Header().wrap(v1, 0);
        assertEquals(4, h.version());
        assertEquals(5, h.ihl());
        assertEquals(0xC2, h.tos());
        assertEquals(0x3C, h.totalLength());
        assertEquals(0x718C, h.identification());
        assertTrue(h.dontFragment());
        assertFalse(h.isFragment());
        assertEquals(0x40, h.ttl());
        assertEquals(17, h.protocol());
        assertEquals(0x9161, h.checksum());
        assertTrue(h.checksumValid());
        assertEquals(0x0A001101, h.source());
        assertEquals(0x0A001201, h.destination());

        // init() writes what rxe's prepare_ipv4_hdr writes: V3's header exactly
        MemorySegment s = seg(20);
        new Ipv4Header().wrap(s, 0).init(0x20, 0, 64, 0xC0A8010A, 0xC0A80114);
        assertEquals(IcrcTest.V3.substring(0, 40), TestPackets.hex(s, 0, 20));
        Ipv4Header g = new Ipv4Header().wrap(s, 0);
        g.ttl(3);
        assertFalse(g.checksumValid());
        g.updateChecksum();
        assertTrue(g.checksumValid());
        g.version(4).ihl(5).tos(0xB8).identification(0xBEEF).flagsFragment(Ipv4Header.FLAG_MF | 5).protocol(6).checksum(1);
        assertEquals(0x45, s.get(ValueLayout.JAVA_BYTE, 0) & 0xFF);
        assertEquals(0xB8, g.tos());
        assertEquals(0xBEEF, g.identification());
        assertTrue(g.isFragment());
        assertFalse(g.dontFragment());
        assertEquals(6, g.protocol());
        assertEquals(1, g.checksum());
    }

    @Test
    void ipv6Header() {
        MemorySegment v9 = TestPackets.hex(IcrcTest.V9);
        Ipv6Header h = new Ipv6Header().wrap(v9, 0);
        assertEquals(6, h.version());
        assertEquals(0, h.trafficClass());
        assertEquals(0, h.flowLabel());
        assertEquals(0x20, h.payloadLength());
        assertEquals(17, h.nextHeader());
        assertEquals(64, h.hopLimit());
        assertEquals(0xFE80_0000_0000_0000L, h.sourceHi());
        assertEquals(1, h.sourceLo());
        assertEquals(2, h.destinationLo());
        assertEquals("fe80::2", Gids.toString(h.destination()));

        MemorySegment s = seg(40);
        new Ipv6Header().wrap(s, 0).init(0x20, 0, 64, h.source(), h.destination());
        assertEquals(IcrcTest.V9.substring(0, 80), TestPackets.hex(s, 0, 40));
        Ipv6Header g = new Ipv6Header().wrap(s, 0).trafficClass(0xAB).flowLabel(0xFFFFF);
        assertEquals(0xAB, g.trafficClass());
        assertEquals(0xFFFFF, g.flowLabel());
        assertEquals(6, g.version());
        g.flowLabel(0x12345);
        assertEquals(0xAB, g.trafficClass());
        assertEquals("6ab12345", TestPackets.hex(s, 0, 4));
    }

    @Test
    void udpHeader() {
        MemorySegment s = seg(8);
        UdpHeader u = new UdpHeader().wrap(s, 0).sourcePort(0xDF94).destinationPort(Roce.UDP_PORT).length(0x20).checksum(0);
        assertEquals("df9412b700200000", TestPackets.hex(s, 0, 8));
        assertEquals(0xDF94, u.sourcePort());
        assertEquals(4791, u.destinationPort());
        assertEquals(0x20, u.length());
        assertEquals(0, u.checksum());
    }

    @Test
    void udpChecksumMatchesV9sKnownValue() {
        // roce-wire.md 3.2: V9 carried with UDP checksum 0xB530 had the same ICRC: that checksum is the right one
        MemorySegment v9 = TestPackets.hex(IcrcTest.V9);
        PseudoHeader ip = new PseudoHeader().from(new Ipv6Header().wrap(v9, 0), new UdpHeader().wrap(v9, 40));
        assertEquals(0xB530, new UdpHeader().wrap(v9, 40).computeChecksum(ip, v9, 48));
        // IPv4: verify by the receiver's rule, the sum over everything including the checksum is 0xFFFF
        MemorySegment v3 = TestPackets.hex(IcrcTest.V3);
        UdpHeader u = new UdpHeader().wrap(v3, 20);
        PseudoHeader ip4 = new PseudoHeader().from(new Ipv4Header().wrap(v3, 0), u);
        int c = u.computeChecksum(ip4, v3, 28);
        u.checksum(c);
        u.checksum(0);
        assertEquals(c, u.computeChecksum(ip4, v3, 28), "the stored checksum field does not feed the sum");
    }
}
