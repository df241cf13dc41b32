// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.DatagramSocket;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The system tier: two JVM processes, each with one RoCEv2 device (rxe0 on 127.0.0.1, rxe1 on 127.0.0.2,
 * configured through {@code RDMA4J_DEVICES} as a user would), talking over UDP on loopback. The server
 * runs in a child JVM; the client runs in a second child, so neither shares a fabric, a lock or memory
 * with the other. The pingpongs check their data, so a pass means every byte crossed the wire intact;
 * the eight perftest tools run their exchange and measurement across the same two processes.
 */
class TwoProcessRoceTest {
    private static final long TIMEOUT_S = 120;

    @TempDir
    Path dir;

    @ParameterizedTest
    @ValueSource(strings = {"rc_pingpong", "ud_pingpong", "srq_pingpong"})
    void pingpongRunsBetweenTwoProcessesOverRoce(String tool) throws Exception {
        int udp = freeUdpPort();
        int tcp = freeTcpPort();
        List<String> common = List.of("-g", "0", "-n", "50", "-p", Integer.toString(tcp));
        if (tool.equals("rc_pingpong")) {
            common = new ArrayList<>(common);
            common.addAll(List.of("-s", "10000", "-m", "1024")); // 10 packets per message at path MTU 1024
        }
        Process server = start(dir.resolve("server.out"), "rxe0=127.0.0.1@" + udp, tool, "-d rxe0", common, null);
        try {
            awaitListening(server, tcp);
            Process client = start(dir.resolve("client.out"), "rxe1=127.0.0.2@" + udp, tool, "-d rxe1", common,
                    "127.0.0.1");
            try {
                assertTrue(client.waitFor(TIMEOUT_S, TimeUnit.SECONDS), "client did not finish");
                assertTrue(server.waitFor(TIMEOUT_S, TimeUnit.SECONDS), "server did not finish");
                String c = Files.readString(dir.resolve("client.out"));
                String s = Files.readString(dir.resolve("server.out"));
                assertEquals(0, client.exitValue(), "client:\n" + c + "\nserver:\n" + s);
                assertEquals(0, server.exitValue(), "server:\n" + s + "\nclient:\n" + c);
                for (String out : List.of(c, s)) {
                    assertTrue(out.contains("50 iters in"), out);
                }
                // each side's remote address is the other's local one: GIDs are the two loopback addresses
                assertTrue(c.contains("local address:") && c.contains("GID ::ffff:127.0.0.2"), c);
                assertTrue(c.contains("remote address:") && c.contains("GID ::ffff:127.0.0.1"), c);
                assertEquals(field(c, "local address:", "QPN"), field(s, "remote address:", "QPN"));
                assertEquals(field(s, "local address:", "QPN"), field(c, "remote address:", "QPN"));
            } finally {
                client.destroyForcibly();
            }
        } finally {
            server.destroyForcibly();
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"ib_send_bw", "ib_write_bw", "ib_read_bw", "ib_atomic_bw", "ib_send_lat", "ib_write_lat",
        "ib_read_lat", "ib_atomic_lat"})
    void perftestRunsBetweenTwoProcessesOverRoce(String tool) throws Exception {
        int udp = freeUdpPort();
        int tcp = freeTcpPort();
        List<String> args = new ArrayList<>(List.of("-x", "0", "-n", "200", "-p", Integer.toString(tcp)));
        if (!tool.startsWith("ib_atomic")) {
            args.addAll(List.of("-s", tool.endsWith("_bw") ? "65536" : "8"));
        }
        Process server = start(dir.resolve("server.out"), "rxe0=127.0.0.1@" + udp, tool, "-d rxe0", args, null);
        try {
            awaitListening(server, tcp);
            Process client = start(dir.resolve("client.out"), "rxe1=127.0.0.2@" + udp, tool, "-d rxe1", args, "127.0.0.1");
            try {
                assertTrue(client.waitFor(TIMEOUT_S, TimeUnit.SECONDS), "client did not finish");
                assertTrue(server.waitFor(TIMEOUT_S, TimeUnit.SECONDS), "server did not finish");
                String c = Files.readString(dir.resolve("client.out"));
                String s = Files.readString(dir.resolve("server.out"));
                assertEquals(0, client.exitValue(), "client:\n" + c + "\nserver:\n" + s);
                assertEquals(0, server.exitValue(), "server:\n" + s + "\nclient:\n" + c);
                // the result line: size (atomics: 8) and the 200 iterations, after perftest's header
                assertTrue(c.lines().anyMatch(l -> l.matches("\\s*(\\d+)\\s+200\\s+.*")), "no result line in\n" + c);
                assertTrue(c.contains("GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:00:00:02"), c);
            } finally {
                client.destroyForcibly();
            }
        } finally {
            server.destroyForcibly();
        }
    }

