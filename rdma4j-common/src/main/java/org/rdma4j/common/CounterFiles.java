// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;

/**
 * Where {@link CounterFile}s live, and how another process reads them.
 *
 * <p>The directory is {@code -Drdma4j.counters.dir}, else {@code $RDMA4J_COUNTERS_DIR}, else
 * {@code /dev/shm/rdma4j-<user>} (tmpfs, never written to disk) when {@code /dev/shm} exists, else
 * {@code <java.io.tmpdir>/rdma4j-<user>}. Each process writes in a subdirectory named by its PID, which it
 * removes when it exits; a reader skips, and removes, the subdirectory of a PID that no longer runs or that
 * now belongs to another process (its start time differs). {@code -Drdma4j.counters=false} turns
 * publishing off. Thread-safe.
 */
public final class CounterFiles {
    static final System.Logger LOG = System.getLogger("org.rdma4j.common");
    static final String SUFFIX = ".counters";
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();

    private static Path processDir;
    private static boolean processDirFailed;

    private CounterFiles() {
    }

    /**
     * One published counter group as a reader saw it.
     *
     * @param pid    the process that publishes it
     * @param label  what it counts, e.g. {@code rxe0/1}
     * @param names  the counters' names
     * @param values their values, in the same order
     * @param file   the file it was read from
     */
    public record Group(long pid, String label, List<String> names, List<Long> values, Path file) {
    }

    /** {@return whether this process publishes its counters (not {@code -Drdma4j.counters=false})} */
    public static boolean publishing() {
        return !"false".equalsIgnoreCase(System.getProperty("rdma4j.counters", "true"));
    }

    /** {@return the directory every process publishes under (see the class comment)} */
    public static Path directory() {
        String dir = System.getProperty("rdma4j.counters.dir");
        if (dir == null || dir.isEmpty()) {
            dir = System.getenv("RDMA4J_COUNTERS_DIR");
        }
        if (dir != null && !dir.isEmpty()) {
            return Path.of(dir);
        }
        String user = System.getProperty("user.name", "user").replaceAll("[^A-Za-z0-9._-]", "_");
        Path shm = Path.of("/dev/shm");
        Path base = Files.isDirectory(shm) && Files.isWritable(shm) ? shm : Path.of(System.getProperty("java.io.tmpdir"));
        return base.resolve("rdma4j-" + user);
    }

    /** {@return this process's subdirectory, created on first use; null when it cannot be} */
    static synchronized Path processDirectory() {
        if (processDir != null || processDirFailed) {
            return processDir;
        }
        Path root = directory();
        Path dir = root.resolve(Long.toString(ProcessHandle.current().pid()));
        try {
            Files.createDirectories(root);
            removeStale(root);
            if (Files.exists(dir)) {
                deleteTree(dir); // a previous process with our PID
            }
            Files.createDirectory(dir);
            Runtime.getRuntime().addShutdownHook(new Thread(() -> deleteTree(dir), "rdma4j-counter-files-exit"));
            processDir = dir;
        } catch (IOException | SecurityException e) {
            processDirFailed = true;
            LOG.log(System.Logger.Level.WARNING, () -> "rdma4j: counters not published under " + root + " (" + e
                    + "); 'rdma4j statistic' will not see this process. -Drdma4j.counters.dir=DIR chooses another place");
        }
        return processDir;
    }

    /**
     * Reads every counter group published under a directory by processes that still run, and removes what
     * dead processes left.
     *
     * @param root the directory ({@link #directory()})
     * @return the groups, by PID then label; empty when the directory does not exist
     */
    public static List<Group> read(Path root) {
        List<Group> out = new ArrayList<>();
        if (!Files.isDirectory(root)) {
            return out;
        }
        removeStale(root);
        try (DirectoryStream<Path> procs = Files.newDirectoryStream(root)) {
            for (Path proc : procs) {
                try (DirectoryStream<Path> files = Files.newDirectoryStream(proc, "*" + SUFFIX)) {
                    for (Path f : files) {
                        readGroup(f).ifPresent(out::add);
                    }
                } catch (IOException notADirectoryOrGone) {
                    // skip it
                }
            }
        } catch (IOException e) {
            return out;
        }
        out.sort(Comparator.comparingLong(Group::pid).thenComparing(Group::label).thenComparing(g -> g.file().toString()));
        return out;
    }

