// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/**
 * The errno values the verbs control path and the post calls report, with Linux's numbers so that
 * messages and logs read like rdma-core's.
 */
public enum Errno {
    /** Operation not permitted. */
    EPERM(1),
    /** No such entry (e.g. unknown device or GID index). */
    ENOENT(2),
    /** Input/output error: the device or its driver failed (e.g. it was removed). */
    EIO(5),
    /** Try again: a queue is full. */
    EAGAIN(11),
    /** Out of memory or a queue/table limit was reached. */
    ENOMEM(12),
    /** Permission denied. */
    EACCES(13),
    /** Bad address: memory the kernel was given is not mapped. */
    EFAULT(14),
    /** Resource busy: the object still has live children or users. */
    EBUSY(16),
    /** The entry exists already. */
    EEXIST(17),
    /** No such device: no RDMA device owns the address, the device went away, or the kernel has no RDMA stack. */
    ENODEV(19),
    /** Invalid argument. */
    EINVAL(22),
    /** Not implemented: the kernel lacks the call (e.g. no RDMA stack loaded). */
    ENOSYS(38),
    /** No data available (rdma_cm: neighbour not resolved yet). */
    ENODATA(61),
    /** Protocol error (a peer sent something the protocol does not allow). */
    EPROTO(71),
    /** Not supported by this provider. */
    EOPNOTSUPP(95),
    /**
     * Address already in use: another CM ID is bound to that address and port, or another process (or
     * rdma_rxe) has a RoCE device's address and port.
     */
    EADDRINUSE(98),
    /** Cannot assign requested address: a socket could not be bound to the configured address. */
    EADDRNOTAVAIL(99),
    /** Network unreachable: no route to the destination. */
    ENETUNREACH(101),
    /** Connection reset by peer. */
    ECONNRESET(104),
    /** Already connected. */
    EISCONN(106),
    /** Not connected. */
    ENOTCONN(107),
    /** Timed out. */
    ETIMEDOUT(110),
    /** Connection refused: nobody listens there, or the peer rejected the connection. */
    ECONNREFUSED(111),
    /** No route to host. */
    EHOSTUNREACH(113),
    /** Operation already in progress. */
    EALREADY(114);

    private final int value;

    Errno(int value) {
        this.value = value;
    }

    /**
     * The C library's text for the error, as {@code strerror(3)} and {@code perror(3)} print it on Linux
     * (glibc), so that tools print the lines rdma-core's tools print.
     *
     * @return e.g. "Address already in use" for {@link #EADDRINUSE}
     */
    public String message() {
        return switch (this) {
            case EPERM -> "Operation not permitted";
            case ENOENT -> "No such file or directory";
            case EIO -> "Input/output error";
            case EAGAIN -> "Resource temporarily unavailable";
            case ENOMEM -> "Cannot allocate memory";
            case EACCES -> "Permission denied";
            case EFAULT -> "Bad address";
            case EBUSY -> "Device or resource busy";
            case EEXIST -> "File exists";
            case ENODEV -> "No such device";
            case EINVAL -> "Invalid argument";
            case ENOSYS -> "Function not implemented";
            case ENODATA -> "No data available";
            case EPROTO -> "Protocol error";
            case EOPNOTSUPP -> "Operation not supported";
            case EADDRINUSE -> "Address already in use";
            case EADDRNOTAVAIL -> "Cannot assign requested address";
            case ENETUNREACH -> "Network is unreachable";
            case ECONNRESET -> "Connection reset by peer";
            case EISCONN -> "Transport endpoint is already connected";
            case ENOTCONN -> "Transport endpoint is not connected";
            case ETIMEDOUT -> "Connection timed out";
            case ECONNREFUSED -> "Connection refused";
            case EHOSTUNREACH -> "No route to host";
            case EALREADY -> "Operation already in progress";
        };
    }

    /** {@return the Linux errno number} */
    public int value() {
        return value;
    }

    /**
     * The constant of an errno number.
     *
     * @param value a Linux errno number, positive or negative (rdma_cm event statuses are negative)
     * @return the constant, or null if this enum has none for it
     */
    public static Errno of(int value) {
        int v = Math.abs(value);
        for (Errno e : values()) {
            if (e.value == v) {
                return e;
            }
        }
        return null;
    }
}
