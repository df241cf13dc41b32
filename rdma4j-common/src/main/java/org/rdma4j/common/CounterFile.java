// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.lang.ref.Cleaner;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A named group of 64-bit counters (one device port's, say) that other processes can read while this one
 * runs: the values live in a file under {@link CounterFiles#directory()} (tmpfs {@code /dev/shm} on Linux)
 * mapped into memory, the way Aeron's CnC file publishes a media driver's counters. Incrementing costs a
 * memory write, as a {@code long[]} would; {@code rdma4j statistic show} reads the files of every running
 * process with {@link CounterFiles#read}.
 *
 * <p>When publishing is off ({@code -Drdma4j.counters=false}) or the file cannot be created, the counters
 * live in this process's memory only and nothing else changes. The file goes away on {@link #close}, when
 * the object is unreachable, or when the process exits; a reader removes files left by a process that
 * died.
 *
 * <p>Layout (native byte order, offsets in bytes; {@link CounterFiles} reads it):
 * <pre>
 *   0  magic "R4JCNT01" (written last: a reader ignores a file without it)
 *   8  int version (1)        12 int counter count N
 *  16  long pid               24 long process start, ms since the epoch (pid reuse check)
 *  32  label, 64 bytes UTF-8, NUL padded (e.g. "rxe0/1")
 *  96  N names, 48 bytes each, UTF-8, NUL padded
 *  V = 96 + 48 N rounded up to 64: N values, 8 bytes each
 * </pre>
 * Writers: one thread at a time per counter (the caller's lock); readers: any thread or process, which see
 * each value whole but not the group as one snapshot.
 */
public final class CounterFile implements AutoCloseable {
    static final long MAGIC = 0x3130544e434a3452L; // "R4JCNT01" read as a little-endian long
    static final int VERSION = 1;
    static final int LABEL_OFFSET = 32;
    static final int LABEL_BYTES = 64;
    static final int NAMES_OFFSET = 96;
    static final int NAME_BYTES = 48;

    private static final Cleaner CLEANER = Cleaner.create(r -> {
        Thread t = new Thread(r, "rdma4j-counter-files-cleaner");
        t.setDaemon(true);
        return t;
    });
    private static final AtomicLong SEQUENCE = new AtomicLong();
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();

    private final MemorySegment values;
    private final int count;
    private final Path path;
    private final Cleaner.Cleanable cleanable;

    private CounterFile(MemorySegment values, int count, Path path) {
        this.values = values;
        this.count = count;
        this.path = path;
        this.cleanable = path == null ? null : CLEANER.register(this, () -> CounterFiles.delete(path));
    }

    /**
     * Creates a counter group and publishes it, unless publishing is off or fails (then the counters are
     * private to the process, see the class comment).
     *
     * @param label what the group counts, e.g. {@code rxe0/1}; at most 63 UTF-8 bytes are kept
     * @param names the counters' names, at most 47 UTF-8 bytes each
     * @return the group, every counter 0
     */
    public static CounterFile create(String label, List<String> names) {
        int n = names.size();
        long valuesOffset = valuesOffset(n);
        Path dir = CounterFiles.publishing() ? CounterFiles.processDirectory() : null;
        if (dir != null) {
            Path file = dir.resolve(fileName(label));
            try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
                    StandardOpenOption.WRITE)) {
                // An automatic arena: the mapping stays valid for whoever still counts after close().
                MemorySegment m = ch.map(FileChannel.MapMode.READ_WRITE, 0, valuesOffset + 8L * n, Arena.ofAuto());
                m.set(ValueLayout.JAVA_INT, 8, VERSION);
                m.set(ValueLayout.JAVA_INT, 12, n);
                m.set(ValueLayout.JAVA_LONG, 16, ProcessHandle.current().pid());
                m.set(ValueLayout.JAVA_LONG, 24, CounterFiles.processStartMillis(ProcessHandle.current()));
                putString(m, LABEL_OFFSET, LABEL_BYTES, label);
                for (int i = 0; i < n; i++) {
                    putString(m, NAMES_OFFSET + (long) i * NAME_BYTES, NAME_BYTES, names.get(i));
                }
                VarHandle.releaseFence();
                LONG.setRelease(m, 0L, MAGIC);
                return new CounterFile(m.asSlice(valuesOffset, 8L * n), n, file);
            } catch (IOException | UnsupportedOperationException e) {
                CounterFiles.LOG.log(System.Logger.Level.DEBUG, () -> "counters of " + label + " not published at "
                        + file + ": " + e);
                CounterFiles.delete(file);
            }
        }
        return new CounterFile(MemorySegment.ofArray(new long[Math.max(n, 1)]), n, null);
    }

    static long valuesOffset(int n) {
        return (NAMES_OFFSET + (long) n * NAME_BYTES + 63) & ~63L;
    }

    private static String fileName(String label) {
        StringBuilder b = new StringBuilder();
        for (char c : label.toCharArray()) {
            b.append(Character.isLetterOrDigit(c) || c == '-' || c == '_' ? c : '_');
        }
        return b.append('-').append(SEQUENCE.incrementAndGet()).append(CounterFiles.SUFFIX).toString();
    }

    private static void putString(MemorySegment m, long offset, int max, String s) {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        int len = Math.min(b.length, max - 1);
        MemorySegment.copy(b, 0, m, ValueLayout.JAVA_BYTE, offset, len);
    }

    /** {@return how many counters the group has} */
    public int size() {
        return count;
    }

    /**
     * Adds one to a counter.
     *
     * @param i the counter's index in the names given to {@link #create}
     */
    public void increment(int i) {
        add(i, 1);
    }

    /**
     * Adds to a counter.
     *
     * @param i the counter's index
     * @param n what to add
     */
    public void add(int i, long n) {
        long off = index(i);
        // Plain access: the writer holds the caller's lock; a reader in another process sees the store
        // when the CPU makes it visible (x86 and ARM keep 8-byte aligned stores whole).
        values.set(ValueLayout.JAVA_LONG, off, values.get(ValueLayout.JAVA_LONG, off) + n);
    }

    /**
     * {@return a counter's value}
     *
     * @param i the counter's index
     */
    public long get(int i) {
        return (long) LONG.getOpaque(values, index(i));
    }

    private long index(int i) {
        if (i < 0 || i >= count) {
            throw new IndexOutOfBoundsException("counter " + i + " of " + count);
        }
        return 8L * i;
    }

    /** {@return the published file, or null when the counters are private to this process} */
    public Path path() {
        return path;
    }

    /** Removes the published file (the counters stay usable in this process). Idempotent. */
    @Override
    public void close() {
        if (cleanable != null) {
            cleanable.clean();
        }
    }

    static boolean exists(Path p) {
        return p != null && Files.exists(p);
    }
}
