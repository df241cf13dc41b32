// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.Linger;
import org.rdma4j.verbs.Verbs;

/**
 * Server and client of each pingpong in one JVM on the soft devices, with the TCP exchange over
 * 127.0.0.1; output compared line by line, numbers and GIDs masked, with ibverbs-utils output
 * recorded on rdma_rxe (src/test/resources/org/rdma4j/tools/recorded).
 */
class PingPongEndToEndTest {
    /** Each task on its own daemon thread: the common pool has one thread on a 2-core machine. */
    private static <T> CompletableFuture<T> async(java.util.function.Supplier<T> task) {
        return CompletableFuture.supplyAsync(task, r -> Thread.ofPlatform().daemon().start(r));
    }

    private static CompletableFuture<Void> async(Runnable task) {
        return CompletableFuture.runAsync(task, r -> Thread.ofPlatform().daemon().start(r));
    }

    private static final Pattern GID = Pattern.compile("GID \\S+");
    private static final Pattern HEX = Pattern.compile("0x([0-9a-f]+)");
    private static final Pattern NUM = Pattern.compile("\\d+");
    private static final Pattern BYTES = Pattern.compile("^(\\d+) bytes in (\\d+\\.\\d\\d) seconds = (\\S+) Mbit/sec$",
            Pattern.MULTILINE);
    private static final Pattern ITERS = Pattern.compile("^(\\d+) iters in (\\d+\\.\\d\\d) seconds = (\\S+) usec/iter$",
            Pattern.MULTILINE);

    private record Result(int rc, String out, String err) {
    }

