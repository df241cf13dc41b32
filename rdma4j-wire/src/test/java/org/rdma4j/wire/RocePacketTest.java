// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.rdma4j.wire.RoceOpcode.*;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.Random;

import org.junit.jupiter.api.Test;

/** Building packets from fields reproduces the published vectors; parsing classifies every drop reason and counts it. */
class RocePacketTest {
    private static final int SRC = 0xC0A8010A;
    private static final int DST = 0xC0A80114;

    private final Icrc icrc = new Icrc();
    private final RocePacket p = new RocePacket();
    private final MemorySegment buf = MemorySegment.ofArray(new byte[512]);

    private String built(int len) {
        return TestPackets.hex(buf, 0, len);
    }

    private static String udpPayload(String vector, int ipLen) {
        return vector.substring(2 * (ipLen + 8));
    }

    @Test
    void buildsV3SendOnly() {
        int len = p.build(buf, 0, RC | SEND_ONLY, 5);
        p.bth().destQp(0x12).ackReq(true).psn(0x123456);
        MemorySegment.copy("hello".getBytes(StandardCharsets.US_ASCII), 0, buf, ValueLayout.JAVA_BYTE, p.payloadOffset(), 5);
        p.seal(icrc, new PseudoHeader().ipv4(SRC, DST).ports(Roce.sourcePort(0x11), Roce.UDP_PORT));
        assertEquals(3, p.padCount());
        assertEquals(udpPayload(IcrcTest.V3, 20), built(len));
    }

    @Test
    void buildsV4WriteOnly() {
        int len = p.build(buf, 0, RC | WRITE_ONLY, 16);
        p.bth().destQp(0x12).ackReq(true).psn(0x10);
        p.reth().va(0x7f0000001000L).rkey(0x1234).dmaLength(16);
        for (int i = 0; i < 16; i++) {
            buf.set(ValueLayout.JAVA_BYTE, p.payloadOffset() + i, (byte) i);
        }
        p.seal(icrc, new PseudoHeader().ipv4(SRC, DST).ports(0xDF94, Roce.UDP_PORT));
        assertEquals(udpPayload(IcrcTest.V4, 20), built(len));
    }

    @Test
    void buildsV5ReadRequestV6AckV7NakV8UdSend() {
        PseudoHeader ip = new PseudoHeader().ipv4(SRC, DST).ports(0xDF94, Roce.UDP_PORT);
        int len = p.build(buf, 0, RC | READ_REQUEST, 0);
        p.bth().destQp(0x12).ackReq(true).psn(0x20);
        p.reth().va(0x7f0000002000L).rkey(0x1234).dmaLength(4096);
        p.seal(icrc, ip);
        assertEquals(udpPayload(IcrcTest.V5, 20), built(len));

        ip.ports(0xF806, Roce.UDP_PORT);
        len = p.build(buf, 0, RC | ACKNOWLEDGE, 0);
        p.bth().destQp(0x11).psn(0x123456);
        p.aeth().syndrome(Aeth.CREDITS_INVALID).msn(1);
        p.seal(icrc, ip);
        assertEquals(udpPayload(IcrcTest.V6, 20), built(len));

        len = p.build(buf, 0, RC | ACKNOWLEDGE, 0);
        p.bth().destQp(0x11).psn(0x123457);
        p.aeth().syndrome(Aeth.NAK | Aeth.NAK_PSN_SEQUENCE_ERROR).msn(1);
        p.seal(icrc, ip);
        assertEquals(udpPayload(IcrcTest.V7, 20), built(len));

        ip.ports(0xD872, Roce.UDP_PORT);
        len = p.build(buf, 0, UD | SEND_ONLY, 8);
        p.bth().destQp(1).psn(0);
        p.deth().qkey(Deth.GSI_QKEY).srcQp(1);
        MemorySegment.copy(new byte[] {1, 7, 2, 3, 0, 0, 0, 0}, 0, buf, ValueLayout.JAVA_BYTE, p.payloadOffset(), 8);
        p.seal(icrc, ip);
        assertEquals(udpPayload(IcrcTest.V8, 20), built(len));
    }

    @Test
    void buildsV9OverIpv6() {
        int len = p.build(buf, 0, RC | SEND_ONLY, 5);
        p.bth().destQp(0x11).ackReq(true).psn(0x100);
        MemorySegment.copy("hello".getBytes(StandardCharsets.US_ASCII), 0, buf, ValueLayout.JAVA_BYTE, p.payloadOffset(), 5);
        p.seal(icrc, new PseudoHeader().ipv6(0xFE80_0000_0000_0000L, 1, 0xFE80_0000_0000_0000L, 2).ports(0xC123, Roce.UDP_PORT));
        assertEquals(udpPayload(IcrcTest.V9, 40), built(len));
    }

