// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

/** The ICRC against the published vectors of roce-wire.md 3.2, its masking, and the IPv4 ID solver. */
class IcrcTest {
    /** V1: a ConnectX-4 Lx CNP capture (scapy roce.uts), the IP packet without its Ethernet header. */
    static final String V1 = "45c2003c718c4000401191610a0011010a001201" + "000012b700280000"
            + "8100ffff4000011800000000" + "00000000000000000000000000000000" + "82fd002a";
    /** V2: scapy roce.uts UC SEND_ONLY, padcount 2, M=1. */
    static final String V2 = "45010040047840004011b4d5c0a80007c0a80007c00012b7002caca22460ffff000000d300cf17104630818be2"
            + "8935d90e9a95505401be885e50000078f353f3";
    static final String V3 = "45000034000040004011b74ac0a8010ac0a80114df9412b7002000000430ffff000000128012345668656c6c6f000000"
            + "9984416e";
    static final String V4 = "4500004c000040004011b732c0a8010ac0a80114df9412b7003800000a00ffff000000128000001000007f000000100000"
            + "00123400000010000102030405060708090a0b0c0d0e0f827faf6e";
    static final String V5 = "4500003c000040004011b742c0a8010ac0a80114df9412b7002800000c00ffff000000128000002000007f000000200000"
            + "0012340000100090c8343f";
    static final String V6 = "45000030000040004011b74ec0a8010ac0a80114f80612b7001c00001100ffff00000011001234561f00000123445cc6";
    static final String V7 = "45000030000040004011b74ec0a8010ac0a80114f80612b7001c00001100ffff00000011001234576000000159dd60c8";
    static final String V8 = "4500003c000040004011b742c0a8010ac0a80114d87212b7002800006400ffff000000010000000080010000000000"
            + "0101070203000000004ba47ab7";
    static final String V9 = "6000000000201140fe800000000000000000000000000001fe800000000000000000000000000002c12312b70020000004"
            + "30ffff000000118000010068656c6c6f000000d83bd84e";
    static final String[] VECTORS = {V1, V2, V3, V4, V5, V6, V7, V8, V9};

    @Test
    void rxeSeedIsTheRegisterAfterEightOnes() {
        // rxe_icrc_hdr starts crc32_le from 0xdebb20e3 instead of feeding the 8 masked LRH bytes
        byte[] ff = {-1, -1, -1, -1, -1, -1, -1, -1};
        assertEquals(0xDEBB20E3, Icrc.rawUpdate(0xFFFF_FFFF, ff, 0, 8));
    }

    @ParameterizedTest
    @ValueSource(ints = {0, 1, 2, 3, 4, 5, 6, 7, 8})
    void publishedVectorsVerify(int i) {
        MemorySegment pkt = TestPackets.hex(VECTORS[i]);
        RoceParser parser = new RoceParser();
        RocePacket p = new RocePacket();
        RoceStatus s = parser.parseIpPacket(p, pkt, 0, (int) pkt.byteSize());
        assertEquals(i == 0 ? RoceStatus.CNP : RoceStatus.OK, s, "V" + (i + 1));
        // computing gives the stored trailer, and storing it writes the same four bytes
        PseudoHeader ip = parser.ipFields();
        Icrc icrc = new Icrc();
        int stored = p.storedIcrc();
        assertEquals(stored, icrc.compute(ip, pkt, p.offset(), p.length()));
        byte[] before = pkt.toArray(ValueLayout.JAVA_BYTE);
        icrc.store(ip, pkt, p.offset(), p.length());
        assertTrue(java.util.Arrays.equals(before, pkt.toArray(ValueLayout.JAVA_BYTE)));
    }

    @Test
    void v1TrailerIsTheCrcLeastSignificantByteFirst() {
        MemorySegment pkt = TestPackets.hex(V1);
        RoceParser parser = new RoceParser();
        RocePacket p = new RocePacket();
        assertEquals(RoceStatus.CNP, parser.parseIpPacket(p, pkt, 0, (int) pkt.byteSize()));
        assertEquals(0x2A00FD82, p.storedIcrc());
        assertTrue(p.bth().becn());
        assertEquals(0x118, p.bth().destQp());
    }