    private static Result run(StopSignal stop, String... args) {
        var out = new ByteArrayOutputStream();
        var err = new ByteArrayOutputStream();
        int rc;
        try (var o = new PrintStream(out, true, StandardCharsets.UTF_8);
             var e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
            String[] rest = java.util.Arrays.copyOfRange(args, 1, args.length);
            rc = PingPong.main(args[0], rest, o, e, stop);
        }
        return new Result(rc, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    private static Result run(String... args) {
        return run(new StopSignal(), args);
    }

    /** A line with hex digits kept as width, other numbers and GIDs masked. */
    static String shape(String line) {
        String s = GID.matcher(line).replaceAll("GID <gid>");
        Matcher m = HEX.matcher(s);
        StringBuilder sb = new StringBuilder();
        while (m.find()) {
            m.appendReplacement(sb, "0x" + "h".repeat(m.group(1).length()));
        }
        m.appendTail(sb);
        return NUM.matcher(sb.toString()).replaceAll("#");
    }

    private static List<String> shapes(String text) {
        List<String> l = new ArrayList<>();
        for (String line : text.split("\n")) {
            l.add(shape(line));
        }
        return l;
    }

    private static String recorded(String name) {
        try (InputStream in = PingPongEndToEndTest.class.getResourceAsStream("recorded/" + name)) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException | NullPointerException e) {
            throw new AssertionError("missing recording " + name, e);
        }
    }

    /** The lines of one side of a loopback run, without the [server]/[client] prefix. */
    private static String side(String out, String side) {
        StringBuilder sb = new StringBuilder();
        for (String line : out.split("\n")) {
            if (line.startsWith("[" + side + "] ")) {
                sb.append(line.substring(side.length() + 3)).append('\n');
            }
        }
        return sb.toString();
    }

    private static void assumeTwoDevices() {
        assumeTrue(Verbs.devices().size() >= 2, "needs soft0 and soft1");
    }

    private static void checkRun(Result r, String kind, long bytes, long iters) {
        assertEquals(0, r.rc(), r.err() + r.out());
        for (String s : List.of("server", "client")) {
            String mine = side(r.out(), s);
            assertEquals(shapes(recorded(kind + "-" + s + ".txt")), shapes(mine), mine);
            Matcher b = BYTES.matcher(mine);
            assertTrue(b.find(), mine);
            assertEquals(Long.toString(bytes), b.group(1));
            Matcher i = ITERS.matcher(mine);
            assertTrue(i.find(), mine);
            assertEquals(Long.toString(iters), i.group(1));
            assertFalse(mine.contains("invalid data"), mine);
        }
        // Each side's remote address is the other's local address.
        String server = side(r.out(), "server");
        String client = side(r.out(), "client");
        assertEquals(addresses(server, "local"), addresses(client, "remote"));
        assertEquals(addresses(client, "local"), addresses(server, "remote"));
    }

    private static List<String> addresses(String out, String which) {
        List<String> l = new ArrayList<>();
        Matcher m = Pattern.compile("^  " + which + " address: +(LID .*, QPN .*, PSN 0x[0-9a-f]{6})[:,] (GID .*)$",
                Pattern.MULTILINE).matcher(out);
        while (m.find()) {
            l.add(m.group(1) + " " + m.group(2));
        }
        return l;
    }

    @Test
    void rcLoopbackPrintsAsIbvRcPingpong() {
        assumeTwoDevices();
        Result r = run("rc_pingpong", "--loopback", "-n", "20");
        checkRun(r, "rc_pingpong", 4096L * 20 * 2, 20);
        assertTrue(r.out().contains("[server]   local address:  LID 0x0000, QPN 0x"), r.out());
        assertTrue(r.out().contains(", GID fe80::"), r.out());
    }

    @Test
    void ucLoopbackPrintsAsIbvUcPingpong() {
        // UC QPs on both soft devices: the lines of rdma-core's ibv_uc_pingpong, the data check passes.
        assumeTwoDevices();
        Result r = run("ibv_uc_pingpong", "--loopback", "-n", "20", "-c");
        checkRun(r, "uc_pingpong", 4096L * 20 * 2, 20);
    }

    @Test
    void udLoopbackWithDataCheckAndEvents() {
        assumeTwoDevices();
        Result r = run("ibv_ud_pingpong", "--loopback", "-n", "20", "-c", "-e");
        checkRun(r, "ud_pingpong", 1024L * 20 * 2, 20);
        assertTrue(side(r.out(), "client").contains(": GID fe80::"), "ud's local line has a colon before GID");
    }

    @Test
    void srqLoopbackWithTwoQps() {
        assumeTwoDevices();
        Result r = run("srq_pingpong", "--loopback", "-n", "20", "-q", "2", "-c");
        checkRun(r, "srq_pingpong", 4096L * 20 * 2, 20);
    }

    @Test
    void dataCheckCatchesWrongBytes() {
        // The client marks the first byte of each page 0 (rdma-core's i / page_size % sizeof(char));
        // without the mark the server still holds 0x7b there and reports every page.
        assumeTwoDevices();
        Result r = run("rc_pingpong", "--loopback", "-n", "4", "-s", "8192", "-c");
        assertEquals(0, r.rc(), r.err());
        assertFalse(r.out().contains("invalid data"), r.out());
    }

    @Test
    void verifyComparesEveryEchoWithWhatWasSent() {
        // Our server echoes its buffer as rdma-core's does, so every echo must match its message,
        // multi-packet RC messages, UD at the MTU and srq with one QP alike.
        assumeTwoDevices();
        for (String[] args : new String[][] {
                {"rc_pingpong", "--loopback", "--verify", "-n", "30", "-s", "10001"},
                {"ud_pingpong", "--loopback", "--verify", "-n", "30", "-s", "1024"},
                {"srq_pingpong", "--loopback", "--verify", "-n", "30", "-q", "1", "-s", "3000"}}) {
            Result r = run(args);
            assertEquals(0, r.rc(), r.out() + r.err());
            assertTrue(r.out().contains("[client] verifying every echo: pattern seed 0x"), r.out());
            assertTrue(r.out().contains("[client] verified 30 echoes of " + args[args.length - 1] + " bytes: all equal to what was sent"),
                    r.out());
            assertFalse(r.out().contains("[server] verif"), "the server only echoes: " + r.out());
        }
    }

    /** A server started as the CLI starts it, but on a socket bound before the client runs (no race). */
    private record Server(CompletableFuture<Result> result, int port) {
    }

    private static Server startServer(StopSignal stop, String... args) throws Exception {
        PingPongOptions o = PingPongOptions.parse(PingPongOptions.Kind.of(args[0]),
                java.util.Arrays.copyOfRange(args, 1, args.length));
        ServerSocket listener = PingPongExchange.listen(0);
        var out = new ByteArrayOutputStream();
        var err = new ByteArrayOutputStream();
        PingPong pp = new PingPong(o, new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8), stop, false);
        CompletableFuture<Result> f = async(() -> {
            int rc = pp.run(null, listener);
            return new Result(rc, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
        });
        return new Server(f, listener.getLocalPort());
    }

    @Test
    void separateServerAndClientOverTcp() throws Exception {
        assumeTwoDevices();
        StopSignal stop = new StopSignal();
        Server server = startServer(stop, "rc_pingpong", "-d", "soft0", "-g", "0", "-n", "10", "-s", "512");
        Result client = run(stop, "rc_pingpong", "-d", "soft1", "-g", "0", "-n", "10", "-s", "512", "-p",
                Integer.toString(server.port()), "127.0.0.1");
        assertEquals(0, client.rc(), client.err());
        Result s = server.result().get(60, TimeUnit.SECONDS);
        assertEquals(0, s.rc(), s.err());
        assertEquals(shapes(recorded("rc_pingpong-server.txt")), shapes(s.out()), s.out());
        assertEquals(shapes(recorded("rc_pingpong-client.txt")), shapes(client.out()), client.out());
        assertTrue(s.out().contains("\n10240 bytes in "), s.out());
        assertEquals(addresses(s.out(), "local"), addresses(client.out(), "remote"));
    }

    /** Server and client of one kind on soft0/soft1, each its own run; {@code linked} as --loopback links them. */
    private static PingPong[] runPair(PingPongOptions.Kind kind, boolean linked, String... args) throws Exception {
        StopSignal stop = new StopSignal();
        PingPongOptions so = PingPongOptions.parse(kind, args);
        PingPongOptions co = PingPongOptions.parse(kind, args);
        ServerSocket listener = PingPongExchange.listen(0);
        co.serverName = "127.0.0.1";
        co.port = listener.getLocalPort();
        var sink = new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8);
        var sErr = new ByteArrayOutputStream();
        var cErr = new ByteArrayOutputStream();
        PingPong server = new PingPong(so, sink, new PrintStream(sErr, true, StandardCharsets.UTF_8), stop, false);
        PingPong client = new PingPong(co, sink, new PrintStream(cErr, true, StandardCharsets.UTF_8), stop, false);
        if (linked) {
            server.peer = client;
            client.peer = server;
        }
        CompletableFuture<Integer> s = async(() -> server.run(Verbs.devices().get(0), listener));
        CompletableFuture<Integer> c = async(() -> client.run(Verbs.devices().get(1), null));
        assertEquals(0, c.get(60, TimeUnit.SECONDS), () -> cErr.toString(StandardCharsets.UTF_8));
        assertEquals(0, s.get(60, TimeUnit.SECONDS), () -> sErr.toString(StandardCharsets.UTF_8));
        return new PingPong[] {server, client};
    }

