// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

/**
 * The libc calls a TUN interface needs ({@code open}, {@code ioctl}, {@code read}, {@code write},
 * {@code poll}, {@code socket}, {@code close}), bound through FFM with errno captured after each call (as
 * rdma4j-wire's {@code Libc} does for sockets). Every caller passes its own call-state segment, so threads
 * never share one.
 */
final class Native {
    static final int O_RDWR = 2;
    static final int O_NONBLOCK = 0x800;
    static final int O_CLOEXEC = 0x80000;
    static final int AF_INET = 2;
    static final int SOCK_DGRAM = 2;
    static final int SOCK_CLOEXEC = 0x80000;
    static final short POLLIN = 0x1;
    static final int EINTR = 4;
    static final int EAGAIN = 11;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final SymbolLookup LIBC = LINKER.defaultLookup();
    private static final Linker.Option ERRNO = Linker.Option.captureCallState("errno");
    private static final MemoryLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO_HANDLE =
            CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final ValueLayout.OfInt I = ValueLayout.JAVA_INT;
    private static final ValueLayout.OfLong L = ValueLayout.JAVA_LONG;
    private static final ValueLayout P = ValueLayout.ADDRESS;

    // open and ioctl are variadic: the third argument is passed as a variadic one, as C would
    private static final MethodHandle OPEN = LINKER.downcallHandle(find("open"), FunctionDescriptor.of(I, P, I, I),
            ERRNO, Linker.Option.firstVariadicArg(2));
    private static final MethodHandle IOCTL = LINKER.downcallHandle(find("ioctl"), FunctionDescriptor.of(I, I, L, P),
            ERRNO, Linker.Option.firstVariadicArg(2));
    private static final MethodHandle READ = LINKER.downcallHandle(find("read"), FunctionDescriptor.of(L, I, P, L), ERRNO);
    private static final MethodHandle WRITE = LINKER.downcallHandle(find("write"), FunctionDescriptor.of(L, I, P, L), ERRNO);
    private static final MethodHandle POLL = LINKER.downcallHandle(find("poll"), FunctionDescriptor.of(I, P, L, I), ERRNO);
    private static final MethodHandle SOCKET = LINKER.downcallHandle(find("socket"), FunctionDescriptor.of(I, I, I, I), ERRNO);
    private static final MethodHandle CLOSE = LINKER.downcallHandle(find("close"), FunctionDescriptor.of(I, I), ERRNO);
    private static final MethodHandle STRERROR = LINKER.downcallHandle(find("strerror"), FunctionDescriptor.of(P, I));

    private Native() {
    }

    private static MemorySegment find(String name) {
        return LIBC.find(name).orElseThrow(() -> new UnsatisfiedLinkError("libc has no " + name));
    }

    static MemorySegment newCallState(Arena arena) {
        return arena.allocate(CALL_STATE);
    }

    static int errno(MemorySegment st) {
        return (int) ERRNO_HANDLE.get(st, 0L);
    }

    static int open(MemorySegment st, MemorySegment path, int flags) {
        try {
            return (int) OPEN.invokeExact(st, path, flags, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int ioctl(MemorySegment st, int fd, long request, MemorySegment arg) {
        try {
            return (int) IOCTL.invokeExact(st, fd, request, arg);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static long read(MemorySegment st, int fd, MemorySegment buf, long len) {
        try {
            return (long) READ.invokeExact(st, fd, buf, len);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static long write(MemorySegment st, int fd, MemorySegment buf, long len) {
        try {
            return (long) WRITE.invokeExact(st, fd, buf, len);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int poll(MemorySegment st, MemorySegment fds, long nfds, int timeoutMs) {
        try {
            return (int) POLL.invokeExact(st, fds, nfds, timeoutMs);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int socket(MemorySegment st, int domain, int type, int protocol) {
        try {
            return (int) SOCKET.invokeExact(st, domain, type, protocol);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int close(MemorySegment st, int fd) {
        try {
            return (int) CLOSE.invokeExact(st, fd);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static String describe(int errno) {
        try {
            MemorySegment p = (MemorySegment) STRERROR.invokeExact(errno);
            return "errno " + errno + " (" + p.reinterpret(256).getString(0) + ")";
        } catch (Throwable t) {
            return "errno " + errno;
        }
    }

    static IOException error(String call, MemorySegment st) {
        return new IOException(call + " failed: " + describe(errno(st)));
    }

    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            throw r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        throw new IllegalStateException(t);
    }
}