    @Test
    void buildsACnpLikeTheConnectX() {
        // V1 has UDP source port 0 and BECN set; its ICRC covers the 16 reserved bytes
        int len = p.build(buf, 0, CNP, 0);
        p.bth().becn(true).destQp(0x118);
        p.seal(icrc, new PseudoHeader().ipv4(0x0A001101, 0x0A001201).ipId(0x718C).ports(0, Roce.UDP_PORT));
        assertEquals(udpPayload(IcrcTest.V1, 20), built(len));
    }

    @Test
    void everyOpcodeRoundTripsThroughBuildAndParse() {
        Random r = new Random(7);
        RoceParser parser = new RoceParser();
        for (int op : TestPackets.OPCODES) {
            for (int k = 0; k < 20; k++) {
                PseudoHeader ip = TestPackets.randomIp(r);
                int len = TestPackets.randomPacket(p, buf, op, r, ip, icrc);
                int id = ip.ipId();
                ip.ipId(0); // the receiver does not know it
                RocePacket q = new RocePacket();
                RoceStatus s = parser.parse(q, buf, 0, len, ip);
                assertEquals(op == CNP ? RoceStatus.CNP : RoceStatus.OK, s, RoceOpcode.name(op));
                assertEquals(p.payloadLength(), q.payloadLength());
                assertEquals(p.headerLength(), q.headerLength());
                if (!ip.isIpv6()) {
                    assertEquals(id, parser.lastIpv4Id());
                    ip.ipId(id);
                }
                MemorySegment again = TestPackets.reencode(q, ip, icrc);
                assertEquals(built(len), TestPackets.hex(again, 0, len), RoceOpcode.name(op));
            }
        }
        assertEquals(0, parser.count(RoceStatus.BAD_ICRC));
    }

    /** V3 edited, its ICRC recomputed over len bytes so that only the edit is wrong. */
    private RoceStatus parseV3(java.util.function.Consumer<MemorySegment> edit, int len, RoceParser parser) {
        MemorySegment v = MemorySegment.ofArray(new byte[64]);
        MemorySegment.copy(TestPackets.hex(IcrcTest.V3), 0, v, 0, 52);
        edit.accept(v);
        PseudoHeader ip = new PseudoHeader().ipv4(SRC, DST).ports(0xDF94, Roce.UDP_PORT);
        if (len >= Icrc.MIN_LENGTH) {
            icrc.store(ip, v, 28, len);
        }
        return parser.parse(new RocePacket(), v, 28, len, ip);
    }

    /** V3 edited after its ICRC: the ICRC no longer matches. */
    private RoceStatus parseV3Corrupted(int at, int value, RoceParser parser) {
        MemorySegment v = TestPackets.hex(IcrcTest.V3);
        set(v, at, value);
        return parser.parse(new RocePacket(), v, 28, 24, new PseudoHeader().ipv4(SRC, DST).ports(0xDF94, Roce.UDP_PORT));
    }

    private static void set(MemorySegment s, long o, int v) {
        s.set(ValueLayout.JAVA_BYTE, o, (byte) v);
    }