    @Test
    void rcSidesLingerUntilQuietWhenThePeerIsNotInThisProcess() throws Exception {
        assumeTwoDevices();
        for (PingPong p : runPair(PingPongOptions.Kind.RC, false, "-g", "0", "-n", "5", "-s", "512")) {
            Linger l = p.lastLinger;
            assertTrue(l != null, "an RC side ended without lingering");
            // Nothing is lost in process: no resend arrived, and the quiet period ended it.
            assertEquals(Linger.End.QUIET, l.poll(0, false), l.toString());
            assertTrue(l.observesArrivals(), l.toString());
            assertEquals(0, l.arrivals(), l.toString());
            assertEquals(Linger.QUIET_RETRANSMITS * Linger.retransmitTimeoutNs(14), l.quietNs(), l.toString());
        }
    }

    @Test
    void srqSidesLingerAndUdAndUcSidesDoNot() throws Exception {
        assumeTwoDevices();
        for (PingPong p : runPair(PingPongOptions.Kind.SRQ, true, "-g", "0", "-q", "2", "-n", "5", "-s", "512")) {
            assertEquals(Linger.End.PEER_DONE, p.lastLinger.poll(0, false), p.lastLinger.toString());
        }
        for (PingPong p : runPair(PingPongOptions.Kind.UD, true, "-g", "0", "-n", "5", "-s", "512")) {
            assertEquals(null, p.lastLinger, "UD has no ACKs to resend");
        }
        for (PingPong p : runPair(PingPongOptions.Kind.UC, false, "-g", "0", "-n", "5", "-s", "512")) {
            assertEquals(null, p.lastLinger, "UC has no ACKs to resend");
        }
    }

