// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;

/**
 * The parser fuzzing oracle shared by the quick and the slow properties: feed one input, demand that no
 * exception escapes, that exactly one counter moved (the one of the returned status), and that an accepted
 * packet re-encodes from its fields to the same bytes.
 */
final class Fuzz {
    final RoceParser solve = new RoceParser(RoceParser.IcrcCheck.SOLVE_IPV4_ID);
    final RoceParser exact = new RoceParser(RoceParser.IcrcCheck.EXACT);
    final RoceParser none = new RoceParser(RoceParser.IcrcCheck.NONE);
    final RocePacket pkt = new RocePacket();
    final Icrc icrc = new Icrc();
    long accepted;
    /** Corrupted IPv4 packets accepted under another ID (expected about 2^-16 of those reaching the ICRC check). */
    long solvedWrongId;

    /** Random bytes as a UDP payload, through all three ICRC modes. */
    void randomBytes(byte[] bytes, PseudoHeader ip, String what) {
        MemorySegment s = MemorySegment.ofArray(bytes);
        for (RoceParser p : new RoceParser[] {solve, exact, none}) {
            feed(p, s, 0, bytes.length, ip, what);
        }
    }

    /** A valid random packet, mutated 0..3 times, its ICRC sometimes repaired, through the solving parser. */
    void mutated(long seed) {
        Random r = new Random(seed);
        String what = "mutated packet, seed " + seed + "L";
        int op = r.nextInt(8) == 0 ? r.nextInt(256) : TestPackets.OPCODES[r.nextInt(TestPackets.OPCODES.length)];
        if (!RoceOpcode.known(op) && op != RoceOpcode.CNP) {
            op = RoceOpcode.RC | RoceOpcode.SEND_ONLY;
        }
        PseudoHeader ip = TestPackets.randomIp(r);
        if (r.nextInt(3) == 0 && !ip.isIpv6()) {
            ip.ipId(0); // what our own senders use
        }
        byte[] bytes = new byte[128];
        MemorySegment s = MemorySegment.ofArray(bytes);
        int len = TestPackets.randomPacket(new RocePacket(), s, op, r, ip, icrc);
        int mutations = r.nextInt(4);
        for (int i = 0; i < mutations; i++) {
            switch (r.nextInt(7)) {
                case 0 -> bytes[r.nextInt(Math.max(1, len))] ^= (byte) (1 << r.nextInt(8));
                case 1 -> bytes[r.nextInt(Math.max(1, len))] = (byte) r.nextInt();
                case 2 -> len = r.nextInt(len + 1);
                case 3 -> len = Math.min(bytes.length, len + 1 + r.nextInt(8));
                case 4 -> bytes[0] = (byte) r.nextInt();
                case 5 -> bytes[1] = (byte) ((bytes[1] & 0xCF) | (r.nextInt(4) << 4));
                default -> len = Math.max(0, Math.min(bytes.length, len + 4 * (r.nextInt(3) - 1)));
            }
        }
        boolean repaired = len >= Icrc.MIN_LENGTH && r.nextBoolean();
        if (repaired) {
            icrc.store(ip, s, 0, len); // let the packet past the ICRC to the structural checks behind it
        }
        PseudoHeader rx = ip;
        int id = ip.ipId();
        if (!ip.isIpv6()) {
            rx = new PseudoHeader().ipv4(ip.ipv4Source(), ip.ipv4Destination()).ports(ip.sourcePort(), ip.destinationPort());
        }
        RoceStatus st = feed(solve, s, 0, len, rx, what);
        if ((st == RoceStatus.OK || st == RoceStatus.CNP) && !ip.isIpv6() && solve.lastIpv4Id() != id) {
            if (mutations == 0 || repaired) {
                // the ICRC is right for the sender's ID, and the solution is unique (rank 16)
                throw new AssertionError(what + ": accepted with ID " + solve.lastIpv4Id() + " but sent with " + id);
            }
            // a corrupted packet whose ICRC happens to match another ID: the solver's documented 2^-16 blind spot
            solvedWrongId++;
        }
    }

    RoceStatus feed(RoceParser parser, MemorySegment s, long off, int len, PseudoHeader ip, String what) {
        long before = parser.accepted() + parser.dropped();
        RoceStatus st;
        try {
            st = parser.parse(pkt, s, off, len, ip);
        } catch (RuntimeException | Error e) {
            throw new AssertionError(what + ": parser threw on " + TestPackets.hex(s, off, len), e);
        }
        if (st == null || parser.accepted() + parser.dropped() != before + 1) {
            throw new AssertionError(what + ": status " + st + " not counted exactly once");
        }
        if (st == RoceStatus.OK || st == RoceStatus.CNP) {
            accepted++;
            checkReencodes(parser, s, off, len, ip, what);
        }
        return st;
    }

