// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Two processes in two network namespaces joined by a veth (path MTU 1024), every RoCEv2 packet of both
 * directions impaired by {@code rdma4j impair} on an NFQUEUE ({@code bench/lossy-pair}), the impairment
 * rows of issue 16 item 13: 64 KiB messages (64 packets) at 5 % loss, at 5 % reordering, and with loss,
 * duplication, corruption and reordering at once. {@code rc_pingpong --verify} checks every echo byte
 * for byte; {@code ib_write_bw} must report its bandwidth. Needs root, iproute2 and iptables ({@code .ci/run}
 * installs them); skipped otherwise. How fast recovery is, is measured by {@code bench/lossy-pair} runs
 * (docs/benchmarks.md), not here.
 */
class ImpairedTwoProcessTest {
    private static final long TIMEOUT_S = 300;
    private static Path script;

    @TempDir
    Path dir;

    @BeforeAll
    static void needs() throws Exception {
        Assumptions.assumeTrue("root".equals(System.getProperty("user.name")), "needs root");
        Assumptions.assumeTrue(run("iptables", "-V") == 0 && run("ip", "-V") == 0, "needs iptables and iproute2");
        script = Path.of(System.getProperty("user.dir")).resolveSibling("bench").resolve("lossy-pair");
        Assumptions.assumeTrue(Files.isExecutable(script), "no " + script);
    }

    @ParameterizedTest(name = "{0}: {1}")
    @CsvSource(delimiter = '|', value = {
        "loss|loss 5%",
        "reorder|delay 1ms reorder 5%",
        "all four|loss 5% duplicate 2% corrupt 1% delay 1ms reorder 5%"})
    void rcPingpong64KiBVerifiesEveryEcho(String row, String netem) throws Exception {
        int n = 20;
        String out = lossyPair(netem, "rc_pingpong", "-s", "65536", "-n", Integer.toString(n), "--verify");
        assertTrue(out.contains(n + " iters in"), out);
        assertTrue(out.contains("verified " + n + " echoes of 65536 bytes: all equal to what was sent"), out);
        impaired(out, netem);
    }

    @ParameterizedTest(name = "{0}: {1}")
    @CsvSource(delimiter = '|', value = {
        "loss|loss 5%",
        "reorder|delay 1ms reorder 5%",
        "all four|loss 5% duplicate 2% corrupt 1% delay 1ms reorder 5%"})
    void ibWriteBw64KiBCompletes(String row, String netem) throws Exception {
        String out = lossyPair(netem, "ib_write_bw", "-s", "65536", "-n", "200");
        assertTrue(out.lines().anyMatch(l -> l.matches("\\s*65536\\s+200\\s+.*")), "no result line in\n" + out);
        impaired(out, netem);
    }

    /** Both impairers saw traffic and did what they were asked. */
    private static void impaired(String out, String netem) {
        for (String dirn : List.of("A->B", "B->A")) {
            Matcher m = Pattern.compile("# " + dirn + ": (\\d+) packets, (\\d+) lost, (\\d+) duplicated, (\\d+) corrupted,"
                    + " (\\d+) delayed, (\\d+) reordered").matcher(out);
            assertTrue(m.find(), "no impairer report for " + dirn + " in\n" + out);
            long packets = Long.parseLong(m.group(1));
            assertTrue(packets > 100, dirn + ": " + m.group());
            if (netem.contains("loss")) {
                assertTrue(Long.parseLong(m.group(2)) > 0, dirn + " lost nothing: " + m.group());
            }
            if (netem.contains("reorder")) {
                assertTrue(Long.parseLong(m.group(6)) > 0, dirn + " reordered nothing: " + m.group());
            }
        }
    }

    private String lossyPair(String netem, String tool, String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(script.toString(), "--netem", netem, "--seed", "7", tool));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true)
                .redirectOutput(dir.resolve("out").toFile());
        pb.environment().put("RDMA4J_CMD", String.join(" ", Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-Drdma4j.soft.devices=1", "-cp", System.getProperty("java.class.path"),
                Main.class.getName()));
        pb.environment().put("ROW_TIMEOUT", Long.toString(TIMEOUT_S - 60));
        pb.environment().put("LOSSY_NS", "lossrec-t");
        Process p = pb.start();
        try {
            boolean ended = p.waitFor(TIMEOUT_S, TimeUnit.SECONDS);
            if (!ended) {
                p.destroy(); // SIGTERM: the script ends its children and removes its namespaces
                p.waitFor(30, TimeUnit.SECONDS);
            }
            String out = Files.readString(dir.resolve("out"));
            assertTrue(ended, "bench/lossy-pair did not end within " + TIMEOUT_S + " s:\n" + out);
            assertEquals(0, p.exitValue(), out);
            return out;
        } finally {
            p.destroyForcibly();
        }
    }

    private static int run(String... cmd) throws InterruptedException {
        try {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD)
                    .start();
            if (!p.waitFor(30, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return -1;
            }
            return p.exitValue();
        } catch (IOException noBinary) {
            return -1;
        }
    }
}
