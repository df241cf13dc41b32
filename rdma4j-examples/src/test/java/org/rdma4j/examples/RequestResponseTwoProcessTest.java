// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.examples;

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

/**
 * The example as a user runs it: a server process and a client process, each with one RoCE device on
 * loopback (127.0.0.1 and 127.0.0.2, one UDP port), connected through the CM; the client's requests come
 * back in upper case and both processes exit 0.
 */
class RequestResponseTwoProcessTest {
    private static final long TIMEOUT_S = 60;

    @TempDir
    Path dir;

    @Test
    void theClientsRequestsComeBackUpperCased() throws Exception {
        int udp = freeUdpPort();
        Path serverOut = dir.resolve("server.out");
        Path clientOut = dir.resolve("client.out");
        Process server = start(serverOut, "rxe0=127.0.0.1@" + udp, "server", "127.0.0.1", "7471", "1");
        try {
            awaitLine(server, serverOut, "listening on");
            Process client = start(clientOut, "rxe1=127.0.0.2@" + udp, "client", "127.0.0.2", "127.0.0.1", "7471",
                    "hello", "remote", "memory");
            try {
                assertTrue(client.waitFor(TIMEOUT_S, TimeUnit.SECONDS), () -> "client finishes:\n" + read(clientOut));
                assertEquals(0, client.exitValue(), () -> read(clientOut));
            } finally {
                client.destroyForcibly();
            }
            assertTrue(server.waitFor(TIMEOUT_S, TimeUnit.SECONDS), () -> "server finishes:\n" + read(serverOut));
            assertEquals(0, server.exitValue(), () -> read(serverOut));
        } finally {
            server.destroyForcibly();
        }
        List<String> client = Files.readAllLines(clientOut);
        assertTrue(client.containsAll(List.of("hello -> HELLO", "remote -> REMOTE", "memory -> MEMORY")),
                () -> String.join("\n", client));
        String s = read(serverOut);
        assertTrue(s.contains("connected: ") && s.contains("answered 3 requests from "), s);
    }

    private static Process start(Path output, String devices, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-Drdma4j.soft.devices=0",
                "-cp", System.getProperty("java.class.path"), RequestResponse.class.getName()));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(output.toFile());
        pb.environment().put("RDMA4J_DEVICES", devices);
        pb.environment().put("RDMA4J_LINKS", output.resolveSibling("no-links-file").toString());
        return pb.start();
    }

    private static void awaitLine(Process p, Path output, String text) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_S);
        while (System.nanoTime() < deadline) {
            if (read(output).contains(text)) {
                return;
            }
            if (p.waitFor(10, TimeUnit.MILLISECONDS)) {
                break;
            }
        }
        throw new AssertionError("no '" + text + "' from the server:\n" + read(output));
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

    private static String read(Path p) {
        try {
            return Files.readString(p);
        } catch (IOException e) {
            return "(" + e + ")";
        }
    }
}