    static Optional<Group> readGroup(Path f) {
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ); Arena arena = Arena.ofConfined()) {
            long size = ch.size();
            if (size < CounterFile.NAMES_OFFSET) {
                return Optional.empty();
            }
            MemorySegment m = ch.map(FileChannel.MapMode.READ_ONLY, 0, size, arena);
            if ((long) LONG.getAcquire(m, 0L) != CounterFile.MAGIC || m.get(ValueLayout.JAVA_INT, 8) != CounterFile.VERSION) {
                return Optional.empty();
            }
            int n = m.get(ValueLayout.JAVA_INT, 12);
            long valuesOffset = CounterFile.valuesOffset(n);
            if (n < 0 || valuesOffset + 8L * n > size) {
                return Optional.empty();
            }
            long pid = m.get(ValueLayout.JAVA_LONG, 16);
            String label = getString(m, CounterFile.LABEL_OFFSET, CounterFile.LABEL_BYTES);
            List<String> names = new ArrayList<>(n);
            List<Long> values = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                names.add(getString(m, CounterFile.NAMES_OFFSET + (long) i * CounterFile.NAME_BYTES, CounterFile.NAME_BYTES));
                values.add((long) LONG.getOpaque(m, valuesOffset + 8L * i));
            }
            return Optional.of(new Group(pid, label, List.copyOf(names), List.copyOf(values), f));
        } catch (IOException | RuntimeException e) {
            return Optional.empty(); // removed while we read it, or not ours
        }
    }

    private static String getString(MemorySegment m, long offset, int max) {
        byte[] b = m.asSlice(offset, max).toArray(ValueLayout.JAVA_BYTE);
        int len = 0;
        while (len < b.length && b[len] != 0) {
            len++;
        }
        return new String(b, 0, len, StandardCharsets.UTF_8);
    }

    /** Removes the subdirectories of processes that no longer run. */
    private static void removeStale(Path root) {
        try (DirectoryStream<Path> procs = Files.newDirectoryStream(root)) {
            for (Path proc : procs) {
                long pid;
                try {
                    pid = Long.parseLong(proc.getFileName().toString());
                } catch (NumberFormatException notOurs) {
                    continue;
                }
                if (!alive(pid, proc)) {
                    deleteTree(proc);
                }
            }
        } catch (IOException e) {
            // nothing to clean
        }
    }

    /** A process runs with that PID and started when the files in its directory say it did. */
    private static boolean alive(long pid, Path proc) {
        Optional<ProcessHandle> h = ProcessHandle.of(pid);
        if (h.isEmpty() || !h.get().isAlive()) {
            return false;
        }
        long start = processStartMillis(h.get());
        try (Stream<Path> files = Files.list(proc)) {
            for (Path f : (Iterable<Path>) files::iterator) {
                if (!f.toString().endsWith(SUFFIX)) {
                    continue;
                }
                try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ); Arena arena = Arena.ofConfined()) {
                    if (ch.size() < 32) {
                        continue;
                    }
                    MemorySegment m = ch.map(FileChannel.MapMode.READ_ONLY, 0, 32, arena);
                    long written = m.get(ValueLayout.JAVA_LONG, 24);
                    // Start times are read from /proc with a clock tick's precision: allow a second.
                    return start == 0 || written == 0 || Math.abs(written - start) < 1000;
                } catch (IOException | RuntimeException e) {
                    // look at the next file
                }
            }
        } catch (IOException e) {
            return true;
        }
        return true;
    }

    static long processStartMillis(ProcessHandle h) {
        return h.info().startInstant().map(Instant::toEpochMilli).orElse(0L);
    }

    static void delete(Path p) {
        try {
            Files.deleteIfExists(p);
        } catch (IOException e) {
            // gone or not ours: nothing to do
        }
    }

    private static void deleteTree(Path dir) {
        try (Stream<Path> s = Files.list(dir)) {
            s.forEach(CounterFiles::delete);
        } catch (IOException e) {
            // already gone
        }
        delete(dir);
    }
}
