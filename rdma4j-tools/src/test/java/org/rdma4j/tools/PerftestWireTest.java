// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

/** perftest's out-of-band bytes, against shared/reference/roce-wire.md §5.2. */
class PerftestWireTest {
    private static final byte[] GID_192_168_1_10 = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, (byte) 0xff, (byte) 0xff,
        (byte) 192, (byte) 168, 1, 10};
    private static final PerftestFormat.Dest DEST = new PerftestFormat.Dest(0, 0x11, 0x7d2e1a, 0x0000160e,
            0x7ffff7dda000L, GID_192_168_1_10, 0);

    private static String ascii(byte[] b) {
        return new String(b, StandardCharsets.US_ASCII);
    }

    @Test
    void keysWithGidAre108BytesAsTheExample() {
        byte[] m = PerftestWire.encodeKeys(DEST, true);
        assertEquals(108, m.length);
        assertEquals(0, m[107]);
        assertEquals("0000:0000:000011:7d2e1a:0000160e:00007ffff7dda000:"
                + "00:00:00:00:00:00:00:00:00:00:ff:ff:c0:a8:01:0a:00000000:\0", ascii(m));
        PerftestFormat.Dest d = PerftestWire.decodeKeys(m, true);
        assertEquals(0x11, d.qpn());
        assertEquals(0x7d2e1a, d.psn());
        assertEquals(0x160e, d.rkey());
        assertEquals(0x7ffff7dda000L, d.vaddr());
        assertArrayEquals(GID_192_168_1_10, d.gid());
    }

    @Test
    void keysWithoutGidAre59Bytes() {
        var d = new PerftestFormat.Dest(0x1a, 0x12, 0xabcdef, 0xdeadbeef, 0xffff_8000_0000_0000L, new byte[16], 16);
        byte[] m = PerftestWire.encodeKeys(d, false);
        assertEquals(59, m.length);
        assertEquals("001a:0010:000012:abcdef:deadbeef:ffff800000000000:00000000\0", ascii(m));
        var back = PerftestWire.decodeKeys(m, false);
        assertEquals(0xdeadbeef, back.rkey());
        assertEquals(0xffff_8000_0000_0000L, back.vaddr());
        assertEquals(16, back.outReads());
        assertEquals(0x1a, back.lid());
    }

    @Test
    void aGidLessMessageWhereAGidIsExpectedIsAClearError() {
        byte[] m = PerftestWire.encodeKeys(DEST, false);
        var e = assertThrows(PerftestWire.WireException.class, () -> PerftestWire.decodeKeys(m, true));
        assertTrue(e.getMessage().contains("Couldn't parse line") && e.getMessage().contains("-x"), e.getMessage());
        byte[] junk = "zz:0000:000011:7d2e1a:0000160e:00007ffff7dda000:00000000\0".getBytes(StandardCharsets.US_ASCII);
        assertThrows(PerftestWire.WireException.class, () -> PerftestWire.decodeKeys(junk, false));
    }

    @Test
    void versionMtuSysDataAndReportEncodings() {
        byte[] v = PerftestWire.encodeVersion("6.27");
        assertEquals(16, v.length);
        assertEquals("6.27" + "\0".repeat(12), ascii(v));
        assertEquals("6.29", PerftestWire.decodeVersion(PerftestWire.encodeVersion("6.29")));
        assertEquals(6.29, PerftestWire.versionNumber("6.29"), 1e-12);
        assertEquals(5.7, PerftestWire.versionNumber("5.70"), 1e-12);
        assertEquals(0, PerftestWire.versionNumber(""));
        assertEquals(6.2, PerftestWire.versionNumber("6.2.1"), 1e-12);
        assertArrayEquals(new byte[] {'3', 0}, PerftestWire.encodeMtu(3));
        assertEquals(5, PerftestWire.decodeMtu(new byte[] {'5', 0}));
        assertEquals(0, PerftestWire.decodeMtu(new byte[] {'9', 0}));
        assertEquals("00001000", HexFormat.of().formatHex(PerftestWire.u32(4096)));
        assertEquals("0000000000010000", HexFormat.of().formatHex(PerftestWire.u64(65536)));
        // bswap_double: the IEEE bits of 1.5 (0x3ff8000000000000) in network order
        assertEquals("3ff8000000000000", HexFormat.of().formatHex(PerftestWire.f64(1.5)));
    }

    /**
     * A scripted peer that behaves as perftest 6.29's server (reads first, then writes) and records what
     * the client sent, step by step.
     */
    @Test
    void clientChannelSpeaksPerftestsSequence() throws Exception {
        try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            CompletableFuture<byte[][]> peer = CompletableFuture.supplyAsync(() -> {
                try (Socket s = ss.accept()) {
                    s.setSoTimeout(20_000);
                    DataInputStream in = new DataInputStream(s.getInputStream());
                    OutputStream out = s.getOutputStream();
                    byte[][] got = new byte[9][];
                    got[0] = read(in, 16);
                    out.write(PerftestWire.encodeVersion("6.29"));
                    got[1] = read(in, 4);
                    out.write(PerftestWire.u32(8192));
                    got[2] = read(in, 4);
                    out.write(PerftestWire.u32(64));
                    got[3] = read(in, 2);
                    out.write(new byte[] {'3', 0});
                    got[4] = read(in, 108);
                    out.write(PerftestWire.encodeKeys(DEST, true));
                    got[5] = read(in, 8);
                    out.write(PerftestWire.u64(65536));
                    got[6] = read(in, 8);
                    out.write(PerftestWire.u64(5000));
                    // each field of xchg_bw_reports is its own exchange: read 8, answer 8
                    byte[] d = new byte[24];
                    for (int k = 0; k < 3; k++) {
                        System.arraycopy(read(in, 8), 0, d, 8 * k, 8);
                        out.write(PerftestWire.f64(k + 1.0));
                    }
                    got[7] = d;
                    got[8] = new byte[0];
                    return got;
                } catch (IOException e) {
                    throw new RuntimeException(e);
                }
            });
            try (var ch = PerftestWire.Channel.connect("127.0.0.1", ss.getLocalPort(), 20_000)) {
                assertEquals("6.29", ch.exchangeVersions());
                int[] sys = ch.exchangeSysData();
                assertEquals(8192, sys[0], "the larger cycle buffer wins");
                assertEquals(64, sys[1]);
                assertEquals(3, ch.exchangeMtu(5), "the smaller MTU wins");
                var mine = new PerftestFormat.Dest(0, 0x22, 0x123456, 0x99, 0x1000, GID_192_168_1_10, 0);
                var theirs = ch.handShake(mine, true);
                assertEquals(0x11, theirs.qpn());
                var r = ch.exchangeReports(new PerftestFormat.Report(2, 5000, 0.5, 0.25, 0.125));
                assertEquals(65536, r.size());
                assertEquals(5000, r.iters());
                assertEquals(1.0, r.bwPeak());
                assertEquals(2.0, r.bwAvg());
                assertEquals(3.0, r.msgRateMpps());
            }
            byte[][] got = peer.get(30, TimeUnit.SECONDS);
            assertEquals("6.27" + "\0".repeat(12), ascii(got[0]));
            assertEquals("00001000", HexFormat.of().formatHex(got[1]));
            assertEquals("00000040", HexFormat.of().formatHex(got[2]));
            assertEquals("5\0", ascii(got[3]));
            assertEquals("0000:0000:000022:123456:00000099:0000000000001000:"
                    + "00:00:00:00:00:00:00:00:00:00:ff:ff:c0:a8:01:0a:00000000:\0", ascii(got[4]));
            assertEquals("0000000000000002", HexFormat.of().formatHex(got[5]));
            assertEquals("0000000000001388", HexFormat.of().formatHex(got[6]));
            assertEquals("3fe0000000000000" + "3fd0000000000000" + "3fc0000000000000",
                    HexFormat.of().formatHex(got[7]));
        }
    }

    @Test
    void serverReadsFirstAndRefusesOldPeers() throws Exception {
        CompletableFuture<Integer> bound = new CompletableFuture<>();
        CompletableFuture<String> server = CompletableFuture.supplyAsync(() -> {
            try (var ch = PerftestWire.Channel.accept(0, 20_000, bound::complete)) {
                ch.exchangeVersions();
                return "accepted";
            } catch (PerftestWire.WireException e) {
                return e.getMessage();
            } catch (IOException e) {
                return "io: " + e.getMessage();
            }
        });
        int port = bound.get(20, TimeUnit.SECONDS);
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
            s.setSoTimeout(20_000);
            s.getOutputStream().write(PerftestWire.encodeVersion("5.60"));
            byte[] reply = read(new DataInputStream(s.getInputStream()), 16);
            assertEquals("6.27", PerftestWire.decodeVersion(reply), "the server answers after reading");
        }
        String msg = server.get(30, TimeUnit.SECONDS);
        assertTrue(msg.contains("not compatible with versions older than 5.70") && msg.contains("5.60"), msg);
    }

    /**
     * Issue 16 item 14: a side that waits for its peer can tell "nothing yet" from "bytes waiting" from
     * "closed", without consuming what it looked at.
     */
    @Test
    void peerStateTellsSilenceBytesAndClose() throws Exception {
        try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            CompletableFuture<Socket> accepted = CompletableFuture.supplyAsync(() -> {
                try {
                    return ss.accept();
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            try (PerftestWire.Channel ch = PerftestWire.Channel.connect("127.0.0.1", ss.getLocalPort(), 10_000);
                 Socket peer = accepted.get(10, TimeUnit.SECONDS)) {
                assertEquals(0, ch.peerState());
                assertTrue(!ch.hasBytes());
                // the peer's reply to exchangeMtu (2 ASCII bytes), then it closes
                peer.getOutputStream().write(PerftestWire.encodeMtu(3));
                peer.getOutputStream().flush();
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (ch.peerState() == 0 && System.nanoTime() < deadline) {
                    Thread.onSpinWait();
                }
                assertEquals(1, ch.peerState());
                assertTrue(ch.hasBytes());
                peer.shutdownOutput();
                assertEquals(3, ch.exchangeMtu(5), "the byte peerState looked at is still read");
                while (ch.peerState() == 0 && System.nanoTime() < deadline) {
                    Thread.onSpinWait();
                }
                assertEquals(-1, ch.peerState());
                var e = assertThrows(IOException.class, () -> ch.exchangeMtu(5));
                assertTrue(e.getMessage().contains("the peer closed the connection"), e.getMessage());
            }
        }
    }

    /** Ctrl-C ends a read from a silent peer (after the grace a hand-shake in progress gets). */
    @Test
    void aStopEndsAReadFromASilentPeer() throws Exception {
        try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            CompletableFuture<Socket> accepted = CompletableFuture.supplyAsync(() -> {
                try {
                    return ss.accept();
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            try (PerftestWire.Channel ch = PerftestWire.Channel.connect("127.0.0.1", ss.getLocalPort(), 0);
                 Socket peer = accepted.get(10, TimeUnit.SECONDS)) {
                StopSignal stop = new StopSignal();
                ch.stopOn(stop);
                stop.stop();
                assertThrows(PerftestWire.StoppedException.class, () -> ch.exchangeMtu(5));
                assertTrue(peer.isConnected());
            }
        }
    }

    @Test
    void connectionRefusedNamesTheAddressTried() throws Exception {
        int port;
        try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = ss.getLocalPort();
        }
        int p = port;
        var e = assertThrows(IOException.class, () -> PerftestWire.Channel.connect("127.0.0.1", p, 5_000));
        assertTrue(e.getMessage().contains("Couldn't connect to 127.0.0.1:" + p) && e.getMessage().contains("tried 127.0.0.1:"
                + p), e.getMessage());
    }

    private static byte[] read(DataInputStream in, int n) throws IOException {
        byte[] b = new byte[n];
        in.readFully(b);
        return b;
    }
}
