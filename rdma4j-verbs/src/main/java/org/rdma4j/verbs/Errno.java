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
    /** Try again: a queue is full. */
    EAGAIN(11),
    /** Out of memory or a queue/table limit was reached. */
    ENOMEM(12),
    /** Permission denied. */
    EACCES(13),
    /** Resource busy: the object still has live children or users. */
    EBUSY(16),
    /** Invalid argument. */
    EINVAL(22),
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

    /** {@return the Linux errno number} */
    public int value() {
        return value;
    }
}
