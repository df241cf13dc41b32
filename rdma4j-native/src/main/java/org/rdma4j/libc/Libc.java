// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.libc;

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
 * The libc calls rdma4j makes, bound once through FFM into {@code static final} handles. Every call that
 * can fail captures {@code errno} ({@link Linker.Option#captureCallState}) into a segment the caller owns
 * ({@link #newCallState}), so the error is read on the thread that made the call and no later libc call
 * can overwrite it. Callers that run on two threads at once (a sender and a receiver) use one call state
 * each.
 *
 * <p>Failures are turned into exceptions in one place, {@link Errors}. Constants are Linux values
 * (identical on x86_64 and aarch64 for everything here); struct sizes are the LP64 glibc ones:
 * {@code iovec} 16 B, {@code msghdr} 56 B, {@code mmsghdr} 64 B, {@code cmsghdr} 16 B, {@code pollfd} 8 B,
 * {@code struct rlimit} 16 B.
 */
public final class Libc {
    /** Address family IPv4. */
    public static final int AF_INET = 2;
    /** Address family IPv6. */
    public static final int AF_INET6 = 10;
    /** Datagram socket. */
    public static final int SOCK_DGRAM = 2;
    /** Raw socket. */
    public static final int SOCK_RAW = 3;
    /** Close the descriptor on exec (socket type flag). */
    public static final int SOCK_CLOEXEC = 0x80000;
    /** IPv4 protocol level. */
    public static final int IPPROTO_IP = 0;
    /** IPv6 protocol level. */
    public static final int IPPROTO_IPV6 = 41;
    /** UDP protocol. */
    public static final int IPPROTO_UDP = 17;
    /** Raw IP: the caller writes the IP header (implies IP_HDRINCL). */
    public static final int IPPROTO_RAW = 255;
    /** Socket option level. */
    public static final int SOL_SOCKET = 1;
    /** UDP option level. */
    public static final int SOL_UDP = 17;
    /** Allow several sockets to bind one address. */
    public static final int SO_REUSEADDR = 2;
    /** Send buffer size. */
    public static final int SO_SNDBUF = 7;
    /** Receive buffer size. */
    public static final int SO_RCVBUF = 8;
    /** Send buffer size beyond wmem_max (CAP_NET_ADMIN). */
    public static final int SO_SNDBUFFORCE = 32;
    /** Receive buffer size beyond rmem_max (CAP_NET_ADMIN). */
    public static final int SO_RCVBUFFORCE = 33;
    /** Receive timeout (struct timeval). */
    public static final int SO_RCVTIMEO = 20;
    /** asm-generic/socket.h: IPv4 UDP sends checksum 0 (sk_no_check_tx). */
    public static final int SO_NO_CHECK = 11;
    /** IPv4 TOS byte. */
    public static final int IP_TOS = 1;
    /** IPv4 TTL. */
    public static final int IP_TTL = 2;
    /** IPv4 path-MTU discovery mode. */
    public static final int IP_MTU_DISCOVER = 10;
    /** Path-MTU discovery mode: DF off unless the route says otherwise (the Linux default). */
    public static final int IP_PMTUDISC_WANT = 1;
    /** Path-MTU discovery mode: always DF. */
    public static final int IP_PMTUDISC_DO = 2;
    /** IPv4 multicast output interface. */
    public static final int IP_MULTICAST_IF = 32;
    /** Join an IPv4 multicast group. */
    public static final int IP_ADD_MEMBERSHIP = 35;
    /** Leave an IPv4 multicast group. */
    public static final int IP_DROP_MEMBERSHIP = 36;
    /** Receive every group joined by any socket of the host (1) or only own joins (0). */
    public static final int IP_MULTICAST_ALL = 49;
    /** IPv6 unicast hop limit. */
    public static final int IPV6_UNICAST_HOPS = 16;
    /** IPv6 multicast output interface. */
    public static final int IPV6_MULTICAST_IF = 17;
    /** Join an IPv6 multicast group. */
    public static final int IPV6_JOIN_GROUP = 20;
    /** Leave an IPv6 multicast group. */
    public static final int IPV6_LEAVE_GROUP = 21;
    /** IPv6 path-MTU discovery mode. */
    public static final int IPV6_MTU_DISCOVER = 23;
    /** IPv6 only (no IPv4-mapped addresses). */
    public static final int IPV6_V6ONLY = 26;
    /** As IP_MULTICAST_ALL, for IPv6. */
    public static final int IPV6_MULTICAST_ALL = 29;
    /** IPv6 traffic class. */
    public static final int IPV6_TCLASS = 67;
    /** linux/udp.h: send IPv6 UDP with checksum 0. */
    public static final int UDP_NO_CHECK6_TX = 101;
    /** linux/udp.h: accept IPv6 UDP with checksum 0 (RFC 6936), which the stack drops by default. */
    public static final int UDP_NO_CHECK6_RX = 102;
    /** linux/udp.h: UDP GSO, the segment size of a send (setsockopt or a cmsg with a u16). */
    public static final int UDP_SEGMENT = 103;
    /** linux/udp.h: UDP GRO receive; each coalesced datagram carries a cmsg with the segment size (int). */
    public static final int UDP_GRO = 104;
    /** fcntl: get the file status flags. */
    public static final int F_GETFL = 3;
    /** fcntl: set the file status flags. */
    public static final int F_SETFL = 4;
    /** open: read and write. */
    public static final int O_RDWR = 2;
    /** open / file status flag: non-blocking. */
    public static final int O_NONBLOCK = 0x800;
    /** open: close on exec. */
    public static final int O_CLOEXEC = 0x80000;
    /** recv/send flag: do not block. */
    public static final int MSG_DONTWAIT = 0x40;
    /** recv flag: return the full datagram length even when it was cut. */
    public static final int MSG_TRUNC = 0x20;
    /** recvmmsg flag: block for the first datagram only. */
    public static final int MSG_WAITFORONE = 0x10000;
    /** shutdown: both directions. */
    public static final int SHUT_RDWR = 2;
    /** poll: data to read. */
    public static final short POLLIN = 0x1;
    /** poll: error condition (revents only). */
    public static final short POLLERR = 0x8;
    /** poll: hang up (revents only). */
    public static final short POLLHUP = 0x10;
    /** poll: invalid descriptor (revents only). */
    public static final short POLLNVAL = 0x20;
    /** mmap protection: read and write. */
    public static final int PROT_READ_WRITE = 0x1 | 0x2;
    /** mmap: shared mapping. */
    public static final int MAP_SHARED = 0x01;
    /** mmap: private mapping. */
    public static final int MAP_PRIVATE = 0x02;
    /** mmap: anonymous memory. */
    public static final int MAP_ANONYMOUS = 0x20;
    /** mmap (Linux 4.17): map exactly at the address or fail with EEXIST, never replacing a mapping. */
    public static final int MAP_FIXED_NOREPLACE = 0x100000;
    /** What mmap returns on failure. */
    public static final long MAP_FAILED = -1L;
    /** getrlimit resource: bytes of memory that may be locked (pinned). */
    public static final int RLIMIT_MEMLOCK = 8;
    /** dlopen: resolve every symbol at load time. */
    public static final int RTLD_NOW = 2;
    /** dlopen: the library's symbols do not satisfy other libraries' references. */
    public static final int RTLD_LOCAL = 0;
    /** eventfd: non-blocking (O_NONBLOCK). */
    public static final int EFD_NONBLOCK = 0x800;
    /** eventfd: close on exec (O_CLOEXEC). */
    public static final int EFD_CLOEXEC = 0x80000;
    /** setns: a network namespace. */
    public static final int CLONE_NEWNET = 0x40000000;

    /** sizeof(struct iovec). */
    public static final long IOVEC_SIZE = 16;
    /** sizeof(struct msghdr). */
    public static final long MSGHDR_SIZE = 56;
    /** sizeof(struct mmsghdr). */
    public static final long MMSGHDR_SIZE = 64;
    /** struct cmsghdr: cmsg_len (size_t), cmsg_level, cmsg_type (int); data follows 8-aligned. */
    public static final long CMSGHDR_SIZE = 16;
    /** Room for a sockaddr_in6 (28 B), the largest address the socket layer handles. */
    public static final int SOCKADDR_SIZE = 28;
    /** sizeof(struct pollfd): int fd, short events, short revents. */
    public static final long POLLFD_SIZE = 8;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final SymbolLookup LIBC = LINKER.defaultLookup();
    private static final Linker.Option ERRNO = Linker.Option.captureCallState("errno");
    private static final MemoryLayout CALL_STATE = Linker.Option.captureStateLayout();
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
    private static final MethodHandle READ = bind("read", FunctionDescriptor.of(L, I, P, L));
    private static final MethodHandle WRITE = bind("write", FunctionDescriptor.of(L, I, P, L));
    private static final MethodHandle MMAP = bind("mmap", FunctionDescriptor.of(L, L, L, I, I, I, L));
    private static final MethodHandle MUNMAP = bind("munmap", FunctionDescriptor.of(I, L, L));
    private static final MethodHandle GETRLIMIT = bind("getrlimit", FunctionDescriptor.of(I, I, P));
    private static final MethodHandle SETNS = bind("setns", FunctionDescriptor.of(I, I, I));
    private static final MethodHandle EVENTFD = bind("eventfd", FunctionDescriptor.of(I, I, I));
    // fcntl, open and ioctl are variadic: the third argument is passed as a variadic one, as C would
    private static final MethodHandle FCNTL = bindVariadic("fcntl", FunctionDescriptor.of(I, I, I, I));
    private static final MethodHandle OPEN = bindVariadic("open", FunctionDescriptor.of(I, P, I, I));
    private static final MethodHandle IOCTL = bindVariadic("ioctl", FunctionDescriptor.of(I, I, L, P));
    // the dynamic loader (in libc.so.6 since glibc 2.34); dlerror() reports its errors, not errno
    private static final MethodHandle DLOPEN = LINKER.downcallHandle(find("dlopen"), FunctionDescriptor.of(P, P, I));
    private static final MethodHandle DLSYM = LINKER.downcallHandle(find("dlsym"), FunctionDescriptor.of(P, P, P));
    private static final MethodHandle DLVSYM = LINKER.downcallHandle(find("dlvsym"), FunctionDescriptor.of(P, P, P, P));
    private static final MethodHandle DLERROR = LINKER.downcallHandle(find("dlerror"), FunctionDescriptor.of(P));
    private static final MethodHandle STRERROR = LINKER.downcallHandle(find("strerror"), FunctionDescriptor.of(P, I));

    private Libc() {
    }

    private static MemorySegment find(String name) {
        return LIBC.find(name).orElseThrow(() -> new UnsatisfiedLinkError("libc has no " + name));
    }

    private static MethodHandle bind(String name, FunctionDescriptor fd) {
        return LINKER.downcallHandle(find(name), fd, ERRNO);
    }

    private static MethodHandle bindVariadic(String name, FunctionDescriptor fd) {
        return LINKER.downcallHandle(find(name), fd, ERRNO, Linker.Option.firstVariadicArg(2));
    }

    /**
     * {@return a segment to pass as the captured call state of the calls here}
     *
     * @param arena owns the segment
     */
    public static MemorySegment newCallState(Arena arena) {
        return arena.allocate(CALL_STATE);
    }

    /**
     * {@return the errno that call left}
     *
     * @param state a call state passed to the last failed call
     */
    public static int errno(MemorySegment state) {
        return (int) ERRNO_HANDLE.get(state, 0L);
    }

    /**
     * The exception for a failed call, from the errno in {@code state} ({@link Errors#newIOException}).
     *
     * @param call    the call as the message should name it, e.g. {@code bind}
     * @param state   the call state of the failed call
     * @param context what it was called on (an address, a device), or ""
     * @return the exception to throw
     */
    public static IOException error(String call, MemorySegment state, String context) {
        return Errors.newIOException(call, errno(state), context);
    }

    /**
     * {@return the descriptor, or -1 with errno}
     *
     * @param st call state
     * @param domain AF_INET or AF_INET6
     * @param type SOCK_DGRAM or SOCK_RAW, with SOCK_CLOEXEC
     * @param protocol protocol number
     */
    public static int socket(MemorySegment st, int domain, int type, int protocol) {
        try {
            return (int) SOCKET.invokeExact(st, domain, type, protocol);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@return 0, or -1 with errno}
     *
     * @param st call state
     * @param fd socket
     * @param addr sockaddr
     * @param len its length
     */
    public static int bind(MemorySegment st, int fd, MemorySegment addr, int len) {
        try {
            return (int) BIND.invokeExact(st, fd, addr, len);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@return 0, or -1 with errno}
     *
     * @param st call state
     * @param fd socket
     * @param level option level
     * @param name option name
     * @param val option value
     * @param len its length
     */
    public static int setsockopt(MemorySegment st, int fd, int level, int name, MemorySegment val, int len) {
        try {
            return (int) SETSOCKOPT.invokeExact(st, fd, level, name, val, len);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@return 0, or -1 with errno}
     *
     * @param st call state
     * @param fd socket
     * @param level option level
     * @param name option name
     * @param val receives the value
     * @param lenp in: room in {@code val}; out: the value's length (an int)
     */
    public static int getsockopt(MemorySegment st, int fd, int level, int name, MemorySegment val, MemorySegment lenp) {
        try {
            return (int) GETSOCKOPT.invokeExact(st, fd, level, name, val, lenp);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@return 0, or -1 with errno}
     *
     * @param st call state
     * @param fd socket
     * @param addr receives the bound address
     * @param lenp in: room; out: the address length (an int)
     */
    public static int getsockname(MemorySegment st, int fd, MemorySegment addr, MemorySegment lenp) {
        try {
            return (int) GETSOCKNAME.invokeExact(st, fd, addr, lenp);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@return bytes sent, or -1 with errno}
     *
     * @param st call state
     * @param fd socket
     * @param buf data
     * @param len bytes
     * @param flags MSG_ flags
     * @param addr destination sockaddr
     * @param alen its length
     */
    public static long sendto(MemorySegment st, int fd, MemorySegment buf, long len, int flags, MemorySegment addr,
            int alen) {
        try {
            return (long) SENDTO.invokeExact(st, fd, buf, len, flags, addr, alen);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@return the length, or -1 with errno}
     *
     * @param st call state
     * @param fd socket
     * @param buf receives the data
     * @param len room
     * @param flags MSG_ flags
     * @param addr receives the source address, or NULL
     * @param alenp in: room; out: the address length (an int), or NULL
     */
    public static long recvfrom(MemorySegment st, int fd, MemorySegment buf, long len, int flags, MemorySegment addr,
            MemorySegment alenp) {
        try {
            return (long) RECVFROM.invokeExact(st, fd, buf, len, flags, addr, alenp);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@return bytes sent, or -1 with errno}
     *
     * @param st call state
     * @param fd socket
     * @param msg struct msghdr
     * @param flags MSG_ flags
     */
    public static long sendmsg(MemorySegment st, int fd, MemorySegment msg, int flags) {
        try {
            return (long) SENDMSG.invokeExact(st, fd, msg, flags);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@return messages sent, or -1 with errno}
     *
     * @param st call state
     * @param fd socket
     * @param vec struct mmsghdr array
     * @param vlen entries
     * @param flags MSG_ flags
     */
    public static int sendmmsg(MemorySegment st, int fd, MemorySegment vec, int vlen, int flags) {
        try {
            return (int) SENDMMSG.invokeExact(st, fd, vec, vlen, flags);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@return messages received, or -1 with errno}
     *
     * @param st call state
     * @param fd socket
     * @param vec struct mmsghdr array
     * @param vlen entries
     * @param flags MSG_ flags
     * @param timeout struct timespec, or NULL
     */
    public static int recvmmsg(MemorySegment st, int fd, MemorySegment vec, int vlen, int flags,
            MemorySegment timeout) {
        try {
            return (int) RECVMMSG.invokeExact(st, fd, vec, vlen, flags, timeout);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@return ready descriptors, 0 on timeout, or -1 with errno}
     *
     * @param st call state
     * @param fds struct pollfd array
     * @param nfds entries
     * @param timeoutMs -1 forever, 0 no wait
     */
    public static int poll(MemorySegment st, MemorySegment fds, long nfds, int timeoutMs) {
        try {
            return (int) POLL.invokeExact(st, fds, nfds, timeoutMs);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * Waits for one descriptor to become readable.
     *
     * @param st        call state
     * @param pollFd    an 8-byte scratch segment ({@link #POLLFD_SIZE})
     * @param fd        the descriptor
     * @param timeoutMs -1 forever, 0 no wait
     * @return the revents bits (0 on timeout), or -1 with errno
     */
    public static int pollIn(MemorySegment st, MemorySegment pollFd, int fd, int timeoutMs) {
        pollFd.set(ValueLayout.JAVA_INT, 0, fd);
        pollFd.set(ValueLayout.JAVA_SHORT, 4, POLLIN);
        pollFd.set(ValueLayout.JAVA_SHORT, 6, (short) 0);
        int n = poll(st, pollFd, 1, timeoutMs);
        if (n <= 0) {
            return n;
        }
        return pollFd.get(ValueLayout.JAVA_SHORT, 6) & 0xFFFF;
    }

    /**
     * {@return 0, or -1 with errno}
     *
     * @param st call state
     * @param fd descriptor
     */
    public static int close(MemorySegment st, int fd) {
        try {
            return (int) CLOSE.invokeExact(st, fd);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@return 0, or -1 with errno}
     *
     * @param st call state
     * @param fd socket
     * @param how SHUT_RDWR
     */
    public static int shutdown(MemorySegment st, int fd, int how) {
        try {
            return (int) SHUTDOWN.invokeExact(st, fd, how);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@return the flags (F_GETFL), 0 (F_SETFL), or -1 with errno}
     *
     * @param st call state
     * @param fd descriptor
     * @param cmd F_GETFL or F_SETFL
     * @param arg the flags for F_SETFL, else 0
     */
    public static int fcntl(MemorySegment st, int fd, int cmd, int arg) {
        try {
            return (int) FCNTL.invokeExact(st, fd, cmd, arg);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * Sets or clears O_NONBLOCK.
     *
     * @param st call state
     * @param fd descriptor
     * @param nonBlocking true to set it
     * @return 0, or -1 with errno
     */
    public static int setNonBlocking(MemorySegment st, int fd, boolean nonBlocking) {
        int fl = fcntl(st, fd, F_GETFL, 0);
        if (fl < 0) {
            return -1;
        }
        int nfl = nonBlocking ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
        return nfl == fl ? 0 : fcntl(st, fd, F_SETFL, nfl);
    }

    /**
     * {@return the descriptor, or -1 with errno}
     *
     * @param st call state
     * @param path a NUL-terminated path
     * @param flags O_ flags
     */
    public static int open(MemorySegment st, MemorySegment path, int flags) {
        try {
            return (int) OPEN.invokeExact(st, path, flags, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@return the ioctl's result, or -1 with errno}
     *
     * @param st call state
     * @param fd descriptor
     * @param request the ioctl number
     * @param arg its argument
     */
    public static int ioctl(MemorySegment st, int fd, long request, MemorySegment arg) {
        try {
            return (int) IOCTL.invokeExact(st, fd, request, arg);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@return bytes read, or -1 with errno}
     *
     * @param st call state
     * @param fd descriptor
     * @param buf receives the data
     * @param len room
     */
    public static long read(MemorySegment st, int fd, MemorySegment buf, long len) {
        try {
            return (long) READ.invokeExact(st, fd, buf, len);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@return bytes written, or -1 with errno}
     *
     * @param st call state
     * @param fd descriptor
     * @param buf data
     * @param len bytes
     */
    public static long write(MemorySegment st, int fd, MemorySegment buf, long len) {
        try {
            return (long) WRITE.invokeExact(st, fd, buf, len);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@return the mapping's address, or {@link #MAP_FAILED} with errno}
     *
     * @param st call state
     * @param addr the address hint (or the exact address with MAP_FIXED_NOREPLACE), 0 for any
     * @param length bytes
     * @param prot PROT_ bits
     * @param flags MAP_ bits
     * @param fd file descriptor, -1 for anonymous memory
     * @param offset offset in the file
     */
    public static long mmap(MemorySegment st, long addr, long length, int prot, int flags, int fd, long offset) {
        try {
            return (long) MMAP.invokeExact(st, addr, length, prot, flags, fd, offset);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@return 0, or -1 with errno}
     *
     * @param st call state
     * @param addr a mapping's address
     * @param length its length
     */
    public static int munmap(MemorySegment st, long addr, long length) {
        try {
            return (int) MUNMAP.invokeExact(st, addr, length);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * A resource limit of this process.
     *
     * @param st call state
     * @param resource e.g. {@link #RLIMIT_MEMLOCK}
     * @return {soft, hard}; {@code -1} stands for RLIM_INFINITY
     * @throws IOException if getrlimit fails
     */
    public static long[] getrlimit(MemorySegment st, int resource) throws IOException {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment rl = a.allocate(16, 8);
            int rc;
            try {
                rc = (int) GETRLIMIT.invokeExact(st, resource, rl);
            } catch (Throwable t) {
                throw rethrow(t);
            }
            if (rc != 0) {
                throw error("getrlimit", st, "resource " + resource);
            }
            return new long[] {rl.get(ValueLayout.JAVA_LONG, 0), rl.get(ValueLayout.JAVA_LONG, 8)};
        }
    }

    /**
     * Moves the calling thread into another namespace (setns(2)).
     *
     * @param st call state
     * @param fd a descriptor of /proc/PID/ns/...
     * @param nstype e.g. {@link #CLONE_NEWNET}
     * @return 0, or -1 with errno
     */
    public static int setns(MemorySegment st, int fd, int nstype) {
        try {
            return (int) SETNS.invokeExact(st, fd, nstype);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * A counter descriptor to wake a thread waiting in {@link #poll} (eventfd(2)): writing 8 bytes makes it
     * readable.
     *
     * @param st call state
     * @param initval the initial count
     * @param flags {@link #EFD_NONBLOCK} | {@link #EFD_CLOEXEC}
     * @return the descriptor, or -1 with errno
     */
    public static int eventfd(MemorySegment st, int initval, int flags) {
        try {
            return (int) EVENTFD.invokeExact(st, initval, flags);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * Loads a shared library (dlopen(3)); it stays loaded for the life of the process.
     *
     * @param soname e.g. {@code libibverbs.so.1}, found on the loader's search path
     * @param flags  {@link #RTLD_NOW} | {@link #RTLD_LOCAL}
     * @return the handle, or {@link MemorySegment#NULL} (then {@link #dlerror()} says why)
     */
    public static MemorySegment dlopen(String soname, int flags) {
        try (Arena a = Arena.ofConfined()) {
            return (MemorySegment) DLOPEN.invokeExact(a.allocateFrom(soname), flags);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * The default version of a symbol (dlsym(3)): what a program linked today would call.
     *
     * @param handle a {@link #dlopen} handle
     * @param name   the symbol
     * @return its address, or {@link MemorySegment#NULL}
     */
    public static MemorySegment dlsym(MemorySegment handle, String name) {
        try (Arena a = Arena.ofConfined()) {
            return (MemorySegment) DLSYM.invokeExact(handle, a.allocateFrom(name));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * One version of a symbol (dlvsym(3), a GNU extension): the ABI of a versioned library such as
     * libibverbs is pinned by asking for the version node a binding was written for.
     *
     * @param handle  a {@link #dlopen} handle
     * @param name    the symbol
     * @param version the version node, e.g. {@code IBVERBS_1.1}
     * @return its address, or {@link MemorySegment#NULL} when the library has no such symbol version
     */
    public static MemorySegment dlvsym(MemorySegment handle, String name, String version) {
        try (Arena a = Arena.ofConfined()) {
            return (MemorySegment) DLVSYM.invokeExact(handle, a.allocateFrom(name), a.allocateFrom(version));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@return the dynamic loader's message for its last failure on this thread, or null} */
    public static String dlerror() {
        try {
            MemorySegment p = (MemorySegment) DLERROR.invokeExact();
            return p.equals(MemorySegment.NULL) ? null : p.reinterpret(4096).getString(0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@return libc's text for it (strerror), or "?" when unavailable}
     *
     * @param errno an errno value
     */
    public static String strerror(int errno) {
        try {
            MemorySegment p = (MemorySegment) STRERROR.invokeExact(errno);
            return p.equals(MemorySegment.NULL) ? "?" : p.reinterpret(256).getString(0);
        } catch (Throwable t) {
            return "?";
        }
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