    @Test
    void eachDropReasonIsReturnedAndCounted() {
        RoceParser parser = new RoceParser();
        assertEquals(RoceStatus.OK, parseV3(s -> { }, 24, parser));
        assertEquals(RoceStatus.TOO_SHORT, parseV3(s -> { }, 15, parser));
        assertEquals(RoceStatus.BAD_VERSION, parseV3(s -> set(s, 29, 0x31), 24, parser));
        assertEquals(RoceStatus.UNKNOWN_OPCODE, parseV3(s -> set(s, 28, 0x15), 24, parser));
        assertEquals(RoceStatus.UNKNOWN_OPCODE, parseV3(s -> set(s, 28, 0x44), 24, parser));
        assertEquals(RoceStatus.BAD_LENGTH, parseV3(s -> { }, 23, parser)); // not a multiple of 4
        assertEquals(RoceStatus.BAD_LENGTH, parseV3(s -> set(s, 28, 0x11), 24, parser)); // ACK with 8 bytes after its headers
        assertEquals(RoceStatus.TOO_SHORT, parseV3(s -> set(s, 28, 0x0A), 24, parser)); // WRITE_ONLY needs a RETH
        RocePacket nak = new RocePacket();
        assertEquals(RoceStatus.BAD_PAD, parseV3(s -> set(s, 28, 0x00), 24, parser)); // SEND_FIRST with pad 3
        // and its headers stay readable, for an RC responder's NAK invalid request
        MemorySegment first = MemorySegment.ofArray(TestPackets.hex(IcrcTest.V3).toArray(ValueLayout.JAVA_BYTE));
        set(first, 28, 0x00);
        PseudoHeader ip = new PseudoHeader().ipv4(SRC, DST).ports(0xDF94, Roce.UDP_PORT);
        icrc.store(ip, first, 28, 24);
        assertEquals(RoceStatus.BAD_PAD, new RoceParser().parse(nak, first, 28, 24, ip));
        assertTrue(nak.isValid());
        assertEquals(0x123456, nak.bth().psn());
        assertEquals(RoceStatus.BAD_ICRC, parseV3Corrupted(40, 'j', parser));
        assertEquals(RoceStatus.BAD_ICRC, parseV3Corrupted(50, 1, parser)); // pad bytes are covered
        // a length error is reported only with a good ICRC; with a bad one it is an ICRC drop like any other
        assertEquals(RoceStatus.BAD_ICRC, parseV3Corrupted(28, 0x00, parser));
        assertEquals(1, parser.count(RoceStatus.OK));
        assertEquals(2, parser.count(RoceStatus.TOO_SHORT));
        assertEquals(1, parser.count(RoceStatus.BAD_VERSION));
        assertEquals(2, parser.count(RoceStatus.UNKNOWN_OPCODE));
        assertEquals(2, parser.count(RoceStatus.BAD_LENGTH));
        assertEquals(1, parser.count(RoceStatus.BAD_PAD));
        assertEquals(3, parser.count(RoceStatus.BAD_ICRC));
        assertEquals(11, parser.dropped());
        assertEquals(1, parser.accepted());
        parser.resetCounters();
        assertEquals(0, parser.dropped());
    }

    @Test
    void lengthRulesPerPosition() {
        RocePacket q = new RocePacket();
        MemorySegment s = MemorySegment.ofArray(new byte[64]);
        // SEND_ONLY with no payload but PadCnt 1: the pad does not fit
        new Bth().wrap(s, 0).opcode(RC | SEND_ONLY).padCount(1);
        assertEquals(RoceStatus.BAD_PAD, q.wrap(s, 0, 16));
        // empty SEND_ONLY is fine, an empty SEND_LAST or SEND_MIDDLE is not
        new Bth().wrap(s, 0).opcode(RC | SEND_ONLY).padCount(0);
        assertEquals(RoceStatus.OK, q.wrap(s, 0, 16));
        new Bth().wrap(s, 0).opcode(RC | SEND_LAST);
        assertEquals(RoceStatus.BAD_LENGTH, q.wrap(s, 0, 16));
        new Bth().wrap(s, 0).opcode(UC | SEND_MIDDLE);
        assertEquals(RoceStatus.BAD_LENGTH, q.wrap(s, 0, 16));
        assertEquals(RoceStatus.OK, q.wrap(s, 0, 20));
        // ATOMIC_WRITE carries exactly 8 bytes
        new Bth().wrap(s, 0).opcode(RC | ATOMIC_WRITE);
        assertEquals(RoceStatus.OK, q.wrap(s, 0, 28 + 8 + 4));
        assertEquals(RoceStatus.BAD_LENGTH, q.wrap(s, 0, 28 + 4 + 4));
        // CNP: exactly BTH + 16 + ICRC
        new Bth().wrap(s, 0).opcode(CNP);
        assertEquals(RoceStatus.CNP, q.wrap(s, 0, 32));
        assertEquals(RoceStatus.BAD_LENGTH, q.wrap(s, 0, 36));
        assertEquals(RoceStatus.TOO_SHORT, q.wrap(s, 0, 28));
    }