    @Test
    void inOneProcessTheLingerEndsWhenThePeerIsDone() throws Exception {
        assumeTwoDevices();
        for (PingPong p : runPair(PingPongOptions.Kind.RC, true, "-g", "0", "-n", "5", "-s", "512")) {
            Linger l = p.lastLinger;
            assertTrue(l != null, "an RC side ended without lingering");
            assertEquals(Linger.End.PEER_DONE, l.poll(0, false), l.toString());
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return ss.getLocalPort();
        }
    }

    @Test
    void unknownDeviceListsTheKnownOnes() {
        Result r = run("rc_pingpong", "-d", "nosuchdev", "127.0.0.1");
        assertEquals(1, r.rc());
        assertTrue(r.err().startsWith("IB device nosuchdev not found (known devices: "), r.err());
        for (var d : Verbs.devices()) {
            assertTrue(r.err().contains(d.name()), r.err());
        }
    }

    @Test
    void badGidIndexListsTheTable() {
        assumeTwoDevices();
        Result r = run("rc_pingpong", "-d", "soft0", "-g", "7", "127.0.0.1");
        assertEquals(1, r.rc());
        assertTrue(r.err().startsWith("can't read sgid of index 7"), r.err());
        assertTrue(r.err().contains("GID table of soft0 port 1:\n\tGID[  0]:\tfe80::"), r.err());
        Result u = run("ud_pingpong", "-d", "soft0", "-g", "7", "127.0.0.1");
        assertTrue(u.err().startsWith("Could not get local gid for gid index 7"), u.err());
    }

    @Test
    void connectionRefusedSaysWhere() throws Exception {
        assumeTwoDevices();
        int port = freePort();
        Result r = run("rc_pingpong", "-d", "soft1", "-g", "0", "-p", Integer.toString(port), "127.0.0.1");
        assertEquals(1, r.rc());
        assertTrue(r.out().startsWith("  local address:  LID 0x0000, QPN 0x"), r.out());
        assertTrue(r.err().startsWith("Couldn't connect to 127.0.0.1:" + port + " (tried 127.0.0.1:" + port + ": "),
                r.err());
    }

    @Test
    void withoutGidOnEthernetTheServerRefusesAsRoceDoes() throws Exception {
        assumeTwoDevices();
        StopSignal stop = new StopSignal();
        Server server = startServer(stop, "rc_pingpong", "-d", "soft0", "-n", "5");
        Result client = run(stop, "rc_pingpong", "-d", "soft1", "-n", "5", "-p", Integer.toString(server.port()),
                "127.0.0.1");
        Result s = server.result().get(60, TimeUnit.SECONDS);
        assertEquals(1, s.rc());
        assertTrue(s.err().startsWith("Failed to modify QP to RTR (the link layer of soft0 port 1 is Ethernet"), s.err());
        assertTrue(s.err().contains("-g <gid index>"), s.err());
        assertTrue(s.err().endsWith("Couldn't connect to remote QP\n"), s.err());
        assertTrue(s.out().contains("GID ::\n"), "no -g: the zero GID, printed as inet_ntop prints it");
        assertEquals(1, client.rc());
        assertTrue(client.err().contains("Couldn't read/write remote address"), client.err());
    }

