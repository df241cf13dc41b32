// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.DatagramSocket;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The CM tools between two JVM processes, each with one RoCEv2 device ({@code rxe0} on 127.0.0.1 serves,
 * {@code rxe1} on 127.0.0.2 connects, configured through {@code RDMA4J_DEVICES}): the IB CM's MADs travel on
 * QP1 over UDP on loopback exactly as they would to another host, then the data. A client runs again while
 * the server is not listening yet (its REQ is rejected with reason 8, as Linux's would be).
 */
class TwoProcessCmTest {
    private static final long TIMEOUT_S = 120;

    @TempDir
    Path dir;

    @Test
    void rpingPingsAndValidatesAcrossTwoProcesses() throws Exception {
        String[] r = pair(List.of("rping", "-s", "-a", "127.0.0.1", "-p", "%PORT%", "-v", "-C", "20"),
                List.of("rping", "-c", "-a", "127.0.0.1", "-I", "127.0.0.2", "-p", "%PORT%", "-v", "-V", "-C", "20"),
                "REJECTED, error 8");
        assertEquals(20, r[1].lines().filter(l -> l.startsWith("ping data: rdma-ping-")).count(), r[1]);
        assertEquals(20, r[0].lines().filter(l -> l.startsWith("server ping data: rdma-ping-")).count(), r[0]);
        assertTrue(r[0].contains("server DISCONNECT EVENT..."), r[0]);
    }

    @Test
    void ucmatoseRunsFourConnectionsAcrossTwoProcesses() throws Exception {
        String[] r = pair(List.of("ucmatose", "-b", "127.0.0.1", "-p", "%PORT%", "-c", "4", "-C", "50", "-S", "1000"),
                List.of("ucmatose", "-s", "127.0.0.1", "-b", "127.0.0.2", "-p", "%PORT%", "-c", "4", "-C", "50", "-S",
                        "1000"),
                "error: 8");
        assertTrue(r[1].contains("data transfers complete\ntest complete\nreturn status 0\n"), r[1]);
        assertTrue(r[0].contains("cmatose: disconnecting\ndisconnected\ntest complete\nreturn status 0\n"), r[0]);
    }

    @Test
    void udaddyExchangesDatagramsAcrossTwoProcesses() throws Exception {
        String[] r = pair(List.of("udaddy", "-b", "127.0.0.1", "-c", "2"),
                List.of("udaddy", "-s", "127.0.0.1", "-b", "127.0.0.2", "-c", "2"), "error: 1");
        assertTrue(r[1].contains("receiving data transfers\ndata transfers complete\ntest complete\nreturn status 0\n"),
                r[1]);
        assertTrue(r[0].contains("sending replies\ndata transfers complete\ntest complete\nreturn status 0\n"), r[0]);
    }

    @Test
    void rdmaServerAndClientAcrossTwoProcesses() throws Exception {
        String[] r = pair(List.of("rdma_server", "-s", "127.0.0.1", "-p", "%PORT%"),
                List.of("rdma_client", "-s", "127.0.0.1", "-p", "%PORT%"), "Connection refused");
        assertEquals("rdma_client: start\nrdma_client: end 0\n", r[1]);
        assertEquals("rdma_server: start\nrdma_server: end 0\n", r[0]);
    }

    @ParameterizedTest
    @ValueSource(strings = {"ib_send_bw", "ib_write_bw", "ib_read_bw", "ib_atomic_bw", "ib_send_lat", "ib_write_lat",
        "ib_read_lat", "ib_atomic_lat"})
    void perftestOverRdmaCmAcrossTwoProcesses(String tool) throws Exception {
        List<String> common = new ArrayList<>(List.of(tool, "-R", "-p", "%PORT%", "-n", "200"));
        if (!tool.startsWith("ib_atomic")) {
            common.addAll(List.of("-s", tool.endsWith("_bw") ? "65536" : "8"));
        }
        List<String> server = new ArrayList<>(common);
        server.addAll(List.of("-d", "rxe0"));
        List<String> client = new ArrayList<>(common);
        client.addAll(List.of("-d", "rxe1", "127.0.0.1"));
        String[] r = pair(server, client, "Unexpected CM event 8");
        assertTrue(r[1].lines().anyMatch(l -> l.matches("\\s*(\\d+)\\s+200\\s+.*")), "no result line in\n" + r[1]);
        assertTrue(r[1].contains(" Data ex. method : rdma_cm\n"), r[1]);
        assertTrue(r[1].contains("GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:00:00:02"), r[1]);
        assertTrue(r[0].contains(" Waiting for client rdma_cm QP to connect\n"), r[0]);
    }

    /**
     * Runs the server, waits (bounded) until its device holds its UDP port (its CM has opened QP1), then the
     * client, again while the client's output contains {@code notYet}; asserts both exit 0.
     *
     * @return {server output, client output}
     */
    private String[] pair(List<String> server, List<String> client, String notYet) throws Exception {
        int udp = freeUdpPort();
        String cmPort = Integer.toString(udp); // the CM port: any free number (a UDP-free one is as good as any)
        Path so = dir.resolve("server.out");
        Path co = dir.resolve("client.out");
        Process s = start(so, "rxe0=127.0.0.1@" + udp, subst(server, cmPort));
        try {
            awaitUdpBound(s, udp);
            String c = "";
            int rc = -1;
            for (int attempt = 0; attempt < 20; attempt++) {
                Process p = start(co, "rxe1=127.0.0.2@" + udp, subst(client, cmPort));
                try {
                    assertTrue(p.waitFor(TIMEOUT_S, TimeUnit.SECONDS), "client did not finish:\n" + Files.readString(co));
                    rc = p.exitValue();
                    c = Files.readString(co);
                } finally {
                    p.destroyForcibly();
                }
                if (!c.contains(notYet) || !s.isAlive()) {
                    break;
                }
            }
            assertTrue(s.waitFor(TIMEOUT_S, TimeUnit.SECONDS), "server did not finish:\n" + Files.readString(so));
            String sv = Files.readString(so);
            assertEquals(0, rc, "client:\n" + c + "\nserver:\n" + sv);
            assertEquals(0, s.exitValue(), "server:\n" + sv + "\nclient:\n" + c);
            return new String[] {sv, c};
        } finally {
            s.destroyForcibly();
        }
    }

    private static List<String> subst(List<String> args, String port) {
        return args.stream().map(a -> a.replace("%PORT%", port)).toList();
    }

    private Process start(Path output, String devices, List<String> args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.add("-Drdma4j.soft.devices=0");
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(Main.class.getName());
        cmd.addAll(args);
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(output.toFile());
        pb.environment().put("RDMA4J_DEVICES", devices);
        pb.environment().put("RDMA4J_LINKS", dir.resolve("no-links-file").toString());
        return pb.start();
    }

    /** Waits (bounded) until 127.0.0.1:{@code udp} is bound, looking at the kernel's table rather than probing. */
    private static void awaitUdpBound(Process server, int udp) throws Exception {
        String local = String.format("0100007F:%04X", udp);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_S);
        while (System.nanoTime() < deadline && server.isAlive()) {
            for (String line : Files.readAllLines(Path.of("/proc/net/udp"))) {
                String[] f = line.trim().split("\\s+");
                if (f.length > 1 && f[1].equals(local)) {
                    return;
                }
            }
            server.waitFor(20, TimeUnit.MILLISECONDS); // bounded wait on the process, not a sleep-as-sync
        }
    }

    private static int freeUdpPort() throws IOException {
        for (int i = 0; i < 50; i++) {
            try (DatagramSocket a = new DatagramSocket(new InetSocketAddress("127.0.0.1", 0))) {
                int p = a.getLocalPort();
                try {
                    new DatagramSocket(new InetSocketAddress("127.0.0.2", p)).close();
                    return p;
                } catch (IOException busy) {
                    // next
                }
            }
        }
        throw new IOException("no UDP port free on both 127.0.0.1 and 127.0.0.2");
    }
}
