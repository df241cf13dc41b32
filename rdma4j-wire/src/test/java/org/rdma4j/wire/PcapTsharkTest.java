// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Packets of every opcode, IPv4 and IPv6, written with {@link PcapWriter} and decoded by an independent
 * implementation: tshark must report nothing malformed and decode the BTH (and RETH/AETH/DETH/ImmDt/IETH/
 * atomic headers) fields to the values we built. Skipped when tshark is not installed
 * ({@code apt-get install -y tshark}). The file is also re-read by our own parser.
 */
class PcapTsharkTest {
    /** Payload heuristics that would misread test payloads as upper-layer protocols (roce-wire.md 7). */
    private static final String[] DISABLE = {"rpcordma", "iser", "nvme-rdma", "smb_direct", "srp", "ib_sdp"};

    private record Built(int opcode, int destQp, int psn, boolean ackReq, int pad, String extra, int icrcBe) {
    }

    @TempDir
    Path dir;

    private static Path tshark() {
        for (String d : System.getenv().getOrDefault("PATH", "/usr/bin").split(java.io.File.pathSeparator)) {
            Path p = Path.of(d, "tshark");
            if (Files.isExecutable(p)) {
                return p;
            }
        }
        return null;
    }

    @Test
    void tsharkDecodesEveryOpcodeAsBuilt() throws Exception {
        Path tshark = tshark();
        Assumptions.assumeTrue(tshark != null, "tshark not found on PATH: install it (apt-get install -y tshark) to"
                + " check our packets against Wireshark's InfiniBand dissector");
        Path file = dir.resolve("every-opcode.pcap");
        List<Built> built = new ArrayList<>();
        Random r = new Random(1234);
        Icrc icrc = new Icrc();
        RocePacket p = new RocePacket();
        MemorySegment buf = MemorySegment.ofArray(new byte[256]);
        try (PcapWriter w = PcapWriter.create(file)) {
            long t = 1_700_000_000_000_000_000L;
            for (boolean v6 : new boolean[] {false, true}) {
                for (int op : TestPackets.OPCODES) {
                    PseudoHeader ip = v6 ? new PseudoHeader().ipv6(0xFE80_0000_0000_0000L, 1, 0xFE80_0000_0000_0000L, 2)
                            : new PseudoHeader().ipv4(0xC0A8010A, 0xC0A80114);
                    int qpn = 0x11 + r.nextInt(0x1000);
                    ip.ports(Roce.sourcePort(qpn), Roce.UDP_PORT);
                    int payload = TestPackets.payloadLength(op, r, 40);
                    int len = p.build(buf, 0, op, payload);
                    int psn = r.nextInt(0x1000000);
                    boolean a = r.nextBoolean() && op != RoceOpcode.CNP;
                    p.bth().destQp(qpn).psn(psn).ackReq(a);
                    StringBuilder extra = new StringBuilder();
                    if (op == RoceOpcode.CNP) {
                        p.bth().becn(true).pkey(0xFFFF);
                    }
                    if (p.has(RoceOpcode.M_RETH)) {
                        p.reth().va(0x7F00_0000_0000L + r.nextInt(1 << 20)).rkey(r.nextInt() >>> 1).dmaLength(payload);
                        extra.append(extra.isEmpty() ? "" : ",");
                        extra.append(p.reth().va()).append(',').append(p.reth().rkey() & 0xFFFFFFFFL).append(',')
                                .append(payload);
                    }
                    if (p.has(RoceOpcode.M_AETH)) {
                        p.aeth().syndrome(r.nextBoolean() ? Aeth.CREDITS_INVALID : Aeth.NAK | Aeth.NAK_INVALID_REQUEST)
                                .msn(r.nextInt(0x1000000));
                        extra.append(extra.isEmpty() ? "" : ",");
                        extra.append(p.aeth().syndrome()).append(',').append(p.aeth().msn());
                    }
                    if (p.has(RoceOpcode.M_DETH)) {
                        p.deth().qkey(0x11111111).srcQp(qpn + 1);
                        extra.append(extra.isEmpty() ? "" : ",");
                        extra.append(p.deth().qkey()).append(',').append(qpn + 1);
                    }
                    if (p.has(RoceOpcode.M_IMMDT)) {
                        p.immDt().imm(0x0BADCAFE);
                        extra.append(extra.isEmpty() ? "" : ",");
                        extra.append(0x0BADCAFE);
                    }
                    if (p.has(RoceOpcode.M_IETH)) {
                        p.ieth().rkey(0x4242);
                        extra.append(extra.isEmpty() ? "" : ",");
                        extra.append(0x4242);
                    }
                    if (p.has(RoceOpcode.M_ATMETH)) {
                        p.atomicEth().va(0x7F00_0000_1000L).rkey(0x77).swapAdd(5).compare(9);
                        extra.append(extra.isEmpty() ? "" : ",");
                        // tshark files the AtomicETH VA and R_Key under the reth.va / reth.r_key fields
                        extra.append(p.atomicEth().va()).append(',').append(p.atomicEth().rkey()).append(',')
                                .append(p.atomicEth().swapAdd()).append(',').append(p.atomicEth().compare());
                    }
                    if (p.has(RoceOpcode.M_ATMACK)) {
                        p.atomicAckEth().origRemoteData(0x1122334455667788L);
                        extra.append(extra.isEmpty() ? "" : ",");
                        extra.append(0x1122334455667788L);
                    }
                    for (int i = 0; i < payload; i++) {
                        buf.set(ValueLayout.JAVA_BYTE, p.payloadOffset() + i, (byte) (0xA0 + i));
                    }
                    int crc = p.seal(icrc, ip);
                    w.write(t, ip, buf, 0, len);
                    t += 1_000;
                    built.add(new Built(op, qpn, psn, a, p.padCount(), extra.toString(), Integer.reverseBytes(crc)));
                }
            }
        }

        // 1. the verbose decode has no malformed packet and no error-level expert info
        List<String> verboseCmd = new ArrayList<>(List.of(tshark.toString(), "-n", "-r", file.toString(), "-V"));
        for (String d : DISABLE) {
            verboseCmd.add("--disable-protocol");
            verboseCmd.add(d);
        }
        String verbose = run(verboseCmd);
        assertFalse(verbose.contains("Malformed"), "tshark found a malformed packet:\n" + excerpt(verbose, "Malformed"));
        assertFalse(verbose.contains("Expert Info (Error"), excerpt(verbose, "Expert Info (Error"));
        assertTrue(verbose.contains("InfiniBand"), "tshark did not dissect RRoCE at all");

        // 2. the fields decode to what we built
        List<String> cmd = new ArrayList<>(List.of(tshark.toString(), "-n", "-r", file.toString(), "-T", "fields",
                "-E", "separator=;", "-E", "occurrence=f",
                "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn",
                "-e", "infiniband.bth.a", "-e", "infiniband.bth.padcnt", "-e", "infiniband.bth.tver", "-e", "infiniband.bth.p_key",
                "-e", "infiniband.reth.va", "-e", "infiniband.reth.r_key", "-e", "infiniband.reth.dmalen",
                "-e", "infiniband.aeth.syndrome", "-e", "infiniband.aeth.msn",
                "-e", "infiniband.deth.q_key", "-e", "infiniband.deth.srcqp",
                "-e", "infiniband.immdt", "-e", "infiniband.ieth",
                "-e", "infiniband.atomiceth.swapdt", "-e", "infiniband.atomiceth.cmpdt",
                "-e", "infiniband.atomicacketh.origremdt", "-e", "infiniband.invariant.crc"));
        for (String d : DISABLE) {
            cmd.add("--disable-protocol");
            cmd.add(d);
        }
        String[] lines = run(cmd).strip().split("\n");
        assertEquals(built.size(), lines.length, "one line per frame");
        for (int i = 0; i < lines.length; i++) {
            Built b = built.get(i);
            String[] f = lines[i].split(";", -1);
            String what = "frame " + (i + 1) + " " + RoceOpcode.name(b.opcode()) + ": " + lines[i];
            assertEquals(b.opcode(), num(f[0]), what);
            assertEquals(b.destQp(), num(f[1]), what);
            assertEquals(b.psn(), num(f[2]), what);
            assertEquals(b.ackReq(), num(f[3]) == 1, what);
            assertEquals(b.pad(), num(f[4]), what);
            assertEquals(0, num(f[5]), what);
            assertEquals(0xFFFF, num(f[6]), what);
            if (b.opcode() == (RoceOpcode.RC | RoceOpcode.FLUSH) || b.opcode() == (RoceOpcode.RC | RoceOpcode.ATOMIC_WRITE)
                    || b.opcode() == RoceOpcode.CNP) {
                continue; // IBA 1.5 opcodes and CNP ("Unknown (129)"): tshark 4.0 decodes their BTH, not what follows
            }
            StringBuilder got = new StringBuilder();
            for (int k = 7; k < 19; k++) {
                if (!f[k].isEmpty()) {
                    if (!got.isEmpty()) {
                        got.append(',');
                    }
                    // ImmDt and IETH are byte fields: tshark prints them as bare hex
                    got.append(k == 14 || k == 15 ? Long.parseUnsignedLong(f[k].replace(":", ""), 16) : num(f[k]));
                }
            }
            assertEquals(b.extra(), got.toString(), what);
            assertEquals(b.icrcBe() & 0xFFFFFFFFL, num(f[19]), what + " (tshark shows the trailer read big-endian)");
        }

        // 3. our own parser accepts every frame of the file, ICRC included
        byte[] all = Files.readAllBytes(file);
        MemorySegment s = MemorySegment.ofArray(all);
        RoceParser parser = new RoceParser();
        long pos = 24;
        int frames = 0;
        while (pos < all.length && frames < 1000) {
            int incl = s.get(ValueLayout.JAVA_INT_UNALIGNED.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN), pos + 8);
            RoceStatus st = parser.parseIpPacket(new RocePacket(), s, pos + 16 + 14, incl - 14);
            assertEquals(frames % TestPackets.OPCODES.length == TestPackets.OPCODES.length - 1 ? RoceStatus.CNP
                    : RoceStatus.OK, st, "frame " + (frames + 1));
            pos += 16 + incl;
            frames++;
        }
        assertEquals(built.size(), frames);
    }

    private static long num(String s) {
        String t = s.strip();
        if (t.startsWith("0x") || t.startsWith("0X")) {
            return Long.parseUnsignedLong(t.substring(2), 16);
        }
        return Long.parseLong(t);
    }

    private static String excerpt(String text, String needle) {
        int i = text.indexOf(needle);
        return i < 0 ? "" : text.substring(Math.max(0, i - 1500), Math.min(text.length(), i + 300));
    }

    private String run(List<String> cmd) throws IOException, InterruptedException {
        Path outFile = dir.resolve("tshark-" + System.nanoTime() + ".txt");
        Path errFile = dir.resolve("tshark-" + System.nanoTime() + ".err");
        // stderr apart: tshark warns there (e.g. when run as root), which is not part of the decode
        Process pr = new ProcessBuilder(cmd).redirectOutput(outFile.toFile()).redirectError(errFile.toFile()).start();
        if (!pr.waitFor(120, TimeUnit.SECONDS)) {
            pr.destroyForcibly();
            throw new AssertionError("tshark did not finish in 120 s: " + cmd);
        }
        String out = Files.readString(outFile, StandardCharsets.UTF_8);
        assertEquals(0, pr.exitValue(), "tshark failed: " + out + Files.readString(errFile, StandardCharsets.UTF_8));
        return out;
    }
}
