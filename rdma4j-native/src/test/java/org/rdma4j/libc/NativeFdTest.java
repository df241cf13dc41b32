// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.libc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.ClosedChannelException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class NativeFdTest {
    private static int boundUdpSocket(Arena a, MemorySegment st) {
        int fd = Libc.socket(st, Libc.AF_INET, Libc.SOCK_DGRAM | Libc.SOCK_CLOEXEC, Libc.IPPROTO_UDP);
        assertTrue(fd >= 0, () -> Errors.describe(Libc.errno(st)));
        MemorySegment sin = a.allocate(16, 8);
        sin.set(ValueLayout.JAVA_SHORT, 0, (short) Libc.AF_INET);
        sin.set(ValueLayout.JAVA_INT, 4, 0x0100007F); // 127.0.0.1 in network order, port 0
        assertEquals(0, Libc.bind(st, fd, sin, 16), () -> Errors.describe(Libc.errno(st)));
        return fd;
    }

    @Test
    void closeRefusesNewCallsWakesTheBlockedOneAndClosesAfterIt() throws Exception {
        try (Arena a = Arena.ofShared()) {
            MemorySegment st = Libc.newCallState(a);
            NativeFd fd = new NativeFd(boundUdpSocket(a, st));
            CountDownLatch inside = new CountDownLatch(1);
            CompletableFuture<Long> reader = CompletableFuture.supplyAsync(() -> {
                MemorySegment rst = Libc.newCallState(a);
                MemorySegment buf = a.allocate(64);
                try {
                    fd.enter();
                } catch (ClosedChannelException e) {
                    return -2L;
                }
                try {
                    inside.countDown();
                    return Libc.recvfrom(rst, fd.fd(), buf, 64, 0, MemorySegment.NULL, MemorySegment.NULL);
                } finally {
                    fd.exit();
                }
            });
            assertTrue(inside.await(10, TimeUnit.SECONDS));
            // the reader may not have reached recvfrom yet: shutdown before it blocks still makes it return 0
            assertTrue(fd.close(n -> Libc.shutdown(st, n, Libc.SHUT_RDWR), NativeFd.DEFAULT_CLOSE_WAIT_NS));
            assertEquals(0L, reader.get(10, TimeUnit.SECONDS), "the blocked receive returned (0 after shutdown)");
            assertTrue(fd.isClosed());
            assertThrows(ClosedChannelException.class, fd::enter);
            assertFalse(fd.tryEnter());
            assertFalse(fd.close(), "idempotent");
            assertEquals(-1, Libc.fcntl(st, fd.fd(), Libc.F_GETFL, 0), "the descriptor really is closed");
            assertEquals(Errors.EBADF, Libc.errno(st));
        }
    }

    @Test
    void aCallThatNeverReturnsKeepsTheDescriptorOpen() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Libc.newCallState(a);
            NativeFd fd = new NativeFd(boundUdpSocket(a, st));
            assertTrue(fd.tryEnter());
            assertFalse(fd.close(null, 20_000_000L), "stuck call: not closed");
            assertTrue(fd.isClosed(), "but refusing new calls");
            assertTrue(Libc.fcntl(st, fd.fd(), Libc.F_GETFL, 0) >= 0, "descriptor left open");
            fd.exit();
            assertEquals(0, Libc.close(st, fd.fd()));
        }
    }

    @Test
    void rejectsANegativeDescriptor() {
        assertThrows(IllegalArgumentException.class, () -> new NativeFd(-1));
    }
}
