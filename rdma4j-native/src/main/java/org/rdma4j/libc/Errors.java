// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.libc;

import java.io.IOException;
import java.nio.channels.ClosedChannelException;

/**
 * Linux errno values, their names, and the one translation of a failed libc call into a result or an
 * exception ({@link #ioResult}, the shape of Netty's {@code Errors.ioResult}): a caller that may see
 * EAGAIN gets -1 back, a call on a closed descriptor a {@link ClosedChannelException}, anything else a
 * {@link NativeIOException} whose message names the call, the errno and its text.
 */
public final class Errors {
    /** Operation not permitted. */
    public static final int EPERM = 1;
    /** No such file or directory. */
    public static final int ENOENT = 2;
    /** Interrupted system call. */
    public static final int EINTR = 4;
    /** I/O error. */
    public static final int EIO = 5;
    /** Bad file descriptor. */
    public static final int EBADF = 9;
    /** Try again (EWOULDBLOCK is the same number on Linux). */
    public static final int EAGAIN = 11;
    /** Out of memory. */
    public static final int ENOMEM = 12;
    /** Permission denied. */
    public static final int EACCES = 13;
    /** Bad address. */
    public static final int EFAULT = 14;
    /** Device or resource busy. */
    public static final int EBUSY = 16;
    /** File exists. */
    public static final int EEXIST = 17;
    /** No such device. */
    public static final int ENODEV = 19;
    /** Invalid argument. */
    public static final int EINVAL = 22;
    /** Function not implemented. */
    public static final int ENOSYS = 38;
    /** Protocol not available. */
    public static final int ENOPROTOOPT = 92;
    /** Operation not supported. */
    public static final int EOPNOTSUPP = 95;
    /** Address already in use. */
    public static final int EADDRINUSE = 98;
    /** Cannot assign requested address. */
    public static final int EADDRNOTAVAIL = 99;
    /** No buffer space available. */
    public static final int ENOBUFS = 105;
    /** Transport endpoint is not connected. */
    public static final int ENOTCONN = 107;
    /** Connection timed out. */
    public static final int ETIMEDOUT = 110;

    /** asm-generic/errno-base.h and errno.h, index = errno. */
    private static final String[] NAMES = {
            null, "EPERM", "ENOENT", "ESRCH", "EINTR", "EIO", "ENXIO", "E2BIG", "ENOEXEC", "EBADF", "ECHILD", "EAGAIN", "ENOMEM", "EACCES", "EFAULT",
            "ENOTBLK", "EBUSY", "EEXIST", "EXDEV", "ENODEV", "ENOTDIR", "EISDIR", "EINVAL", "ENFILE", "EMFILE", "ENOTTY",
            "ETXTBSY", "EFBIG", "ENOSPC", "ESPIPE", "EROFS", "EMLINK", "EPIPE", "EDOM", "ERANGE", "EDEADLK",
            "ENAMETOOLONG", "ENOLCK", "ENOSYS", "ENOTEMPTY", "ELOOP", null, "ENOMSG", "EIDRM", "ECHRNG", "EL2NSYNC",
            "EL3HLT", "EL3RST", "ELNRNG", "EUNATCH", "ENOCSI", "EL2HLT", "EBADE", "EBADR", "EXFULL", "ENOANO", "EBADRQC",
            "EBADSLT", null, "EBFONT", "ENOSTR", "ENODATA", "ETIME", "ENOSR", "ENONET", "ENOPKG", "EREMOTE", "ENOLINK",
            "EADV", "ESRMNT", "ECOMM", "EPROTO", "EMULTIHOP", "EDOTDOT", "EBADMSG", "EOVERFLOW", "ENOTUNIQ", "EBADFD",
            "EREMCHG", "ELIBACC", "ELIBBAD", "ELIBSCN", "ELIBMAX", "ELIBEXEC", "EILSEQ", "ERESTART", "ESTRPIPE",
            "EUSERS", "ENOTSOCK", "EDESTADDRREQ", "EMSGSIZE", "EPROTOTYPE", "ENOPROTOOPT", "EPROTONOSUPPORT",
            "ESOCKTNOSUPPORT", "EOPNOTSUPP", "EPFNOSUPPORT", "EAFNOSUPPORT", "EADDRINUSE", "EADDRNOTAVAIL", "ENETDOWN",
            "ENETUNREACH", "ENETRESET", "ECONNABORTED", "ECONNRESET", "ENOBUFS", "EISCONN", "ENOTCONN", "ESHUTDOWN",
            "ETOOMANYREFS", "ETIMEDOUT", "ECONNREFUSED", "EHOSTDOWN", "EHOSTUNREACH", "EALREADY", "EINPROGRESS",
            "ESTALE", "EUCLEAN", "ENOTNAM", "ENAVAIL", "EISNAM", "EREMOTEIO", "EDQUOT", "ENOMEDIUM", "EMEDIUMTYPE",
            "ECANCELED", "ENOKEY", "EKEYEXPIRED", "EKEYREVOKED", "EKEYREJECTED", "EOWNERDEAD", "ENOTRECOVERABLE",
            "ERFKILL", "EHWPOISON"};

    private Errors() {
    }

    /**
     * {@return its symbolic name, e.g. {@code EADDRINUSE}, or {@code errno N} for an unknown value}
     *
     * @param errno an errno value
     */
    public static String name(int errno) {
        return errno > 0 && errno < NAMES.length && NAMES[errno] != null ? NAMES[errno] : "errno " + errno;
    }

    /**
     * {@return "NAME (text)", e.g. "EADDRINUSE (Address already in use)"}
     *
     * @param errno an errno value
     */
    public static String describe(int errno) {
        return name(errno) + " (" + Libc.strerror(errno) + ")";
    }

    /**
     * {@return "call failed: NAME (text): context" as a {@link NativeIOException}}
     *
     * @param call    the failed call, e.g. {@code bind}
     * @param errno   its errno
     * @param context what it was called on, or ""
     */
    public static NativeIOException newIOException(String call, int errno, String context) {
        return new NativeIOException(call + " failed: " + describe(errno)
                + (context == null || context.isEmpty() ? "" : ": " + context), errno);
    }

    /**
     * The result of a non-blocking call that failed with {@code errno}. EINTR is the caller's to retry
     * before it gets here.
     *
     * @param call    the failed call
     * @param errno   its errno
     * @param context what it was called on, or ""
     * @return -1 for EAGAIN (nothing can be done now)
     * @throws ClosedChannelException for EBADF: the descriptor is closed
     * @throws NativeIOException      for every other errno
     */
    public static int ioResult(String call, int errno, String context) throws IOException {
        if (errno == EAGAIN) {
            return -1;
        }
        if (errno == EBADF) {
            ClosedChannelException e = new ClosedChannelException();
            e.initCause(newIOException(call, errno, context));
            throw e;
        }
        throw newIOException(call, errno, context);
    }
}
