// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.libc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

class LibcTest {
    @Test
    void errnoIsCapturedPerCall() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Libc.newCallState(a);
            assertEquals(-1, Libc.socket(st, 12345, Libc.SOCK_DGRAM, 0));
            assertEquals(97, Libc.errno(st), "EAFNOSUPPORT for an unknown family");
            assertEquals(-1, Libc.close(st, -1));
            assertEquals(Errors.EBADF, Libc.errno(st));
            NativeIOException e = (NativeIOException) Libc.error("close", st, "fd -1");
            assertEquals("close failed: EBADF (Bad file descriptor): fd -1", e.getMessage());
        }
    }

    @Test
    void nonBlockingFlagRoundTrips() throws Exception {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Libc.newCallState(a);
            int fd = Libc.socket(st, Libc.AF_INET, Libc.SOCK_DGRAM | Libc.SOCK_CLOEXEC, Libc.IPPROTO_UDP);
            assertTrue(fd >= 0, () -> Errors.describe(Libc.errno(st)));
            NativeFd nfd = new NativeFd(fd);
            try {
                assertEquals(0, Libc.setNonBlocking(st, fd, true));
                assertTrue((Libc.fcntl(st, fd, Libc.F_GETFL, 0) & Libc.O_NONBLOCK) != 0);
                MemorySegment buf = a.allocate(16);
                assertEquals(-1, Libc.recvfrom(st, fd, buf, 16, 0, MemorySegment.NULL, MemorySegment.NULL));
                assertEquals(-1, Errors.ioResult("recvfrom", Libc.errno(st), ""), "EAGAIN on an empty non-blocking socket");
                assertEquals(0, Libc.setNonBlocking(st, fd, false));
                assertEquals(0, Libc.fcntl(st, fd, Libc.F_GETFL, 0) & Libc.O_NONBLOCK);
                MemorySegment pfd = a.allocate(Libc.POLLFD_SIZE, 8);
                assertEquals(0, Libc.pollIn(st, pfd, fd, 0), "nothing to read");
            } finally {
                assertTrue(nfd.close());
            }
        }
    }

    @Test
    void memlockLimitAndAnonymousMapping() throws Exception {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Libc.newCallState(a);
            long[] lim = Libc.getrlimit(st, Libc.RLIMIT_MEMLOCK);
            assertEquals(2, lim.length);
            assertTrue(lim[0] == -1 || lim[0] >= 0, "soft limit " + lim[0]);
            assertTrue(lim[1] == -1 || Long.compareUnsigned(lim[0], lim[1]) <= 0, "soft <= hard");
            assertThrows(NativeIOException.class, () -> Libc.getrlimit(st, 9999));

            long p = Libc.mmap(st, 0, 8192, Libc.PROT_READ_WRITE, Libc.MAP_PRIVATE | Libc.MAP_ANONYMOUS, -1, 0);
            assertNotEquals(Libc.MAP_FAILED, p, () -> Errors.describe(Libc.errno(st)));
            assertEquals(0, p % 4096, "page aligned");
            MemorySegment m = MemorySegment.ofAddress(p).reinterpret(8192);
            m.set(ValueLayout.JAVA_LONG, 8184, 42L);
            assertEquals(42L, m.get(ValueLayout.JAVA_LONG, 8184));
            assertEquals(0, Libc.munmap(st, p, 8192));
        }
    }

    @Test
    void dynamicLoaderFindsVersionedSymbols() {
        MemorySegment libc = Libc.dlopen("libc.so.6", Libc.RTLD_NOW | Libc.RTLD_LOCAL);
        assertNotEquals(MemorySegment.NULL, libc, Libc.dlerror());
        MemorySegment def = Libc.dlsym(libc, "poll");
        assertNotEquals(MemorySegment.NULL, def);
        assertEquals(def, Libc.dlvsym(libc, "poll", "GLIBC_2.2.5"), "x86_64's first glibc version node");
        assertEquals(MemorySegment.NULL, Libc.dlvsym(libc, "poll", "NO_SUCH_VERSION_1.0"));
        assertTrue(Libc.dlerror() != null, "the loader says why");
        assertEquals(MemorySegment.NULL, Libc.dlopen("libdoes-not-exist.so.7", Libc.RTLD_NOW));
        assertTrue(Libc.dlerror().contains("libdoes-not-exist.so.7"));
    }
}