    @Test
    void ipPacketDrops() {
        RoceParser parser = new RoceParser();
        RocePacket q = new RocePacket();
        java.util.function.BiFunction<Integer, Integer, RoceStatus> edited = (at, v) -> {
            MemorySegment s = TestPackets.hex(IcrcTest.V3);
            if (at >= 0) {
                set(s, at, v);
            }
            Ipv4Header h = new Ipv4Header().wrap(s, 0);
            if (at != 10 && at != 11) {
                h.updateChecksum();
            }
            return parser.parseIpPacket(q, s, 0, (int) s.byteSize());
        };
        assertEquals(RoceStatus.OK, edited.apply(-1, 0));
        assertEquals(RoceStatus.BAD_IP, edited.apply(0, 0x46)); // options
        assertEquals(RoceStatus.BAD_IP, edited.apply(0, 0x55)); // version 5
        assertEquals(RoceStatus.BAD_IP, edited.apply(10, 0)); // header checksum
        assertEquals(RoceStatus.BAD_IP, edited.apply(6, 0x20)); // MF: a fragment
        assertEquals(RoceStatus.BAD_IP, edited.apply(3, 0x35)); // total length beyond the bytes
        assertEquals(RoceStatus.NOT_ROCE, edited.apply(9, 6)); // TCP
        assertEquals(RoceStatus.NOT_ROCE, edited.apply(23, 0xB8)); // port 4792
        assertEquals(RoceStatus.BAD_IP, edited.apply(25, 0x40)); // UDP length beyond the IP payload
        assertEquals(RoceStatus.BAD_ICRC, edited.apply(5, 1)); // the IPv4 ID is covered
        assertEquals(RoceStatus.OK, edited.apply(8, 1)); // the TTL is not
        assertEquals(RoceStatus.BAD_IP, parser.parseIpPacket(q, MemorySegment.ofArray(new byte[3]), 0, 3));
        assertEquals(RoceStatus.BAD_IP, parser.parseIpPacket(q, MemorySegment.ofArray(new byte[0]), 0, 0));
        // Ethernet padding after the IP packet is ignored
        MemorySegment padded = MemorySegment.ofArray(new byte[80]);
        MemorySegment.copy(TestPackets.hex(IcrcTest.V3), 0, padded, 0, 52);
        assertEquals(RoceStatus.OK, parser.parseIpPacket(q, padded, 0, 80));
        assertEquals(52 - 28, q.length());
        assertEquals(3, parser.count(RoceStatus.OK));
        // a UDP checksum is optional (0) but must be right when present
        MemorySegment v9 = TestPackets.hex(IcrcTest.V9);
        new UdpHeader().wrap(v9, 40).checksum(0xB530);
        assertEquals(RoceStatus.OK, parser.parseIpPacket(q, v9, 0, (int) v9.byteSize()));
        new UdpHeader().wrap(v9, 40).checksum(0xB531);
        assertEquals(RoceStatus.BAD_IP, parser.parseIpPacket(q, v9, 0, (int) v9.byteSize()));
    }

    @Test
    void apiMisuseThrowsClearly() {
        assertThrows(IllegalArgumentException.class, () -> p.build(buf, 0, 0x15, 0));
        assertThrows(IllegalArgumentException.class, () -> p.build(buf, 0, 0x1FF, 0));
        assertThrows(IllegalArgumentException.class, () -> p.build(buf, 0, RC | ACKNOWLEDGE, 4));
        assertThrows(IllegalArgumentException.class, () -> p.build(buf, 0, RC | SEND_FIRST, 5));
        assertThrows(IllegalArgumentException.class, () -> p.build(buf, 0, RC | SEND_ONLY, -1));
        assertThrows(IndexOutOfBoundsException.class, () -> p.build(buf, 500, RC | SEND_ONLY, 64));
        assertThrows(IndexOutOfBoundsException.class, () -> p.wrap(buf, 500, 64));
        assertThrows(IndexOutOfBoundsException.class, () -> p.wrap(buf, -1, 4));
        p.build(buf, 0, RC | SEND_ONLY, 4);
        assertThrows(IllegalStateException.class, p::reth);
        assertEquals(-1, p.headerOffset(M_RETH));
        assertEquals(RoceStatus.TOO_SHORT, p.wrap(buf, 0, 4));
        assertThrows(IllegalStateException.class, p::bth);
        assertTrue(p.toString().contains("invalid"));
    }

    @Test
    void offsetsArePositionedForEngines() {
        int len = p.build(buf, 8, RC | WRITE_ONLY_IMM, 10);
        assertEquals(8 + 12 + 16 + 4 + 10 + 2 + 4, 8 + len);
        assertEquals(8 + 12, p.reth().offset());
        assertEquals(8 + 28, p.immDt().offset());
        assertEquals(8 + 28, p.headerOffset(M_IMMDT));
        assertEquals(8 + 32, p.payloadOffset());
        assertEquals(8 + 32 + 12, p.icrcOffset());
        assertEquals(2, p.bth().padCount());
        assertEquals(Bth.DEFAULT_PKEY, p.bth().pkey());
        assertEquals(10, p.payload().byteSize());
    }
}
