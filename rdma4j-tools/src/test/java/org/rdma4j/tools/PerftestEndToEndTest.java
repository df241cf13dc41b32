// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import javax.imageio.ImageIO;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.rdma4j.verbs.Verbs;

/**
 * The eight tools end to end on the in-process devices: server and client in two threads of this JVM,
 * talking perftest's TCP exchange over 127.0.0.1 (server on soft1, client on soft0), and the
 * {@code --loopback} form. Short runs; the timeouts only bound a broken run.
 */
class PerftestEndToEndTest {
    private static final Pattern BW_LINE = Pattern.compile(
            "(?m)^ (\\d+) +(\\d+) +(\\d+\\.\\d\\d) +(\\d+\\.\\d\\d)\\s*\\t\\t     (\\d+\\.\\d{6})$");
    private static final Pattern LAT_LINE = Pattern.compile(
            "(?m)^ (\\d+) +(\\d+) +(\\d+\\.\\d\\d) +(\\d+\\.\\d\\d) +(\\d+\\.\\d\\d) *\\t +(\\d+\\.\\d\\d) *\\t(\\d+\\.\\d\\d)"
                    + " *\\t\\t(\\d+\\.\\d\\d) *\\t\\t(\\d+\\.\\d\\d) *$");

    record Out(int rc, String out, String err) {
    }

    static Stream<String> tools() {
        return Stream.of("ib_send_bw", "ib_write_bw", "ib_read_bw", "ib_atomic_bw", "ib_send_lat", "ib_write_lat",
                "ib_read_lat", "ib_atomic_lat");
    }

