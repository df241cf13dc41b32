// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code rdma4j statistic show} in one process reads the counters of another while it runs: a child JVM
 * runs {@code ib_write_bw --loopback}, this test reads its {@code soft0/1} counters twice and sees them
 * grow, and after the child exits its counter files are gone.
 */
class StatisticTwoProcessTest {
    private static final long TIMEOUT_S = 60;

    @TempDir
    Path dir;

    @Test
    void shouldReadTheCountersOfARunningProcessAndForgetThemWhenItExits() throws Exception {
        Path counters = dir.resolve("counters");
        Path output = dir.resolve("child.out");
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        ProcessBuilder pb = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-Drdma4j.counters.dir=" + counters,
                "-cp", System.getProperty("java.class.path"), Main.class.getName(),
                "ib_write_bw", "--loopback", "-s", "4096", "-D", "30", "-p", Integer.toString(port))
                .redirectErrorStream(true).redirectOutput(output.toFile());
        pb.environment().put("RDMA4J_LINKS", dir.resolve("no-links-file").toString());
        pb.environment().remove("RDMA4J_DEVICES");
        Process child = pb.start();
        String pid = Long.toString(child.pid());
        String previous = System.getProperty("rdma4j.counters.dir");
        System.setProperty("rdma4j.counters.dir", counters.toString());
        try {
            long first = awaitSentPackets(child, pid, 1, output);
            long later = awaitSentPackets(child, pid, first + 1, output);
            assertTrue(later > first, "counters move while the process runs: " + first + " then " + later);

            String json = statistic(0, "statistic", "show", "link", "soft0/1", "-p", pid, "-j");
            assertTrue(json.startsWith("[{\"ifname\":\"soft0\",\"port\":1,\"pid\":" + pid + ",\"sent_pkts\":"), json);
            assertTrue(json.contains("\"rcvd_pkts\":"), json);

            child.destroy(); // SIGTERM: the exit hook removes the process's directory
            assertTrue(child.waitFor(TIMEOUT_S, TimeUnit.SECONDS), "the child exits");
            assertFalse(Files.exists(counters.resolve(pid)), "the exiting process removed its counter files");
            assertEquals("", statistic(0, "statistic", "show", "-p", pid), "nothing left of the process");
            assertEquals("", statistic(1, "statistic", "show", "link", "soft0/1", "-p", pid), "a named link that is gone fails");
        } finally {
            if (previous == null) {
                System.clearProperty("rdma4j.counters.dir");
            } else {
                System.setProperty("rdma4j.counters.dir", previous);
            }
            child.destroyForcibly();
        }
    }

    /** Reads the child's soft0/1 sent_pkts until it is at least {@code atLeast} (bounded). */
    private static long awaitSentPackets(Process child, String pid, long atLeast, Path output) throws IOException {
        Pattern p = Pattern.compile("^link soft0/1 pid " + pid + " sent_pkts (\\d+) rcvd_pkts (\\d+) ", Pattern.MULTILINE);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_S);
        String last = "";
        for (int i = 0; i < 100_000 && System.nanoTime() < deadline; i++) {
            assertTrue(child.isAlive(), () -> "the child runs until the test has read its counters:\n" + read(output));
            last = statistic(0, "statistic", "show", "-p", pid);
            Matcher m = p.matcher(last);
            if (m.find() && Long.parseLong(m.group(1)) >= atLeast) {
                return Long.parseLong(m.group(1));
            }
            Thread.onSpinWait();
        }
        throw new AssertionError("no soft0/1 sent_pkts >= " + atLeast + " for pid " + pid + "; last output:\n" + last
                + "\nchild:\n" + read(output));
    }

    private static String statistic(int expectedRc, String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int rc = Main.run(args, new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8));
        assertEquals(expectedRc, rc, () -> List.of(args) + ": " + err.toString(StandardCharsets.UTF_8));
        return out.toString(StandardCharsets.UTF_8);
    }

    private static String read(Path p) {
        try {
            return Files.readString(p);
        } catch (IOException e) {
            return "(" + e + ")";
        }
    }
}
