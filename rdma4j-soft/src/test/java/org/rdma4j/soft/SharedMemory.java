// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.concurrent.ThreadLocalRandom;
import org.rdma4j.libc.Errors;
import org.rdma4j.libc.Libc;

/**
 * A file in {@code /dev/shm} mapped {@code MAP_SHARED} at the same virtual address in the test JVM and
 * in the remote peer's JVM, so an address in a scatter/gather entry, an RETH or a memory region means the
 * same bytes in both processes and nothing needs translating. The test side hands out buffers from it with
 * a bump allocator ({@link #newArena()}), reset between tests.
 *
 * <p>The address is agreed with {@code MAP_FIXED_NOREPLACE} (Linux 4.17): the kernel maps there or fails
 * with EEXIST, never replacing a mapping; a caller whose address is taken tries another.
 */
final class SharedMemory implements AutoCloseable {
    private final Path file;
    private final long base;
    private final long size;
    private final MemorySegment segment;
    private long next;
    private boolean closed;

    private SharedMemory(Path file, long base, long size) {
        this.file = file;
        this.base = base;
        this.size = size;
        this.segment = MemorySegment.ofAddress(base).reinterpret(size);
    }

    /**
     * Creates the file (sparse: pages cost memory only once touched).
     *
     * @param file a path in /dev/shm
     * @param size bytes
     */
    static void createFile(Path file, long size) {
        try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "rw")) {
            f.setLength(size);
        } catch (IOException e) {
            throw new IllegalStateException("cannot create the shared-memory file " + file + ": " + e.getMessage(), e);
        }
    }

    /**
     * @return a 2 MiB-aligned address in [16 TiB, 96 TiB): far from where the JVM puts its heap (low) and
     *         from where the kernel places libraries and anonymous mappings (near 128 TiB)
     */
    static long randomAddress() {
        long twoMiB = 2L << 20;
        long lo = 16L << 40;
        long hi = 96L << 40;
        return lo + ThreadLocalRandom.current().nextLong((hi - lo) / twoMiB) * twoMiB;
    }

    /**
     * Maps the file at exactly {@code address}.
     *
     * @param file    the file
     * @param size    bytes to map
     * @param address where
     * @return the mapping, or null when something else is mapped there
     */
    static SharedMemory mapAt(Path file, long size, long address) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Libc.newCallState(a);
            int fd = Libc.open(st, a.allocateFrom(file.toString()), Libc.O_RDWR | Libc.O_CLOEXEC);
            if (fd < 0) {
                throw new IllegalStateException("cannot open the shared-memory file " + file + ": "
                        + Errors.describe(Libc.errno(st)));
            }
            try {
                long p = Libc.mmap(st, address, size, Libc.PROT_READ_WRITE, Libc.MAP_SHARED | Libc.MAP_FIXED_NOREPLACE,
                        fd, 0L);
                if (p == Libc.MAP_FAILED) {
                    return null;
                }
                if (p != address) {
                    // A kernel older than 4.17 takes the flag as a hint only.
                    Libc.munmap(st, p, size);
                    return null;
                }
                return new SharedMemory(file, address, size);
            } finally {
                Libc.close(st, fd); // the mapping stays valid without the descriptor
            }
        }
    }

    /** @return the mapped address */
    long base() {
        return base;
    }

    /** @return the mapped size */
    long size() {
        return size;
    }

    /** @return the file */
    Path file() {
        return file;
    }

    /**
     * @param s a segment
     * @return true if it is native memory inside this mapping
     */
    boolean contains(MemorySegment s) {
        return s.isNative() && s.address() >= base && s.address() + s.byteSize() <= base + size;
    }

    /**
     * @param address an address inside the mapping
     * @param length  bytes
     * @return those bytes, in the mapping's (global) scope
     */
    MemorySegment slice(long address, long length) {
        if (address < base || length < 0 || address + length > base + size) {
            throw new IllegalArgumentException("[0x" + Long.toHexString(address) + ", +" + length
                    + ") is not inside the shared memory [0x" + Long.toHexString(base) + ", +" + size + ")");
        }
        return segment.asSlice(address - base, length);
    }

    /**
     * @return an arena that hands out zeroed slices of the mapping; its segments die when it closes, the
     *         memory is reused after {@link #reset()}
     */
    Arena newArena() {
        return new BumpArena();
    }

    /** Forgets every allocation: the next test's buffers start at the beginning again. */
    synchronized void reset() {
        next = 0;
    }

    private synchronized MemorySegment carve(long bytes, long align) {
        if (closed) {
            throw new IllegalStateException("the shared memory is unmapped");
        }
        long a = Math.max(1, align);
        long start = ((base + next + a - 1) / a) * a - base;
        if (bytes < 0 || start + bytes > size) {
            throw new OutOfMemoryError("shared memory of " + size + " bytes exhausted: " + bytes
                    + " more bytes asked with " + next + " in use");
        }
        next = start + bytes;
        return segment.asSlice(start, bytes);
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Libc.newCallState(a);
            if (Libc.munmap(st, base, size) != 0) {
                throw new IllegalStateException("munmap: " + Errors.describe(Libc.errno(st)));
            }
        }
    }

    /** An arena over the bump allocator: closing it ends its segments' scope. */
    private final class BumpArena implements Arena {
        private final Arena scope = Arena.ofShared();

        @Override
        public MemorySegment allocate(long byteSize, long byteAlignment) {
            MemorySegment s = carve(byteSize, byteAlignment).reinterpret(scope, null);
            s.fill((byte) 0);
            return s;
        }

        @Override
        public MemorySegment.Scope scope() {
            return scope.scope();
        }

        @Override
        public void close() {
            scope.close();
        }
    }
}
