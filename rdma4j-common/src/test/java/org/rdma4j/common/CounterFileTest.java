// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Counter files: what one process publishes another reads by name, values move, the file goes on close,
 * and a reader removes what a dead process left. (Two live processes: StatisticTwoProcessTest in tools.)
 */
class CounterFileTest {
    private static Path root;
    private static String previous;

    @BeforeAll
    static void setUp() throws Exception {
        root = Files.createTempDirectory("rdma4j-counters-test");
        previous = System.getProperty("rdma4j.counters.dir");
        System.setProperty("rdma4j.counters.dir", root.toString());
    }

    @AfterAll
    static void tearDown() {
        if (previous == null) {
            System.clearProperty("rdma4j.counters.dir");
        } else {
            System.setProperty("rdma4j.counters.dir", previous);
        }
    }

    @Test
    void shouldPublishNamesAndValuesAndRemoveTheFileOnClose() {
        CounterFile f = CounterFile.create("dev0/1", List.of("sent_pkts", "rcvd_pkts", "a_name_that_is_rather_long_for_a_counter"));
        try {
            assertNotNull(f.path(), "published under " + root);
            f.increment(0);
            f.add(1, 41);
            f.increment(1);
            CounterFiles.Group g = CounterFiles.read(root).stream().filter(x -> x.file().equals(f.path())).findFirst()
                    .orElseThrow();
            assertEquals(ProcessHandle.current().pid(), g.pid());
            assertEquals("dev0/1", g.label());
            assertEquals(List.of("sent_pkts", "rcvd_pkts", "a_name_that_is_rather_long_for_a_counter"), g.names());
            assertEquals(List.of(1L, 42L, 0L), g.values());
            f.increment(0);
            assertEquals(2L, CounterFiles.readGroup(f.path()).orElseThrow().values().get(0), "read while it moves");
        } finally {
            f.close();
        }
        assertFalse(Files.exists(f.path()), "close removes the file");
        assertEquals(2, f.get(0), "the counters stay usable");
    }

    @Test
    void shouldRemoveWhatADeadProcessLeft() throws Exception {
        Process p = new ProcessBuilder("true").start();
        assertTrue(p.waitFor(30, TimeUnit.SECONDS));
        Path dead = root.resolve(Long.toString(p.pid()));
        Files.createDirectories(dead);
        Files.writeString(dead.resolve("x-1.counters"), "left behind");
        CounterFiles.read(root);
        assertFalse(Files.exists(dead), "a reader removes a dead process's directory");
    }

    @Test
    void shouldKeepCountingInMemoryWhenPublishingIsOff() {
        System.setProperty("rdma4j.counters", "false");
        try (CounterFile f = CounterFile.create("dev1/1", List.of("x"))) {
            assertEquals(null, f.path());
            f.add(0, 5);
            assertEquals(5, f.get(0));
        } finally {
            System.clearProperty("rdma4j.counters");
        }
    }

    @Test
    void shouldLetABurstThroughAndCountTheRest() {
        RecordingLogger sink = new RecordingLogger();
        RateLimitedLogger l = new RateLimitedLogger(sink, 3, TimeUnit.HOURS.toNanos(1));
        int logged = 0;
        for (int i = 0; i < 10; i++) {
            final int n = i;
            logged += l.log(System.Logger.Level.WARNING, () -> "drop " + n) ? 1 : 0;
        }
        assertEquals(3, logged);
        assertEquals(List.of("drop 0", "drop 1", "drop 2"), sink.messages);
        assertEquals(7, l.suppressed());
    }

    /** A System.Logger that keeps what it is given. */
    private static final class RecordingLogger implements System.Logger {
        final java.util.List<String> messages = new java.util.ArrayList<>();

        @Override
        public String getName() {
            return "test";
        }

        @Override
        public boolean isLoggable(Level level) {
            return true;
        }

        @Override
        public void log(Level level, java.util.ResourceBundle bundle, String msg, Throwable thrown) {
            messages.add(msg);
        }

        @Override
        public void log(Level level, java.util.ResourceBundle bundle, String format, Object... params) {
            messages.add(format);
        }
    }
}