    private static Out run(String tool, String... args) {
        var out = new ByteArrayOutputStream();
        var err = new ByteArrayOutputStream();
        int rc;
        try (var o = new PrintStream(out, true, StandardCharsets.UTF_8);
             var e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
            var opts = PerftestOptions.parse(PerftestOptions.verbOf(tool), tool.endsWith("_lat"), args);
            rc = new Perftest(opts, o, e).timeoutMs(60_000).run();
        }
        return new Out(rc, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private static void assumeTwoDevices() {
        assumeTrue(Verbs.devices().size() >= 2, "needs the in-process devices soft0 and soft1");
    }

    private static String[] sizeArgs(String tool) {
        return tool.startsWith("ib_atomic") ? new String[0] : new String[] {"-s", "1024"};
    }

    private static String[] concat(String[] a, String... b) {
        List<String> l = new ArrayList<>(List.of(a));
        l.addAll(List.of(b));
        return l.toArray(String[]::new);
    }

    /** Server (no host) and client (host 127.0.0.1) in two threads, as two machines would run them. */
    private static Out[] serverAndClient(String tool, String... extra) throws Exception {
        int port = freePort();
        String[] common = concat(sizeArgs(tool), concat(extra, "-n", "60", "-p", Integer.toString(port)));
        CompletableFuture<Out> server = CompletableFuture.supplyAsync(() -> run(tool, concat(common, "-d", "soft1")));
        Out client = null;
        // The server binds asynchronously: retry the client while the port is not listening yet.
        for (int attempt = 0; attempt < 100; attempt++) {
            client = run(tool, concat(common, "-d", "soft0", "127.0.0.1"));
            if (client.rc() == 0 || !client.err().contains("Connection refused")) {
                break;
            }
            Thread.sleep(50); // waiting for another thread's bind, which offers nothing to wait on
        }
        Out s = server.get(120, TimeUnit.SECONDS);
        return new Out[] {s, client};
    }

    @ParameterizedTest
    @MethodSource("tools")
    void serverAndClientOverTcp(String tool) throws Exception {
        assumeTwoDevices();
        Out[] r = serverAndClient(tool);
        Out s = r[0];
        Out c = r[1];
        assertEquals(0, c.rc(), "client: " + c.err() + c.out());
        assertEquals(0, s.rc(), "server: " + s.err() + s.out());
        // perftest's parser warns before anything else: a SEND server never measures the peak
        String warn = tool.equals("ib_send_bw") ? PerftestFormat.NO_PEAK_WARNING : "";
        assertTrue(s.out().startsWith(warn + PerftestFormat.waitingBanner() + PerftestFormat.RESULT_LINE), s.out());
        assertTrue(c.out().startsWith(PerftestFormat.RESULT_LINE), c.out());
        assertTrue(c.out().contains("\t\tDevice         : soft0\n"), c.out());
        assertTrue(s.out().contains("\t\tDevice         : soft1\n"), s.out());
        assertTrue(c.out().contains(" TX depth        : ") && !s.out().contains(" TX depth        : "));
        // The client's remote address is the server's local one, and the other way round.
        String cRemote = line(c.out(), " remote address:");
        String sLocal = line(s.out(), " local address:");
        assertEquals(cRemote.replace("remote", "local"), sLocal);
        assertEquals(line(s.out(), " remote address:").replace("remote", "local"), line(c.out(), " local address:"));
        assertTrue(c.out().endsWith(PerftestFormat.RESULT_LINE), c.out());
        assertTrue(s.out().endsWith(PerftestFormat.RESULT_LINE), s.out());
        long expectSize = tool.startsWith("ib_atomic") ? 8 : 1024;
        if (tool.endsWith("_bw")) {
            var m = BW_LINE.matcher(c.out());
            assertTrue(m.find(), c.out());
            assertEquals(expectSize, Long.parseLong(m.group(1)));
            assertEquals(60, Long.parseLong(m.group(2)));
            assertTrue(Double.parseDouble(m.group(4)) > 0, c.out());
            // every BW server prints a line: its own (SEND) or the client's report (xchg_bw_reports)
            var ms = BW_LINE.matcher(s.out());
            assertTrue(ms.find(), s.out());
            if (!tool.equals("ib_send_bw")) {
                assertEquals(m.group(0), ms.group(0), "the server prints the client's report");
            } else {
                assertTrue(s.out().contains(" RX depth        : 60\n"), s.out());
            }
        } else {
            var m = LAT_LINE.matcher(c.out());
            assertTrue(m.find(), c.out());
            assertEquals(expectSize, Long.parseLong(m.group(1)));
            assertEquals(60, Long.parseLong(m.group(2)));
            double min = Double.parseDouble(m.group(3));
            double typical = Double.parseDouble(m.group(5));
            double max = Double.parseDouble(m.group(4));
            assertTrue(min <= typical && typical <= max && min > 0, c.out());
            boolean pingPong = tool.equals("ib_write_lat") || tool.equals("ib_send_lat");
            assertEquals(pingPong, LAT_LINE.matcher(s.out()).find(), "only ping-pong servers measure: " + s.out());
        }
        if (tool.startsWith("ib_read")) {
            assertTrue(c.out().matches("(?s).* local address: LID 0000 QPN 0x\\w+ PSN 0x\\w+ OUT 0x\\w+ RKey .*"),
                    c.out());
            assertTrue(c.out().contains(" Outstand reads  : "), c.out());
        }
    }

    @ParameterizedTest
    @MethodSource("tools")
    void loopbackPrintsTheClientsTable(String tool) {
        assumeTwoDevices();
        Out r = run(tool, concat(sizeArgs(tool), "--loopback", "-n", "40"));
        assertEquals(0, r.rc(), r.err() + r.out());
        assertTrue(!r.out().contains("Waiting for client"), r.out());
        assertTrue((tool.endsWith("_bw") ? BW_LINE : LAT_LINE).matcher(r.out()).find(), r.out());
        String title = tool.endsWith("_lat") ? "Latency Test" : "BW Test";
        assertTrue(r.out().contains(title + "\n"), r.out());
    }

    @Test
    void allSizesJsonAndChart(@TempDir Path dir) throws Exception {
        assumeTwoDevices();
        Path png = dir.resolve("lat.png");
        Out r = run("ib_write_lat", "--loopback", "-a", "-n", "10", "--json", "--chart=" + png);
        assertEquals(0, r.rc(), r.err() + r.out());
        Object doc = MiniJson.parse(r.out());
        @SuppressWarnings("unchecked")
        Map<String, Object> m = (Map<String, Object>) doc;
        @SuppressWarnings("unchecked")
        Map<String, Object> info = (Map<String, Object>) m.get("test_info");
        assertEquals("RDMA_Write_Latency_Test", info.get("test"));
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> results = (List<Map<String, Object>>) m.get("results");
        assertEquals(23, results.size());
        assertEquals(List.of("MsgSize", "n_iterations", "t_min", "t_max", "t_typical", "t_avg", "t_stdev",
                "percentile_99", "percentile_99.9"), List.copyOf(results.get(0).keySet()));
        assertEquals(8388608.0, results.get(22).get("MsgSize"));
        var img = ImageIO.read(png.toFile());
        assertEquals(1000, img.getWidth());
        assertEquals(600, img.getHeight());
    }

    @Test
    void bwJsonParsesWithPerftestKeys() {
        assumeTwoDevices();
        Out r = run("ib_atomic_bw", "--loopback", "-n", "50", "--json", "-A", "CMP_AND_SWAP");
        assertEquals(0, r.rc(), r.err() + r.out());
        @SuppressWarnings("unchecked")
        Map<String, Object> m = (Map<String, Object>) MiniJson.parse(r.out());
        @SuppressWarnings("unchecked")
        Map<String, Object> info = (Map<String, Object>) m.get("test_info");
        assertEquals("Atomic_CMP_AND_SWAP_BW_Test", info.get("test"));
        assertTrue(info.containsKey("Outstand_reads") && !info.containsKey("Max_inline_data"), info.toString());
        @SuppressWarnings("unchecked")
        Map<String, Object> res = (Map<String, Object>) m.get("results");
        assertEquals(List.of("MsgSize", "n_iterations", "BW_peak", "BW_average", "MsgRate"), List.copyOf(res.keySet()));
        assertEquals(8.0, res.get("MsgSize"));
    }

    @Test
    void durationModeOnBothSidesOfASendTest() throws Exception {
        assumeTwoDevices();
        Out r = run("ib_send_bw", "--loopback", "-s", "4096", "-D", "2", "-f", "0");
        assertEquals(0, r.rc(), r.err() + r.out());
        var m = BW_LINE.matcher(r.out());
        assertTrue(m.find(), r.out());
        assertTrue(Long.parseLong(m.group(2)) > 0, r.out());
        Out l = run("ib_read_lat", "--loopback", "-D", "2", "-f", "0");
        assertEquals(0, l.rc(), l.err() + l.out());
        assertTrue(l.out().contains(PerftestFormat.RESULT_FMT_LAT_DUR + "\n"), l.out());
    }

    @Test
    void clientRefusesAnOldPeerVersion() throws Exception {
        try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            CompletableFuture<Void> fake = CompletableFuture.runAsync(() -> {
                try (Socket s = ss.accept()) {
                    new DataInputStream(s.getInputStream()).readFully(new byte[16]);
                    s.getOutputStream().write(PerftestWire.encodeVersion("5.60"));
                } catch (IOException e) {
                    throw new RuntimeException(e);
                }
            });
            Out c = run("ib_write_bw", "-n", "10", "-p", Integer.toString(ss.getLocalPort()), "127.0.0.1");
            fake.get(30, TimeUnit.SECONDS);
            assertEquals(1, c.rc());
            assertTrue(c.err().contains("not compatible with versions older than 5.70") && c.err().contains("5.60"),
                    c.err());
        }
    }

    /** A peer in another process (here a scripted perftest server) is out of reach of an in-process device. */
    @Test
    void inProcessDeviceRefusesAPeerOfAnotherProcess() throws Exception {
        assumeTwoDevices();
        byte[] gid;
        try (var ctx = Verbs.device("soft1").open()) {
            gid = ctx.queryGid(1, 0).toBytes();
        }
        try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            CompletableFuture<Void> fake = CompletableFuture.runAsync(() -> {
                try (Socket s = ss.accept()) {
                    var in = new DataInputStream(s.getInputStream());
                    var out = s.getOutputStream();
                    in.readFully(new byte[16]);
                    out.write(PerftestWire.encodeVersion("6.29"));
                    in.readFully(new byte[4]);
                    out.write(PerftestWire.u32(4096));
                    in.readFully(new byte[4]);
                    out.write(PerftestWire.u32(64));
                    in.readFully(new byte[2]);
                    out.write(PerftestWire.encodeMtu(3));
                    in.readFully(new byte[108]);
                    out.write(PerftestWire.encodeKeys(new PerftestFormat.Dest(0, 0x7777, 1, 2, 4096, gid), true));
                    in.read(); // until the client closes
                } catch (IOException e) {
                    throw new RuntimeException(e);
                }
            });
            Out c = run("ib_write_bw", "-d", "soft0", "-n", "10", "-p", Integer.toString(ss.getLocalPort()),
                    "127.0.0.1");
            fake.get(30, TimeUnit.SECONDS);
            assertEquals(1, c.rc(), c.out());
            assertTrue(c.err().contains("The peer's QP 0x7777") && c.err().contains("in-process device"), c.err());
            assertTrue(c.out().contains(" Mtu             : 1024[B]\n"), "the smaller MTU of the two: " + c.out());
        }
    }