    @Test
    void maskedFieldsDoNotChangeTheIcrcAndOthersDo() {
        MemorySegment pkt = TestPackets.hex(V3);
        int[] masked = {1, 8, 10, 11, 20 + 6, 20 + 7, 28 + 4}; // TOS, TTL, IP csum, UDP csum, BTH byte 4
        // (lengths are derived from the UDP payload length, protocol and version are fixed: not inputs here)
        int[] covered = {4, 5, 6, 12, 19, 20, 21, 22, 23, 28, 28 + 1, 28 + 2, 28 + 5, 28 + 8, 28 + 11, 40, 44};
        int base = icrcOf(pkt);
        for (int o : masked) {
            MemorySegment m = copy(pkt);
            m.set(ValueLayout.JAVA_BYTE, o, (byte) (m.get(ValueLayout.JAVA_BYTE, o) ^ 0x5A));
            assertEquals(base, icrcOf(m), "byte " + o + " is masked");
        }
        for (int o : covered) {
            MemorySegment m = copy(pkt);
            m.set(ValueLayout.JAVA_BYTE, o, (byte) (m.get(ValueLayout.JAVA_BYTE, o) ^ 0x01));
            assertNotEquals(base, icrcOf(m), "byte " + o + " is covered");
        }
    }

    @Test
    void ipv6MasksTrafficClassFlowLabelAndHopLimit() {
        MemorySegment pkt = TestPackets.hex(V9);
        int base = icrcOf(pkt);
        for (int o : new int[] {1, 2, 3, 7, 46, 47}) {
            MemorySegment m = copy(pkt);
            m.set(ValueLayout.JAVA_BYTE, o, (byte) (m.get(ValueLayout.JAVA_BYTE, o) ^ 0x0F));
            assertEquals(base, icrcOf(m), "byte " + o + " is masked");
        }
        MemorySegment m = copy(pkt);
        m.set(ValueLayout.JAVA_BYTE, 23, (byte) 7); // source address
        assertNotEquals(base, icrcOf(m));
    }

    /** The ICRC computed from the IP packet's own header fields (ignores the stored trailer). */
    private static int icrcOf(MemorySegment ipPacket) {
        boolean v6 = (ipPacket.get(ValueLayout.JAVA_BYTE, 0) & 0xF0) == 0x60;
        int ipLen = v6 ? 40 : 20;
        UdpHeader udp = new UdpHeader().wrap(ipPacket, ipLen);
        PseudoHeader ip = v6 ? new PseudoHeader().from(new Ipv6Header().wrap(ipPacket, 0), udp)
                : new PseudoHeader().from(new Ipv4Header().wrap(ipPacket, 0), udp);
        return new Icrc().compute(ip, ipPacket, ipLen + 8, udp.length() - 8);
    }

    private static MemorySegment copy(MemorySegment s) {
        return MemorySegment.ofArray(s.toArray(ValueLayout.JAVA_BYTE));
    }

