// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HexFormat;
import java.util.Random;

/** Helpers shared by the wire tests: hex, random valid packets, and re-encoding a parsed packet field by field. */
final class TestPackets {
    /** Every opcode of the table, plus CNP. */
    static final int[] OPCODES;

    static {
        int n = 0;
        int[] all = new int[256];
        for (int op = 0; op < 256; op++) {
            if (RoceOpcode.known(op)) {
                all[n++] = op;
            }
        }
        all[n++] = RoceOpcode.CNP;
        OPCODES = java.util.Arrays.copyOf(all, n);
    }

    private TestPackets() {
    }

    static MemorySegment hex(String hex) {
        return MemorySegment.ofArray(HexFormat.of().parseHex(hex.replaceAll("\\s+", "")));
    }

    static String hex(MemorySegment s, long off, int len) {
        return HexFormat.of().formatHex(s.asSlice(off, len).toArray(ValueLayout.JAVA_BYTE));
    }

    /** A legal payload length for the opcode, at most about max bytes. */
    static int payloadLength(int opcode, Random r, int max) {
        int m = RoceOpcode.mask(opcode);
        if ((m & RoceOpcode.M_PAYLOAD) == 0) {
            return 0;
        }
        if ((m & RoceOpcode.M_ATOMIC_WRITE) != 0) {
            return 8;
        }
        boolean first = (m & RoceOpcode.M_START) != 0;
        boolean last = (m & RoceOpcode.M_END) != 0;
        if (!last) {
            return 4 * (1 + r.nextInt(Math.max(1, max / 4)));
        }
        return (first ? 0 : 1) + r.nextInt(max);
    }

    /** Random IP fields: IPv4 (with a random ID) or IPv6, random ports. */
    static PseudoHeader randomIp(Random r) {
        PseudoHeader ip = new PseudoHeader();
        if (r.nextBoolean()) {
            ip.ipv4(r.nextInt(), r.nextInt()).ipId(r.nextInt(0x10000));
        } else {
            ip.ipv6(r.nextLong(), r.nextLong(), r.nextLong(), r.nextLong());
        }
        return ip.ports(0xC000 + r.nextInt(0x4000), Roce.UDP_PORT);
    }

    /** Builds a random valid packet with every field random (reserved bits too); returns its length. */
    static int randomPacket(RocePacket p, MemorySegment seg, int opcode, Random r, PseudoHeader ip, Icrc icrc) {
        int payload = payloadLength(opcode, r, 64);
        int len = p.build(seg, 0, opcode, payload);
        Bth b = p.bth();
        b.solicited(r.nextBoolean()).migReq(r.nextBoolean()).pkey(r.nextInt(0x10000)).fecn(r.nextBoolean())
                .becn(r.nextBoolean()).resv6(r.nextInt(64)).destQp(r.nextInt()).ackReq(r.nextBoolean())
                .resv7(r.nextInt(128)).psn(r.nextInt());
        if (opcode == RoceOpcode.CNP) {
            for (int i = 0; i < RoceOpcode.CNP_BODY_LENGTH; i++) {
                seg.set(ValueLayout.JAVA_BYTE, Bth.LENGTH + i, (byte) r.nextInt());
            }
        }
        if (p.has(RoceOpcode.M_RETH)) {
            p.reth().va(r.nextLong()).rkey(r.nextInt()).dmaLength(r.nextInt());
        }
        if (p.has(RoceOpcode.M_ATMETH)) {
            p.atomicEth().va(r.nextLong()).rkey(r.nextInt()).swapAdd(r.nextLong()).compare(r.nextLong());
        }
        if (p.has(RoceOpcode.M_AETH)) {
            p.aeth().syndrome(r.nextInt(256)).msn(r.nextInt());
        }
        if (p.has(RoceOpcode.M_ATMACK)) {
            p.atomicAckEth().origRemoteData(r.nextLong());
        }
        if (p.has(RoceOpcode.M_IMMDT)) {
            p.immDt().imm(r.nextInt());
        }
        if (p.has(RoceOpcode.M_IETH)) {
            p.ieth().rkey(r.nextInt());
        }
        if (p.has(RoceOpcode.M_DETH)) {
            p.deth().qkey(r.nextInt()).reserved(r.nextInt(256)).srcQp(r.nextInt());
        }
        if (p.has(RoceOpcode.M_FETH)) {
            p.feth().word(r.nextInt());
        }
        for (int i = 0; i < payload; i++) {
            seg.set(ValueLayout.JAVA_BYTE, p.payloadOffset() + i, (byte) r.nextInt());
        }
        p.seal(icrc, ip);
        return len;
    }

