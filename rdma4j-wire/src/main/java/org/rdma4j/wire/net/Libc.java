// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire.net;

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
 * The few libc socket calls this package needs, bound once through FFM. Every call that can fail
 * captures {@code errno} ({@link Linker.Option#captureCallState}) into a caller-owned segment, so
 * the error is read from the same thread that made the call, not from a later libc call.
 *
 * <p>Constants are Linux values (identical on x86_64 and aarch64 for everything used here; the
 * SO_RCVTIMEO {@code struct timeval} is two longs on both). Struct layouts are the LP64 glibc
 * ones: {@code iovec} 16 B, {@code msghdr} 56 B, {@code mmsghdr} 64 B, {@code pollfd} 8 B.
 */
final class Libc {
    static final int AF_INET = 2;
    static final int AF_INET6 = 10;
    static final int SOCK_DGRAM = 2;
    static final int SOCK_RAW = 3;
    static final int SOCK_CLOEXEC = 0x80000;
    static final int IPPROTO_IP = 0;
    static final int IPPROTO_IPV6 = 41;
    static final int IPPROTO_UDP = 17;
    static final int IPPROTO_RAW = 255;
    static final int SOL_SOCKET = 1;
    static final int SOL_UDP = 17;
    static final int SO_REUSEADDR = 2;
    static final int SO_SNDBUF = 7;
    static final int SO_RCVBUF = 8;
    static final int SO_SNDBUFFORCE = 32;
    static final int SO_RCVBUFFORCE = 33;
    static final int SO_RCVTIMEO = 20;
    /** asm-generic/socket.h: IPv4 UDP sends checksum 0 (sk_no_check_tx). */
    static final int SO_NO_CHECK = 11;
    static final int IP_TOS = 1;
    static final int IP_TTL = 2;
    static final int IP_MTU_DISCOVER = 10;
    static final int IP_PMTUDISC_WANT = 1;
    static final int IP_PMTUDISC_DO = 2;
    static final int IP_MULTICAST_IF = 32;
    static final int IP_ADD_MEMBERSHIP = 35;
    static final int IP_DROP_MEMBERSHIP = 36;
    static final int IP_MULTICAST_ALL = 49;
    static final int IPV6_UNICAST_HOPS = 16;
    static final int IPV6_MULTICAST_IF = 17;
    static final int IPV6_JOIN_GROUP = 20;
    static final int IPV6_LEAVE_GROUP = 21;
    static final int IPV6_MULTICAST_ALL = 29;
    static final int IPV6_MTU_DISCOVER = 23;
    static final int IPV6_V6ONLY = 26;
    static final int IPV6_TCLASS = 67;
    /** linux/udp.h: send IPv6 UDP with checksum 0. */
    static final int UDP_NO_CHECK6_TX = 101;
    /** linux/udp.h: accept IPv6 UDP with checksum 0 (RFC 6936), which the stack drops by default. */
    static final int UDP_NO_CHECK6_RX = 102;
    /** linux/udp.h: UDP GSO, the segment size of a send (setsockopt or a cmsg with a u16). */
    static final int UDP_SEGMENT = 103;
    /** linux/udp.h: UDP GRO receive; each coalesced datagram carries a cmsg with the segment size (int). */
    static final int UDP_GRO = 104;
    static final int F_GETFL = 3;
    static final int F_SETFL = 4;
    static final int O_NONBLOCK = 0x800;
    static final int MSG_DONTWAIT = 0x40;
    static final int MSG_TRUNC = 0x20;
    static final int MSG_WAITFORONE = 0x10000;
    static final int SHUT_RDWR = 2;
    static final short POLLIN = 0x1;
    static final int EINTR = 4;
    static final int EIO = 5;
    static final int EINVAL = 22;
    static final int EAGAIN = 11;

    static final long IOVEC_SIZE = 16;
    static final long MSGHDR_SIZE = 56;
    static final long MMSGHDR_SIZE = 64;
    /** struct cmsghdr: cmsg_len (size_t), cmsg_level, cmsg_type (int); data follows 8-aligned. */
    static final long CMSGHDR_SIZE = 16;
    /** Room for a sockaddr_in6 (28 B), the largest address this package handles. */
    static final int SOCKADDR_SIZE = 28;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final SymbolLookup LIBC = LINKER.defaultLookup();
    private static final Linker.Option ERRNO = Linker.Option.captureCallState("errno");
    static final MemoryLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO_HANDLE =
            CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));

    private static final ValueLayout.OfInt I = ValueLayout.JAVA_INT;
    private static final ValueLayout.OfLong L = ValueLayout.JAVA_LONG;
    private static final ValueLayout P = ValueLayout.ADDRESS;

    private static final MethodHandle SOCKET = bind("socket", FunctionDescriptor.of(I, I, I, I));
    private static final MethodHandle BIND = bind("bind", FunctionDescriptor.of(I, I, P, I));
    private static final MethodHandle SETSOCKOPT = bind("setsockopt", FunctionDescriptor.of(I, I, I, I, P, I));
    private static final MethodHandle GETSOCKOPT = bind("getsockopt", FunctionDescriptor.of(I, I, I, I, P, P));
    private static final MethodHandle GETSOCKNAME = bind("getsockname", FunctionDescriptor.of(I, I, P, P));
    private static final MethodHandle SENDTO = bind("sendto", FunctionDescriptor.of(L, I, P, L, I, P, I));
    private static final MethodHandle RECVFROM = bind("recvfrom", FunctionDescriptor.of(L, I, P, L, I, P, P));
    private static final MethodHandle SENDMSG = bind("sendmsg", FunctionDescriptor.of(L, I, P, I));
    private static final MethodHandle SENDMMSG = bind("sendmmsg", FunctionDescriptor.of(I, I, P, I, I));
    private static final MethodHandle RECVMMSG = bind("recvmmsg", FunctionDescriptor.of(I, I, P, I, I, P));
    private static final MethodHandle POLL = bind("poll", FunctionDescriptor.of(I, P, L, I));
    private static final MethodHandle CLOSE = bind("close", FunctionDescriptor.of(I, I));
    private static final MethodHandle SHUTDOWN = bind("shutdown", FunctionDescriptor.of(I, I, I));
    private static final MethodHandle FCNTL = LINKER.downcallHandle(LIBC.find("fcntl").orElseThrow(),
            FunctionDescriptor.of(I, I, I, I), ERRNO, Linker.Option.firstVariadicArg(2));
    private static final MethodHandle STRERROR = LINKER.downcallHandle(LIBC.find("strerror").orElseThrow(),
            FunctionDescriptor.of(P, I));

    private Libc() {
    }

    private static MethodHandle bind(String name, FunctionDescriptor fd) {
        MemorySegment fn = LIBC.find(name).orElseThrow(() -> new UnsatisfiedLinkError("libc has no " + name));
        return LINKER.downcallHandle(fn, fd, ERRNO);
    }

    /** {@return a segment to pass as the captured call state, owned by {@code arena}} */
    static MemorySegment newCallState(Arena arena) {
        return arena.allocate(CALL_STATE);
    }

    static int errno(MemorySegment state) {
        return (int) ERRNO_HANDLE.get(state, 0L);
    }

    static int socket(MemorySegment st, int domain, int type, int protocol) {
        try {
            return (int) SOCKET.invokeExact(st, domain, type, protocol);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int bind(MemorySegment st, int fd, MemorySegment addr, int len) {
        try {
            return (int) BIND.invokeExact(st, fd, addr, len);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int setsockopt(MemorySegment st, int fd, int level, int name, MemorySegment val, int len) {
        try {
            return (int) SETSOCKOPT.invokeExact(st, fd, level, name, val, len);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int getsockopt(MemorySegment st, int fd, int level, int name, MemorySegment val, MemorySegment lenp) {
        try {
            return (int) GETSOCKOPT.invokeExact(st, fd, level, name, val, lenp);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int getsockname(MemorySegment st, int fd, MemorySegment addr, MemorySegment lenp) {
        try {
            return (int) GETSOCKNAME.invokeExact(st, fd, addr, lenp);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static long sendto(MemorySegment st, int fd, MemorySegment buf, long len, int flags, MemorySegment addr, int alen) {
        try {
            return (long) SENDTO.invokeExact(st, fd, buf, len, flags, addr, alen);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static long recvfrom(MemorySegment st, int fd, MemorySegment buf, long len, int flags, MemorySegment addr,
            MemorySegment alenp) {
        try {
            return (long) RECVFROM.invokeExact(st, fd, buf, len, flags, addr, alenp);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static long sendmsg(MemorySegment st, int fd, MemorySegment msg, int flags) {
        try {
            return (long) SENDMSG.invokeExact(st, fd, msg, flags);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int sendmmsg(MemorySegment st, int fd, MemorySegment vec, int vlen, int flags) {
        try {
            return (int) SENDMMSG.invokeExact(st, fd, vec, vlen, flags);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int recvmmsg(MemorySegment st, int fd, MemorySegment vec, int vlen, int flags, MemorySegment timeout) {
        try {
            return (int) RECVMMSG.invokeExact(st, fd, vec, vlen, flags, timeout);
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

    static int close(MemorySegment st, int fd) {
        try {
            return (int) CLOSE.invokeExact(st, fd);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int shutdown(MemorySegment st, int fd, int how) {
        try {
            return (int) SHUTDOWN.invokeExact(st, fd, how);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int fcntl(MemorySegment st, int fd, int cmd, int arg) {
        try {
            return (int) FCNTL.invokeExact(st, fd, cmd, arg);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@return "ENAME (text)" for an errno value, e.g. "EADDRINUSE (Address already in use)"} */
    static String describe(int errno) {
        String text;
        try {
            MemorySegment p = (MemorySegment) STRERROR.invokeExact(errno);
            text = p.reinterpret(256).getString(0);
        } catch (Throwable t) {
            text = "?";
        }
        return name(errno) + " (" + text + ")";
    }

    private static String name(int errno) {
        return switch (errno) {
            case 1 -> "EPERM";
            case 4 -> "EINTR";
            case 9 -> "EBADF";
            case 11 -> "EAGAIN";
            case 13 -> "EACCES";
            case 14 -> "EFAULT";
            case 22 -> "EINVAL";
            case 24 -> "EMFILE";
            case 90 -> "EMSGSIZE";
            case 92 -> "ENOPROTOOPT";
            case 93 -> "EPROTONOSUPPORT";
            case 97 -> "EAFNOSUPPORT";
            case 98 -> "EADDRINUSE";
            case 99 -> "EADDRNOTAVAIL";
            case 101 -> "ENETUNREACH";
            case 105 -> "ENOBUFS";
            case 111 -> "ECONNREFUSED";
            case 113 -> "EHOSTUNREACH";
            default -> "errno " + errno;
        };
    }

    /** {@return an IOException naming the call, its errno and a context string} */
    static IOException error(String call, MemorySegment st, String context) {
        int e = errno(st);
        return new NativeIOException(call + " failed: " + describe(e) + (context.isEmpty() ? "" : ": " + context), e);
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
