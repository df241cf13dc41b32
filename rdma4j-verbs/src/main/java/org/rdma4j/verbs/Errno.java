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
    /** No such device: the device is gone, or the kernel has no RDMA stack for it. */
    ENODEV(19),
    /** Invalid argument. */
    EINVAL(22),
    /** Not implemented: the kernel lacks the call (e.g. no RDMA stack loaded). */
    ENOSYS(38),
    /** Not supported by this provider. */
    EOPNOTSUPP(95),
    /** Cannot assign requested address: a socket could not be bound to the configured address. */
    EADDRNOTAVAIL(99),
    /** Timed out. */
    ETIMEDOUT(110);

    private final int value;

    Errno(int value) {
        this.value = value;
    }

    /** @return the Linux errno number */
    public int value() {
        return value;
    }

    /**
     * @param value a Linux errno number
     * @return the constant with that number, or null if this enum has none
     */
    public static Errno ofValue(int value) {
        for (Errno e : values()) {
            if (e.value == value) {
                return e;
            }
        }
        return null;
    }
}
