// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectPackage;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.engine.discovery.DiscoverySelectors;
import org.junit.platform.engine.support.descriptor.ClassSource;
import org.junit.platform.engine.support.descriptor.MethodSource;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.TagFilter;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;

/**
 * Runs JUnit suites where Maven is not (the VM's guest, on its kernel rxe0 and siw0): the JUnit Platform
 * launcher over the class path, one line per test (PASS/FAIL/SKIP with the reason), a table per class and
 * "N passed, N failed, N skipped". Exit status 1 on any failure.
 *
 * <pre>java -cp 'test-classes:lib/*' -Drdma4j.ibverbs.test.device=rxe0 org.rdma4j.ibverbs.GuestTests
 *     [class or package names ...]</pre>
 * With no argument it runs the package {@code org.rdma4j.ibverbs}. Tests tagged {@code slow} (the {@code -Pslow}
 * tier: the random-operation properties' {@code ...AtLength} variants) are left out as in the default Maven run;
 * {@code -Drdma4j.guest.excludeTags=} (empty) runs them too.
 */
public final class GuestTests {
    private GuestTests() {
    }

    /** Per-class tallies. */
    private static final class Tally {
        int passed;
        int failed;
        int skipped;
        final List<String> failures = new ArrayList<>();
    }

    /**
     * @param args fully qualified class or package names
     */
    public static void main(String[] args) {
        PrintStream out = System.out;
        LauncherDiscoveryRequestBuilder b = LauncherDiscoveryRequestBuilder.request();
        if (args.length == 0) {
            b.selectors(selectPackage("org.rdma4j.ibverbs"));
        }
        for (String a : args) {
            if (a.contains("#")) {
                b.selectors(DiscoverySelectors.selectMethod(a));
            } else if (Character.isUpperCase(a.charAt(a.lastIndexOf('.') + 1))) {
                b.selectors(selectClass(a));
            } else {
                b.selectors(selectPackage(a));
            }
        }
        String exclude = System.getProperty("rdma4j.guest.excludeTags", "slow");
        if (!exclude.isBlank()) {
            b.filters(TagFilter.excludeTags(exclude.split(",")));
        }
        LauncherDiscoveryRequest req = b.configurationParameter("junit.jupiter.extensions.autodetection.enabled", "false")
                .build();
        Map<String, Tally> byClass = new TreeMap<>();
        TestExecutionListener listener = new TestExecutionListener() {
            private String cls(TestIdentifier id) {
                Optional<org.junit.platform.engine.TestSource> s = id.getSource();
                if (s.isPresent() && s.get() instanceof MethodSource m) {
                    return m.getClassName();
                }
                if (s.isPresent() && s.get() instanceof ClassSource c) {
                    return c.getClassName();
                }
                return id.getLegacyReportingName();
            }

            private String name(TestIdentifier id) {
                String c = cls(id);
                return c.substring(c.lastIndexOf('.') + 1) + " " + id.getDisplayName();
            }

            @Override
            public void executionSkipped(TestIdentifier id, String reason) {
                Tally t = byClass.computeIfAbsent(cls(id), k -> new Tally());
                t.skipped++;
                out.println("SKIP " + name(id) + ": " + reason);
            }

            @Override
            public void executionFinished(TestIdentifier id, TestExecutionResult r) {
                if (!id.isTest() && r.getStatus() == TestExecutionResult.Status.SUCCESSFUL) {
                    return;
                }
                Tally t = byClass.computeIfAbsent(cls(id), k -> new Tally());
                switch (r.getStatus()) {
                    case SUCCESSFUL -> {
                        t.passed++;
                        out.println("PASS " + name(id));
                    }
                    case ABORTED -> {
                        t.skipped++;
                        out.println("SKIP " + name(id) + ": " + r.getThrowable().map(Throwable::getMessage).orElse(""));
                    }
                    case FAILED -> {
                        t.failed++;
                        String why = r.getThrowable().map(x -> x.getClass().getSimpleName() + ": " + x.getMessage())
                                .orElse("");
                        t.failures.add(id.getDisplayName() + ": " + why);
                        out.println("FAIL " + name(id) + ": " + why);
                        r.getThrowable().ifPresent(x -> x.printStackTrace(out));
                    }
                }
                out.flush();
            }
        };
        LauncherFactory.create().execute(req, listener);
        int p = 0;
        int f = 0;
        int s = 0;
        out.println();
        out.printf("%-48s %7s %7s %7s%n", "suite", "passed", "failed", "skipped");
        for (Map.Entry<String, Tally> e : byClass.entrySet()) {
            Tally t = e.getValue();
            out.printf("%-48s %7d %7d %7d%n", e.getKey().substring(e.getKey().lastIndexOf('.') + 1), t.passed, t.failed,
                    t.skipped);
            p += t.passed;
            f += t.failed;
            s += t.skipped;
        }
        out.println(p + " passed, " + f + " failed, " + s + " skipped");
        System.exit(f == 0 ? 0 : 1);
    }
}
