// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Assumptions;

/**
 * Compiles and runs a small C program against the installed rdma-core headers with the machine's gcc, for
 * tests that compare this provider's hand-written layouts and constants with the real ones. Skips (with the
 * reason) when gcc or the headers are missing, unless {@code RDMA4J_REQUIRE_NATIVE_HEADERS=1}, which
 * {@code .ci/run} sets after installing them, so CI never skips.
 */
final class CProbe {
    private CProbe() {
    }

    static boolean required() {
        return "1".equals(System.getenv("RDMA4J_REQUIRE_NATIVE_HEADERS"));
    }

    /** Skips or fails when the toolchain is missing. */
    static void assumeToolchain(String... headers) {
        List<String> missing = new ArrayList<>();
        if (!onPath("gcc")) {
            missing.add("gcc");
        }
        for (String h : headers) {
            if (!Files.exists(Path.of("/usr/include", h))) {
                missing.add("/usr/include/" + h);
            }
        }
        if (!missing.isEmpty()) {
            String why = "missing " + missing + " (apt-get install gcc libibverbs-dev librdmacm-dev)";
            if (required()) {
                fail("RDMA4J_REQUIRE_NATIVE_HEADERS=1 but " + why);
            }
            Assumptions.abort("skipped: " + why);
        }
    }

    private static boolean onPath(String exe) {
        for (String dir : System.getenv().getOrDefault("PATH", "/usr/bin:/bin").split(":")) {
            if (Files.isExecutable(Path.of(dir, exe))) {
                return true;
            }
        }
        return false;
    }

    /**
     * @param source a C program
     * @param args   its arguments
     * @return its standard output
     */
    static String run(String source, String... args) throws IOException, InterruptedException {
        Path dir = Files.createTempDirectory("rdma4j-cprobe");
        try {
            Path c = dir.resolve("probe.c");
            Path exe = dir.resolve("probe");
            Files.writeString(c, source);
            exec(List.of("gcc", "-std=gnu11", "-Wall", "-Werror", "-o", exe.toString(), c.toString()), "gcc");
            List<String> cmd = new ArrayList<>();
            cmd.add(exe.toString());
            cmd.addAll(List.of(args));
            return exec(cmd, "probe");
        } finally {
            try (var s = Files.list(dir)) {
                for (Path p : s.toList()) {
                    Files.deleteIfExists(p);
                }
            }
            Files.deleteIfExists(dir);
        }
    }

    private static String exec(List<String> cmd, String what) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        byte[] out = p.getInputStream().readAllBytes();
        if (!p.waitFor(120, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            fail(what + " did not finish in 120 s");
        }
        String s = new String(out, StandardCharsets.UTF_8);
        assertEquals(0, p.exitValue(), () -> what + " failed:\n" + s);
        return s;
    }

    /** @return "key value..." lines as key → rest */
    static Map<String, String> lines(String out) {
        Map<String, String> m = new LinkedHashMap<>();
        for (String line : out.split("\n")) {
            int sp = line.indexOf(' ');
            if (sp > 0) {
                m.put(line.substring(0, sp), line.substring(sp + 1).trim());
            }
        }
        return m;
    }
}
