// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Every command of the launcher exits as soon as its work is done (issue 16 item 9: each one used to wait
 * 5 s in a shutdown hook for a report only perftest produced). Each command runs through
 * {@link Main#main} in a child JVM whose shutdown hook would wait an hour for a running tool
 * ({@code -Drdma4j.tools.stopWaitMs}): a command that exits within the generous bound below therefore did
 * not engage the hook's wait at all, whatever the machine's load. The bound only keeps a regression from
 * hanging the build.
 */
class CommandExitTest {
    /** Not a performance limit: it only turns a hang into a failure. */
    private static final long BOUND_S = 60;
    /** The hook's wait for a running tool in the child JVMs: far beyond {@link #BOUND_S}. */
    private static final String HOOK_WAIT_MS = Long.toString(TimeUnit.HOURS.toMillis(1));

    @TempDir
    Path dir;

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
        "help|0",
        "devices|0",
        "devinfo|0",
        "link|0",
        "link show|0",
        "rc_pingpong --loopback -n 10|0",
        "ib_write_bw --loopback -s 64 -n 20|0",
        "rc_pingpong --no-such-option|1",
        "ib_write_bw --no-such-option|1",
        "devinfo -d nosuchdev|255", // ibv_devinfo: rc = -1
        "frobnicate|1",
    })
    void exitsWhenItsWorkIsDone(String command, int expectedRc) throws Exception {
        Path out = dir.resolve("out.txt");
        Process p = start(out, command.split(" "));
        try {
            assertTrue(p.waitFor(BOUND_S, TimeUnit.SECONDS),
                    "'" + command + "' had not exited after " + BOUND_S + " s: a shutdown hook waits for it\n"
                            + Files.readString(out));
            assertEquals(expectedRc, p.exitValue(), Files.readString(out));
        } finally {
            p.destroyForcibly();
        }
    }

    /**
     * The control: while a tool runs, SIGTERM (as Ctrl-C) does engage the hook, which stops the tool; the
     * tool then reports and the JVM exits long before the hook's hour is over.
     */
    @Test
    void aSignalStopsARunningToolThroughTheHook() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        Path out = dir.resolve("server.txt");
        Process p = start(out, "ib_write_bw", "-p", Integer.toString(port));
        try {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(BOUND_S);
            while (!Files.readString(out).contains("Waiting for client") && System.nanoTime() < deadline
                    && p.isAlive()) {
                p.waitFor(20, TimeUnit.MILLISECONDS); // bounded wait on the process, not a sleep-as-sync
            }
            assertTrue(Files.readString(out).contains("Waiting for client"), Files.readString(out));
            p.destroy(); // SIGTERM: the JVM runs its shutdown hooks
            assertTrue(p.waitFor(BOUND_S, TimeUnit.SECONDS), "the stopped server did not exit\n" + Files.readString(out));
            assertTrue(Files.readString(out).contains("Stopped (Ctrl-C)"), Files.readString(out));
        } finally {
            p.destroyForcibly();
        }
    }

    /** The hook's own rule, in this JVM: nothing running, nothing to wait for. */
    @Test
    void theHookWaitsOnlyForARunningTool() {
        StopSignal s = new StopSignal();
        assertFalse(s.onShutdown());
        assertFalse(s.stopped());
        s.enter();
        s.exit();
        assertFalse(s.onShutdown(), "a tool that returned is not waited for");
        assertFalse(s.stopped());
    }

    private Process start(Path output, String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.add("-Drdma4j.tools.stopWaitMs=" + HOOK_WAIT_MS);
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(Main.class.getName());
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(output.toFile());
        pb.environment().remove("RDMA4J_DEVICES");
        pb.environment().put("RDMA4J_LINKS", dir.resolve("no-links-file").toString());
        return pb.start();
    }
}