    /**
     * Builds, in a fresh buffer, the packet {@code p} describes from its fields alone (every header field
     * through its getter and setter, the payload copied, pad zero), sealed with {@code ip}.
     */
    static MemorySegment reencode(RocePacket p, PseudoHeader ip, Icrc icrc) {
        MemorySegment out = MemorySegment.ofArray(new byte[p.length()]);
        RocePacket q = new RocePacket();
        int len = q.build(out, 0, p.opcode(), p.payloadLength());
        if (len != p.length() || q.padCount() != p.padCount()) {
            throw new AssertionError("re-encoded length " + len + "/pad " + q.padCount() + " != " + p.length() + "/"
                    + p.padCount());
        }
        Bth a = p.bth();
        q.bth().solicited(a.solicited()).migReq(a.migReq()).tver(a.tver()).pkey(a.pkey()).fecn(a.fecn())
                .becn(a.becn()).resv6(a.resv6()).destQp(a.destQp()).ackReq(a.ackReq()).resv7(a.resv7()).psn(a.psn());
        if (p.opcode() == RoceOpcode.CNP) {
            MemorySegment.copy(p.segment(), p.offset() + Bth.LENGTH, out, Bth.LENGTH, RoceOpcode.CNP_BODY_LENGTH);
        }
        if (p.has(RoceOpcode.M_RETH)) {
            q.reth().va(p.reth().va()).rkey(p.reth().rkey()).dmaLength(p.reth().dmaLength());
        }
        if (p.has(RoceOpcode.M_ATMETH)) {
            AtomicEth e = p.atomicEth();
            q.atomicEth().va(e.va()).rkey(e.rkey()).swapAdd(e.swapAdd()).compare(e.compare());
        }
        if (p.has(RoceOpcode.M_AETH)) {
            q.aeth().syndrome(p.aeth().syndrome()).msn(p.aeth().msn());
        }
        if (p.has(RoceOpcode.M_ATMACK)) {
            q.atomicAckEth().origRemoteData(p.atomicAckEth().origRemoteData());
        }
        if (p.has(RoceOpcode.M_IMMDT)) {
            q.immDt().imm(p.immDt().imm());
        }
        if (p.has(RoceOpcode.M_IETH)) {
            q.ieth().rkey(p.ieth().rkey());
        }
        if (p.has(RoceOpcode.M_DETH)) {
            q.deth().qkey(p.deth().qkey()).reserved(p.deth().reserved()).srcQp(p.deth().srcQp());
        }
        if (p.has(RoceOpcode.M_FETH)) {
            q.feth().word(p.feth().word());
        }
        MemorySegment.copy(p.segment(), p.payloadOffset(), out, q.payloadOffset(), p.payloadLength());
        q.seal(icrc, ip);
        return out;
    }

    /** @return whether the pad bytes of p are all zero */
    static boolean padIsZero(RocePacket p) {
        for (int i = 0; i < p.padCount(); i++) {
            if (p.segment().get(ValueLayout.JAVA_BYTE, p.payloadOffset() + p.payloadLength() + i) != 0) {
                return false;
            }
        }
        return true;
    }
}