    /**
     * Issue 16 item 14: a SEND bandwidth server in duration mode waited for its client's closing hand-shake
     * forever when the client died. The client is killed (SIGKILL, by PID: only the process this test
     * started) while the server is receiving; the server must end with a message. The bound only turns a
     * hang into a failure.
     */
    @Test
    void sendBwServerEndsWithAMessageWhenItsClientIsKilled() throws Exception {
        int udp = freeUdpPort();
        int tcp = freeTcpPort();
        List<String> args = List.of("-x", "0", "-D", "10", "-s", "65536", "--progress", "-p", Integer.toString(tcp));
        Path serverOut = dir.resolve("server.out");
        Process server = start(serverOut, "rxe0=127.0.0.1@" + udp, "ib_send_bw", "-d rxe0", args, null);
        try {
            awaitListening(server, tcp);
            Process client = start(dir.resolve("client.out"), "rxe1=127.0.0.2@" + udp, "ib_send_bw", "-d rxe1", args,
                    "127.0.0.1");
            try {
                // the server's progress line: it is in its receive loop and SENDs are arriving
                awaitOutput(server, serverOut, "\r 65536 B: ");
                assertTrue(client.isAlive(), Files.readString(dir.resolve("client.out")));
                client.destroyForcibly(); // SIGKILL: no closing hand-shake, the kernel closes its socket
                assertTrue(client.waitFor(TIMEOUT_S, TimeUnit.SECONDS));
                assertTrue(server.waitFor(60, TimeUnit.SECONDS), "the server still waits for its killed client:\n"
                        + Files.readString(serverOut));
                String s = Files.readString(serverOut);
                assertEquals(1, server.exitValue(), s);
                assertTrue(s.contains("The client closed the connection after "), s);
            } finally {
                client.destroyForcibly();
            }
        } finally {
            server.destroyForcibly();
        }
    }

    private static void awaitOutput(Process p, Path output, String text) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_S);
        while (System.nanoTime() < deadline && p.isAlive() && !Files.readString(output).contains(text)) {
            p.waitFor(20, TimeUnit.MILLISECONDS); // bounded wait on the process, not a sleep-as-sync
        }
        assertTrue(Files.readString(output).contains(text), "no '" + text + "' in\n" + Files.readString(output));
    }

    @Test
    void unboundAddressIsReportedNotFatal() throws Exception {
        // 192.0.2.1 (TEST-NET-1) is not on this host: the device is left out with the address named
        Process p = start(dir.resolve("devices.out"), "rxe9=192.0.2.1", "devices", null, List.of(), null);
        assertTrue(p.waitFor(TIMEOUT_S, TimeUnit.SECONDS));
        String out = Files.readString(dir.resolve("devices.out"));
        assertEquals(0, p.exitValue(), out);
        assertTrue(out.contains("rxe9") && out.contains("192.0.2.1") && out.contains("EADDRNOTAVAIL"), out);
        assertTrue(out.contains("soft0"), "the in-process devices stay: " + out);
    }

    private static String field(String out, String line, String name) {
        Matcher m = Pattern.compile(Pattern.quote(line) + ".*?" + name + " (0x[0-9a-f]+)").matcher(out);
        assertTrue(m.find(), "no " + name + " on '" + line + "' in\n" + out);
        return m.group(1);
    }

    private Process start(Path output, String devices, String tool, String devFlag, List<String> args, String host)
            throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.add("-Drdma4j.soft.devices=1");
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(Main.class.getName());
        cmd.add(tool);
        if (devFlag != null) {
            cmd.addAll(List.of(devFlag.split(" ")));
        }
        cmd.addAll(args);
        if (host != null) {
            cmd.add(host);
        }
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(output.toFile());
        pb.environment().put("RDMA4J_DEVICES", devices);
        pb.environment().put("RDMA4J_LINKS", dir.resolve("no-links-file").toString());
        return pb.start();
    }

    /**
     * Waits (bounded) until the server listens on its TCP port. It looks at the kernel's socket table
     * rather than probing: a connection would be taken as the client, and a probing bind could take the
     * port from under the server.
     */
    private static void awaitListening(Process server, int tcp) throws Exception {
        String port = String.format(":%04X ", tcp);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_S);
        for (int i = 0; i < 1_000_000 && System.nanoTime() < deadline; i++) {
            if (!server.isAlive()) {
                return; // the assertions report its output
            }
            for (String table : List.of("/proc/net/tcp", "/proc/net/tcp6")) {
                Path t = Path.of(table);
                if (Files.isReadable(t)) {
                    for (String line : Files.readAllLines(t)) {
                        String[] f = line.trim().split("\\s+");
                        if (f.length > 3 && (f[1] + " ").endsWith(port) && f[3].equals("0A")) { // 0A = LISTEN
                            return;
                        }
                    }
                }
            }
            server.waitFor(20, TimeUnit.MILLISECONDS); // bounded wait on the process, not a sleep-as-sync
        }
        throw new AssertionError("server did not listen on TCP " + tcp + " within " + TIMEOUT_S + " s");
    }

    private static int freeTcpPort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private static int freeUdpPort() throws IOException {
        for (int i = 0; i < 50; i++) {
            try (DatagramSocket a = new DatagramSocket(new InetSocketAddress("127.0.0.1", 0))) {
                int p = a.getLocalPort();
                try {
                    new DatagramSocket(new InetSocketAddress("127.0.0.2", p)).close(); // free on the second address too
                    return p;
                } catch (IOException busy) {
                    // next
                }
            }
        }
        throw new IOException("no UDP port free on both 127.0.0.1 and 127.0.0.2");
    }
}