    private void checkReencodes(RoceParser parser, MemorySegment s, long off, int len, PseudoHeader ip, String what) {
        PseudoHeader sender = ip;
        if (!ip.isIpv6() && parser.lastIpv4Id() >= 0) {
            sender = new PseudoHeader().ipv4(ip.ipv4Source(), ip.ipv4Destination()).ports(ip.sourcePort(), ip.destinationPort())
                    .ipId(parser.lastIpv4Id());
        }
        MemorySegment again = TestPackets.reencode(pkt, sender, icrc);
        boolean icrcChecked = parser.icrcCheck() != RoceParser.IcrcCheck.NONE;
        boolean padZero = TestPackets.padIsZero(pkt);
        long cmp = padZero ? (icrcChecked ? len : len - Icrc.LENGTH) : pkt.payloadOffset() + pkt.payloadLength() - off;
        long mismatch = MemorySegment.mismatch(s, off, off + cmp, again, 0, cmp);
        if (mismatch != -1) {
            throw new AssertionError(what + ": accepted " + pkt + " re-encodes differently at byte " + mismatch + "\n  in:  "
                    + TestPackets.hex(s, off, len) + "\n  out: " + TestPackets.hex(again, 0, len));
        }
        // and what we re-encoded is itself a valid packet with the exact ICRC
        RocePacket q = new RocePacket();
        RoceStatus st2 = exact.parse(q, again, 0, len, sender);
        if (st2 != RoceStatus.OK && st2 != RoceStatus.CNP) {
            throw new AssertionError(what + ": re-encoded packet parses as " + st2);
        }
        if (s.get(ValueLayout.JAVA_BYTE, off) != again.get(ValueLayout.JAVA_BYTE, 0)) {
            throw new AssertionError(what + ": opcode changed");
        }
    }

    /** A valid random packet framed in IPv4 or IPv6 + UDP, mutated 0..3 times anywhere, through parseIpPacket. */
    void mutatedIp(long seed) {
        Random r = new Random(seed);
        String what = "mutated IP packet, seed " + seed + "L";
        int op = TestPackets.OPCODES[r.nextInt(TestPackets.OPCODES.length)];
        PseudoHeader ip = TestPackets.randomIp(r);
        byte[] bytes = new byte[200];
        MemorySegment s = MemorySegment.ofArray(bytes);
        int ipLen = ip.ipHeaderLength();
        int len = TestPackets.randomPacket(new RocePacket(), s.asSlice(ipLen + UdpHeader.LENGTH), op, r, ip, icrc);
        int udpLen = UdpHeader.LENGTH + len;
        if (ip.isIpv6()) {
            new Ipv6Header().wrap(s, 0).init(udpLen, r.nextInt(256), r.nextInt(256), Gids.of(ip.ipv6SourceHi(),
                    ip.ipv6SourceLo()), Gids.of(ip.ipv6DestinationHi(), ip.ipv6DestinationLo()));
        } else {
            new Ipv4Header().wrap(s, 0).init(udpLen, ip.ipId(), r.nextInt(256), ip.ipv4Source(), ip.ipv4Destination());
        }
        new UdpHeader().wrap(s, ipLen).sourcePort(ip.sourcePort()).destinationPort(ip.destinationPort()).length(udpLen);
        int total = ipLen + udpLen + r.nextInt(8); // sometimes Ethernet-style trailing bytes
        int mutations = r.nextInt(4);
        for (int i = 0; i < mutations; i++) {
            int at = r.nextInt(Math.max(1, total));
            switch (r.nextInt(4)) {
                case 0 -> bytes[at] ^= (byte) (1 << r.nextInt(8));
                case 1 -> bytes[at] = (byte) r.nextInt();
                case 2 -> total = r.nextInt(total + 1);
                default -> bytes[r.nextInt(ipLen + UdpHeader.LENGTH)] = (byte) r.nextInt(); // IP/UDP header
            }
        }
        if (!ip.isIpv6() && r.nextBoolean() && total >= Ipv4Header.LENGTH) {
            new Ipv4Header().wrap(s, 0).updateChecksum(); // so mutations get past the header checksum
        }
        long before = exact.accepted() + exact.dropped();
        RoceStatus st;
        try {
            st = exact.parseIpPacket(pkt, s, 0, total);
        } catch (RuntimeException | Error e) {
            throw new AssertionError(what + ": parseIpPacket threw on " + TestPackets.hex(s, 0, total), e);
        }
        if (exact.accepted() + exact.dropped() != before + 1) {
            throw new AssertionError(what + ": status " + st + " not counted exactly once");
        }
        if (st == RoceStatus.OK || st == RoceStatus.CNP) {
            accepted++;
            PseudoHeader got = exact.ipFields();
            MemorySegment again = TestPackets.reencode(pkt, got, icrc);
            int n = pkt.length();
            long cmp = TestPackets.padIsZero(pkt) ? n : pkt.payloadOffset() + pkt.payloadLength() - pkt.offset();
            long mismatch = MemorySegment.mismatch(s, pkt.offset(), pkt.offset() + cmp, again, 0, cmp);
            if (mismatch != -1) {
                throw new AssertionError(what + ": accepted " + pkt + " re-encodes differently at byte " + mismatch);
            }
        }
    }
}