    @Test
    void nativeHeapAndReadOnlySegmentsGiveTheSameIcrc() {
        MemorySegment heap = TestPackets.hex(V4);
        int expected = icrcOf(heap);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment nat = arena.allocate(heap.byteSize() + 3).asSlice(3);
            MemorySegment.copy(heap, 0, nat, 0, heap.byteSize());
            assertEquals(expected, icrcOf(nat));
            assertEquals(expected, icrcOf(nat.asReadOnly()));
        }
        assertEquals(expected, icrcOf(heap.asReadOnly()));
        // an offset inside a larger array: the cached ByteBuffer view must honour the slice's base
        byte[] big = new byte[(int) heap.byteSize() + 100];
        MemorySegment.copy(heap, 0, MemorySegment.ofArray(big), 37, heap.byteSize());
        assertEquals(expected, icrcOf(MemorySegment.ofArray(big).asSlice(37)));
    }

    @Test
    void idBasisHasFullRankForEveryLength() {
        for (int len = Icrc.MIN_LENGTH; len <= 9200; len++) {
            int[] b = Icrc.ipv4IdBasis(len);
            assertEquals(16, rank(b), "len " + len);
        }
        assertEquals(16, rank(Icrc.ipv4IdBasis(Icrc.MAX_IPV4_UDP_PAYLOAD)));
    }

    private static int rank(int[] vectors) {
        int[] v = vectors.clone();
        int rank = 0;
        for (int bit = 31; bit >= 0; bit--) {
            int pivot = -1;
            for (int i = rank; i < v.length; i++) {
                if ((v[i] >>> bit & 1) != 0) {
                    pivot = i;
                    break;
                }
            }
            if (pivot < 0) {
                continue;
            }
            int t = v[pivot];
            v[pivot] = v[rank];
            v[rank] = t;
            for (int i = 0; i < v.length; i++) {
                if (i != rank && (v[i] >>> bit & 1) != 0) {
                    v[i] ^= t;
                }
            }
            rank++;
        }
        return rank;
    }

    @Test
    void basisMatchesTheCrcDifferenceOfSingleIdBits() {
        // crc(ID = 1 << i) ^ crc(ID = 0) must be basis[i]: the linearity the solver relies on
        MemorySegment pkt = TestPackets.hex(V4);
        int len = 0x38 - 8;
        PseudoHeader ip = new PseudoHeader().from(new Ipv4Header().wrap(pkt, 0), new UdpHeader().wrap(pkt, 20));
        Icrc icrc = new Icrc();
        int c0 = icrc.compute(ip.ipId(0), pkt, 28, len);
        int[] basis = Icrc.ipv4IdBasis(len);
        for (int i = 0; i < 16; i++) {
            assertEquals(basis[i], c0 ^ icrc.compute(ip.ipId(1 << i), pkt, 28, len), "bit " + i);
        }
    }

    @Test
    void v2SolvesToItsOwnIdWithoutSeeingIt() {
        MemorySegment pkt = TestPackets.hex(V2);
        PseudoHeader ip = new PseudoHeader().from(new Ipv4Header().wrap(pkt, 0), new UdpHeader().wrap(pkt, 20));
        assertEquals(0x0478, ip.ipId());
        ip.ipId(0);
        assertEquals(0x0478, new Icrc().solveIpv4Id(ip, pkt, 28, 0x2c - 8));
        RoceParser parser = new RoceParser();
        assertEquals(RoceStatus.OK, parser.parse(new RocePacket(), pkt, 28, 0x2c - 8, ip));
        assertEquals(0x0478, parser.lastIpv4Id());
        assertEquals(RoceStatus.BAD_ICRC, new RoceParser(RoceParser.IcrcCheck.EXACT)
                .parse(new RocePacket(), pkt, 28, 0x2c - 8, ip));
    }

    @Property(tries = 300)
    void solverFindsAnyRandomId(@ForAll @IntRange(min = 0, max = 0xFFFF) int id, @ForAll long seed) {
        Random r = new Random(seed);
        int op = TestPackets.OPCODES[r.nextInt(TestPackets.OPCODES.length)];
        PseudoHeader ip = TestPackets.randomIp(r);
        ip.ipv4(r.nextInt(), r.nextInt()).ipId(id);
        MemorySegment seg = MemorySegment.ofArray(new byte[256]);
        RocePacket p = new RocePacket();
        Icrc icrc = new Icrc();
        int len = TestPackets.randomPacket(p, seg, op, r, ip, icrc);
        ip.ipId(r.nextInt(0x10000)); // the receiver's guess is irrelevant
        assertEquals(id, icrc.solveIpv4Id(ip, seg, 0, len));
        // a corrupted byte outside the masked BTH byte never solves to the sender's ID
        int at = r.nextInt(len);
        if (at != 4) {
            seg.set(ValueLayout.JAVA_BYTE, at, (byte) (seg.get(ValueLayout.JAVA_BYTE, at) ^ (1 + r.nextInt(255))));
            int solved = icrc.solveIpv4Id(ip, seg, 0, len);
            assertNotEquals(id, solved);
            assertTrue(solved == Icrc.NO_ID || solved >= 0);
        }
    }

    @Test
    void corruptionIsCaughtAlmostAlwaysBySolving() {
        // 2^-16 per corrupted packet slips through; over 2000 packets (fixed seed) none should
        Random r = new Random(42);
        Icrc icrc = new Icrc();
        int caught = 0;
        int n = 2000;
        for (int i = 0; i < n; i++) {
            PseudoHeader ip = new PseudoHeader().ipv4(r.nextInt(), r.nextInt()).ipId(r.nextInt(0x10000));
            MemorySegment seg = MemorySegment.ofArray(new byte[256]);
            RocePacket p = new RocePacket();
            int len = TestPackets.randomPacket(p, seg, RoceOpcode.RC | RoceOpcode.SEND_ONLY, r, ip, icrc);
            int at = 12 + r.nextInt(len - 12);
            seg.set(ValueLayout.JAVA_BYTE, at, (byte) (seg.get(ValueLayout.JAVA_BYTE, at) ^ (1 + r.nextInt(255))));
            if (icrc.solveIpv4Id(ip, seg, 0, len) == Icrc.NO_ID) {
                caught++;
            }
        }
        assertEquals(n, caught);
    }

    @Test
    void solvingRejectsIpv6() {
        assertFalse(new PseudoHeader().ipv6(1, 2, 3, 4).ipv4(1, 2).isIpv6());
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> new Icrc()
                .solveIpv4Id(new PseudoHeader().ipv6(1, 2, 3, 4), TestPackets.hex(V3), 28, 24));
    }
}