    @Test
    void clearErrors() throws Exception {
        assumeTwoDevices();
        Out dev = run("ib_send_lat", "-d", "nosuchdev", "127.0.0.1");
        assertEquals(1, dev.rc());
        assertTrue(dev.err().contains("nosuchdev") && dev.err().contains("soft0") && dev.err().contains("soft1"),
                dev.err());
        Out gid = run("ib_read_bw", "--loopback", "-x", "7", "-n", "10");
        assertEquals(1, gid.rc());
        assertTrue(gid.err().contains("GID index 7 is out of range") && gid.err().contains("Its GID table:")
                && gid.err().contains("   0: "), gid.err());
        Out huge = run("ib_read_lat", "--loopback", "-n", "4000000000");
        assertEquals(1, huge.rc());
        assertTrue(huge.err().contains("MiB of samples") && huge.err().contains("-Xmx"), huge.err());
        int port = freePort();
        Out refused = run("ib_write_lat", "-p", Integer.toString(port), "127.0.0.1");
        assertEquals(1, refused.rc());
        assertTrue(refused.err().contains("Couldn't connect to 127.0.0.1:" + port) && refused.err().contains("tried"),
                refused.err());
    }

    @Test
    void outJsonFileIsWritten(@TempDir Path dir) throws Exception {
        assumeTwoDevices();
        Path f = dir.resolve("r.json");
        Out r = run("ib_read_bw", "--loopback", "-s", "512", "-n", "30", "--out_json_file=" + f);
        assertEquals(0, r.rc(), r.err());
        assertTrue(BW_LINE.matcher(r.out()).find(), r.out());
        MiniJson.parse(Files.readString(f));
    }

