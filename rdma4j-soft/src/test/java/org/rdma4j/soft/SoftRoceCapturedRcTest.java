// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.OutputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractRcTest;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.wire.net.RawIpv4Socket;

/**
 * The RC conformance suite over RoCEv2 on loopback, with every packet captured off the host's IP stack
 * (a raw socket sees each IPv4 UDP datagram as sent, real IPv4 ID included) and handed to tshark at
 * the end: Wireshark's InfiniBand dissector must find nothing malformed and no error-level expert
 * info in any of them — SEND/WRITE/READ segments, atomics, ACKs, NAKs and RNR NAKs alike. Needs root
 * (CAP_NET_RAW) and tshark ({@code .ci/run} installs it); skipped with a message otherwise.
 */
class SoftRoceCapturedRcTest extends AbstractRcTest {
    private static final int PORT = SoftRoceTestFabric.freeUdpPort();
    private static RawIpv4Socket capture;
    private static Thread reader;
    private static volatile boolean stop;
    private static final List<byte[]> packets = new ArrayList<>();

    @BeforeAll
    static void startCapture() {
        Assumptions.assumeTrue(tshark() != null, "tshark not installed: apt-get install -y tshark");
        try {
            capture = RawIpv4Socket.openCapture();
        } catch (IOException e) {
            Assumptions.abort("no raw socket (needs CAP_NET_RAW): " + e.getMessage());
        }
        reader = Thread.ofPlatform().name("capture").start(() -> {
            try (Arena a = Arena.ofConfined()) {
                MemorySegment buf = a.allocate(65536);
                while (!stop) {
                    int n = capture.receive(buf, 50);
                    if (n < 28 || n > buf.byteSize()) {
                        continue;
                    }
                    int ihl = (buf.get(ValueLayout.JAVA_BYTE, 0) & 0x0F) * 4;
                    int sport = Short.toUnsignedInt(buf.get(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN), ihl));
                    int dport = Short.toUnsignedInt(buf.get(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN), ihl + 2));
                    if (sport == PORT || dport == PORT) {
                        byte[] b = buf.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE);
                        synchronized (packets) {
                            packets.add(b);
                        }
                    }
                }
            } catch (IOException e) {
                // closed
            }
        });
    }

    @AfterAll
    static void decodeWithTshark() throws Exception {
        if (capture == null) {
            return;
        }
        stop = true;
        reader.join(5_000);
        capture.close();
        List<byte[]> got;
        synchronized (packets) {
            got = new ArrayList<>(packets);
        }
        assertTrue(got.size() > 100, "captured only " + got.size() + " RoCE packets");
        assertTsharkDecodesClean(got, PORT);
    }

    /**
     * Writes the IPv4 packets to a pcap and has tshark decode them with {@code port} as RoCEv2: every frame
     * must decode as InfiniBand, with nothing malformed and no error-level expert info.
     */
    static void assertTsharkDecodesClean(List<byte[]> got, int port) throws Exception {
        Path file = Files.createTempFile("rdma4j-rc-", ".pcap");
        writePcap(file, got);
        // Decode our port as RoCEv2 (it is 4791 in production; the tests use a free port). The payload
        // dissectors that guess at upper-layer protocols (RPC-over-RDMA, iSER, NVMe-oF, SMB Direct) are
        // turned off: test payloads are arbitrary bytes, which they would flag as their own malformed PDUs.
        Process p = new ProcessBuilder(tshark().toString(), "-n", "-r", file.toString(), "-d", "udp.port==" + port + ",infiniband",
                "--disable-protocol", "rpcordma", "--disable-protocol", "iser", "--disable-protocol", "nvme-rdma",
                "--disable-protocol", "smb_direct", "-V").redirectError(ProcessBuilder.Redirect.DISCARD).start(); // stderr: only the root warning
        byte[] out = p.getInputStream().readAllBytes();
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), "tshark did not finish");
        String text = new String(out, StandardCharsets.UTF_8);
        assertEquals(0, p.exitValue(), text.length() > 4000 ? text.substring(0, 4000) : text);
        long frames = text.lines().filter(l -> l.matches("Frame \\d+: .*")).count();
        assertEquals(got.size(), frames, "frames tshark decoded");
        assertEquals(got.size(), count(text, "Base Transport Header"), "every frame decodes as InfiniBand");
        assertEquals(0, count(text, "Malformed"), "malformed packets in " + file);
        assertEquals(0, count(text, "[Severity level: Error]"), "error-level expert info in " + file);
        Files.delete(file);
    }

    private static int count(String s, String what) {
        int n = 0;
        for (int i = s.indexOf(what); i >= 0; i = s.indexOf(what, i + 1)) {
            n++;
        }
        return n;
    }

    /** pcap with LINKTYPE_IPV4 (228): each record is the IPv4 packet as captured. */
    private static void writePcap(Path file, List<byte[]> pkts) throws IOException {
        try (OutputStream o = Files.newOutputStream(file)) {
            ByteBuffer h = ByteBuffer.allocate(24).order(ByteOrder.LITTLE_ENDIAN);
            h.putInt(0xA1B2C3D4).putShort((short) 2).putShort((short) 4).putInt(0).putInt(0).putInt(65535).putInt(228);
            o.write(h.array());
            int i = 0;
            for (byte[] b : pkts) {
                ByteBuffer r = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN);
                r.putInt(1_700_000_000).putInt(i++).putInt(b.length).putInt(b.length);
                o.write(r.array());
                o.write(b);
            }
        }
    }

    static Path tshark() {
        for (String d : System.getenv().getOrDefault("PATH", "/usr/bin").split(":")) {
            Path p = Path.of(d, "tshark");
            if (Files.isExecutable(p)) {
                return p;
            }
        }
        return null;
    }

    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftRoceTestFabric(clock, PORT);
    }
}