    @Test
    void capabilityOptionsAreRefusedWithRdmaCoresMessage() {
        Result r = run("rc_pingpong", "--loopback", "-t");
        assertEquals(1, r.rc());
        assertTrue(r.err().contains("The device isn't completion timestamp capable"), r.err());
    }

    @Test
    void usageErrorsPrintTheUsage() {
        Result r = run("ud_pingpong", "-m", "1024");
        assertEquals(1, r.rc());
        assertTrue(r.err().startsWith("ud_pingpong: invalid option -- 'm'"), r.err());
        assertTrue(r.out().startsWith("Usage:\n"), r.out());
    }

    @Test
    void udSizeAboveTheMtuIsRefused() {
        assumeTwoDevices();
        Result r = run("ud_pingpong", "--loopback", "-s", "8192", "-n", "2");
        assertEquals(1, r.rc());
        assertTrue(r.err().contains("Requested size larger than port MTU (4096)"), r.err());
    }

    @Test
    void stopPrintsWhatWasMeasured() throws Exception {
        assumeTwoDevices();
        StopSignal stop = new StopSignal();
        PingPongOptions so = PingPongOptions.parse(PingPongOptions.Kind.RC, "-g", "0", "-n", "100000000", "-s", "64");
        PingPongOptions co = PingPongOptions.parse(PingPongOptions.Kind.RC, "-g", "0", "-n", "100000000", "-s", "64",
                "127.0.0.1");
        ServerSocket listener = PingPongExchange.listen(0);
        co.port = listener.getLocalPort();
        var sOut = new ByteArrayOutputStream();
        var cOut = new ByteArrayOutputStream();
        var cErr = new ByteArrayOutputStream();
        PingPong server = new PingPong(so, new PrintStream(sOut, true, StandardCharsets.UTF_8),
                new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8), stop, false);
        PingPong client = new PingPong(co, new PrintStream(cOut, true, StandardCharsets.UTF_8),
                new PrintStream(cErr, true, StandardCharsets.UTF_8), stop, false);
        CompletableFuture<Integer> s = async(
                () -> server.run(Verbs.devices().get(0), listener));
        CompletableFuture<Integer> c = async(() -> client.run(Verbs.devices().get(1), null));
        assertTrue(client.dataPhase.await(60, TimeUnit.SECONDS), "the data phase never started");
        stop.stop();
        assertEquals(130, c.get(60, TimeUnit.SECONDS));
        assertEquals(130, s.get(60, TimeUnit.SECONDS));
        String out = cOut.toString(StandardCharsets.UTF_8);
        String err = cErr.toString(StandardCharsets.UTF_8);
        assertTrue(err.startsWith("interrupted after "), err);
        assertTrue(err.contains(" of 100000000 iters"), err);
        Matcher b = BYTES.matcher(out);
        assertTrue(b.find(), out);
        Matcher i = ITERS.matcher(out);
        assertTrue(i.find(), out);
        long done = Long.parseLong(i.group(1));
        assertTrue(done < 100_000_000L, out);
        assertEquals(64L * done * 2, Long.parseLong(b.group(1)), out);
    }

    @Test
    void reportIsComputedAsRdmaCoreComputesIt() {
        assertEquals("8192000 bytes in 0.01 seconds = 6553.60 Mbit/sec\n"
                + "1000 iters in 0.01 seconds = 10.00 usec/iter\n", PingPong.report(4096, 1000, 10_000));
        // The elapsed time is a C float: 16777217 us rounds to 16777216.
        assertEquals("2 bytes in 16.78 seconds = 0.00 Mbit/sec\n1 iters in 16.78 seconds = 16777216.00 usec/iter\n",
                PingPong.report(1, 1, 16_777_217));
        assertEquals("0 bytes in 0.00 seconds = -nan Mbit/sec\n0 iters in 0.00 seconds = -nan usec/iter\n",
                PingPong.report(64, 0, 0));
    }
}