    /** Captures the output and presses "Ctrl-C" once the result header has been printed. */
    private static final class StopAtHeader extends java.io.OutputStream {
        final ByteArrayOutputStream buf = new ByteArrayOutputStream();
        final StopSignal stop = new StopSignal();

        @Override
        public void write(int b) {
            buf.write(b);
            if (b == '\n' && buf.toString(StandardCharsets.UTF_8).contains(" #bytes ")) {
                stop.stop();
            }
        }
    }

    @ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(strings = {"ib_write_bw", "ib_send_bw", "ib_read_lat",
        "ib_send_lat"})
    void ctrlCStopsAndPrintsWhatWasMeasured(String tool) {
        assumeTwoDevices();
        var cap = new StopAtHeader();
        var err = new ByteArrayOutputStream();
        int rc;
        try (var o = new PrintStream(cap, true, StandardCharsets.UTF_8);
             var e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
            var opts = PerftestOptions.parse(PerftestOptions.verbOf(tool), tool.endsWith("_lat"), "--loopback",
                    "-s", "64", "-n", "100000000");
            rc = new Perftest(opts, o, e, cap.stop).timeoutMs(60_000).run();
        }
        String out = cap.buf.toString(StandardCharsets.UTF_8);
        assertEquals(130, rc, err + out);
        assertTrue(err.toString(StandardCharsets.UTF_8).contains("Stopped (Ctrl-C)"), err.toString());
        assertTrue(out.endsWith(PerftestFormat.RESULT_LINE), out);
        if (tool.endsWith("_bw")) {
            var m = BW_LINE.matcher(out);
            assertTrue(m.find(), out);
            assertTrue(Long.parseLong(m.group(2)) < 100_000_000L, out);
        }
    }

    @Test
    void progressLineOnRequest() {
        assumeTwoDevices();
        Out r = run("ib_write_bw", "--loopback", "-s", "4096", "-D", "3", "-f", "0", "--progress");
        assertEquals(0, r.rc(), r.err() + r.out());
        assertTrue(r.err().contains("\r 4096 B: ") && r.err().contains(" of 3 s"), r.err());
        assertTrue(!r.out().contains("\r"), "progress goes to stderr only");
    }

    private static String line(String text, String prefix) {
        for (String l : text.split("\n")) {
            if (l.startsWith(prefix)) {
                return l;
            }
        }
        throw new AssertionError("no line starting with '" + prefix + "' in\n" + text);
    }
}
