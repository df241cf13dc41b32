// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 16 item 10: the README's RoCE example, run exactly as the README writes it: the command block under
 * "RoCEv2 devices" is read from README.md, and each {@code ./rdma4j ...} line runs as its own process
 * (this module's classes instead of the launcher's jar; the links file in a temporary directory instead
 * of the user's home). The line the README marks as the server runs in the background until it listens,
 * as in its own terminal; the client then runs against it. Both ends must finish their 1,000 iterations.
 *
 * <p>The README uses the default ports (UDP 4791, TCP 18515). As root the processes run in a network
 * namespace of their own (its own loopback), so another test or tool on this host cannot collide with
 * them; without root they run on the host's loopback.
 */
class ReadmeTwoProcessTest {
    private static final long TIMEOUT_S = 180;
    private static final String SECTION = "### RoCEv2 devices";

    @TempDir
    Path dir;

    private String netns;
    private final List<Process> started = new ArrayList<>();

    @AfterEach
    void cleanUp() throws Exception {
        for (Process p : started) {
            p.destroyForcibly(); // only the processes this test started, by their handle
            p.waitFor(10, TimeUnit.SECONDS);
        }
        if (netns != null) {
            exec("ip", "netns", "del", netns);
        }
    }

    /** @return the README's command lines of the RoCE section, without the prose */
    static List<String> readmeCommands() throws IOException {
        Path readme = Path.of(System.getProperty("user.dir")).resolveSibling("README.md");
        if (!Files.isRegularFile(readme)) {
            readme = Path.of("README.md");
        }
        List<String> lines = Files.readAllLines(readme);
        int at = 0;
        while (at < lines.size() && !lines.get(at).startsWith(SECTION)) {
            at++;
        }
        assertTrue(at < lines.size(), "README.md has no '" + SECTION + "' section");
        int open = at + 1;
        while (open < lines.size() && !lines.get(open).equals("```")) {
            open++;
        }
        List<String> commands = new ArrayList<>();
        for (int i = open + 1; i < lines.size() && !lines.get(i).equals("```"); i++) {
            if (!lines.get(i).isBlank()) {
                commands.add(lines.get(i));
            }
        }
        assertFalse(commands.isEmpty(), "no command block after '" + SECTION + "'");
        return commands;
    }

    /** One README line: environment assignments, the rdma4j arguments, and its comment. */
    record Line(Map<String, String> env, List<String> args, String comment) {
        static Line parse(String text) {
            int hash = text.indexOf(" #");
            String comment = hash >= 0 ? text.substring(hash + 2).trim() : "";
            List<String> words = new ArrayList<>(List.of((hash >= 0 ? text.substring(0, hash) : text).trim()
                    .split("\\s+")));
            Map<String, String> env = new LinkedHashMap<>();
            while (!words.isEmpty() && words.get(0).matches("[A-Z0-9_]+=.*")) {
                String w = words.remove(0);
                env.put(w.substring(0, w.indexOf('=')), w.substring(w.indexOf('=') + 1).replace("\"", ""));
            }
            assertEquals("./rdma4j", words.get(0), "a README line that is not an rdma4j command: " + text);
            words.remove(0);
            return new Line(env, words, comment);
        }

        boolean server() {
            return comment.contains("the server");
        }
    }

    @Test
    void theReadmesRoceExampleRunsAsTwoProcesses() throws Exception {
        List<Line> lines = readmeCommands().stream().map(Line::parse).toList();
        assertTrue(lines.stream().anyMatch(Line::server), "the README marks no line as the server: " + lines);
        isolate();
        Process server = null;
        Path serverOut = null;
        int n = 0;
        for (Line l : lines) {
            Path out = dir.resolve("line" + ++n + ".out");
            Process p = start(out, l);
            if (l.server()) {
                server = p;
                serverOut = out;
                awaitListening(p, out, 18515);
                whileTheServerHoldsItsDevice(l);
                continue;
            }
            assertTrue(p.waitFor(TIMEOUT_S, TimeUnit.SECONDS), "'" + String.join(" ", l.args()) + "' did not end\n"
                    + Files.readString(out));
            String text = Files.readString(out);
            assertEquals(0, p.exitValue(), String.join(" ", l.args()) + ":\n" + text
                    + (serverOut != null ? "\nserver:\n" + Files.readString(serverOut) : ""));
            if (l.args().get(0).equals("rc_pingpong")) {
                assertTrue(text.contains("1000 iters in"), text);
            }
            if (l.args().equals(List.of("link"))) {
                assertTrue(text.contains("link rxe0/1 state ACTIVE") && text.contains("link rxe1/1 state ACTIVE"), text);
            }
        }
        assertTrue(server != null && server.waitFor(TIMEOUT_S, TimeUnit.SECONDS), "the server did not end");
        String s = Files.readString(serverOut);
        assertEquals(0, server.exitValue(), s);
        assertTrue(s.contains("1000 iters in"), s);
    }

    /**
     * What users expect from {@code rdma link} while a process uses a device: other processes still list
     * and query it, and one that wants to use it too is told who has it.
     */
    private void whileTheServerHoldsItsDevice(Line server) throws Exception {
        String dev = server.args().get(server.args().indexOf("-d") + 1);
        Path q = dir.resolve("devinfo.out");
        Process info = start(q, new Line(Map.of(), List.of("devinfo", "-d", dev), ""));
        assertTrue(info.waitFor(TIMEOUT_S, TimeUnit.SECONDS));
        assertEquals(0, info.exitValue(), Files.readString(q));
        assertTrue(Files.readString(q).contains("PORT_ACTIVE"), Files.readString(q));
        Path second = dir.resolve("second.out");
        List<String> args = new ArrayList<>(server.args());
        args.addAll(List.of("-p", "18516"));
        Process p = start(second, new Line(Map.of(), args, ""));
        assertTrue(p.waitFor(TIMEOUT_S, TimeUnit.SECONDS));
        String text = Files.readString(second);
        assertEquals(1, p.exitValue(), text);
        assertTrue(text.contains("EADDRINUSE") && text.contains(dev) && text.contains("another process"), text);
    }

    /** Root: a network namespace of this test's own, with its loopback up. */
    private void isolate() throws Exception {
        if (!"root".equals(System.getProperty("user.name")) || exec("ip", "-V") != 0) {
            return;
        }
        String name = "rdma4j-readme-" + ProcessHandle.current().pid();
        if (exec("ip", "netns", "add", name) != 0) {
            return;
        }
        netns = name;
        assertEquals(0, exec("ip", "-n", name, "link", "set", "lo", "up"));
    }

    private Process start(Path output, Line l) throws IOException {
        List<String> cmd = new ArrayList<>();
        if (netns != null) {
            cmd.addAll(List.of("ip", "netns", "exec", netns));
        }
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(Main.class.getName());
        cmd.addAll(l.args());
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(output.toFile());
        pb.environment().remove("RDMA4J_DEVICES");
        pb.environment().put("RDMA4J_LINKS", dir.resolve("links").toString());
        pb.environment().putAll(l.env());
        Process p = pb.start();
        started.add(p);
        return p;
    }

    /** Waits (bounded) until the server listens: its own namespace's socket table, not a probe. */
    private void awaitListening(Process server, Path out, int tcp) throws Exception {
        String port = String.format(":%04X ", tcp);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_S);
        while (System.nanoTime() < deadline) {
            assertTrue(server.isAlive(), "the server ended:\n" + Files.readString(out));
            // /proc/<pid>/net/tcp is the table of the process's network namespace
            for (String table : List.of("tcp", "tcp6")) {
                Path t = Path.of("/proc", Long.toString(server.pid()), "net", table);
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
        throw new AssertionError("the server did not listen on TCP " + tcp + ":\n" + Files.readString(out));
    }

    private static int exec(String... cmd) throws Exception {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD)
                .start();
        if (!p.waitFor(30, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            return -1;
        }
        return p.exitValue();
    }
}
