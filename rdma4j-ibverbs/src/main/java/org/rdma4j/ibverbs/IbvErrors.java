// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import org.rdma4j.libc.Errors;
import org.rdma4j.libc.Libc;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;

/**
 * Turns a failed libibverbs call into a {@link VerbsException} whose message names the call, the errno and,
 * for the failures a user can fix, what to do.
 */
final class IbvErrors {
    private IbvErrors() {
    }

    /**
     * {@return the verbs constant, EIO for one the verbs API does not name (the message keeps the real one)}
     *
     * @param errno a Linux errno
     */
    static Errno errno(int errno) {
        Errno e = Errno.of(errno);
        return e != null ? e : Errno.EIO;
    }

    /**
     * {@return the exception}
     *
     * @param call    the failed verb, e.g. {@code ibv_create_qp}
     * @param errno   its errno
     * @param context what it was called on and with
     */
    static VerbsException failed(String call, int errno, String context) {
        return new VerbsException(errno(errno), call + " failed: " + Errors.describe(errno)
                + (context.isEmpty() ? "" : ": " + context));
    }

    /**
     * The message for a registration that failed with ENOMEM: the kernel pins the pages of a memory region and
     * refuses when the pinned total would pass RLIMIT_MEMLOCK without CAP_IPC_LOCK (ib_umem_get:
     * {@code new_pinned > lock_limit && !capable(CAP_IPC_LOCK)} → -ENOMEM), and the same errno also means a
     * real shortage, so the limit is reported to tell them apart.
     *
     * @param length the bytes asked for
     * @param device the device name
     * @return the exception
     */
    static VerbsException regMrNoMemory(long length, String device) {
        String limit;
        try (Arena a = Arena.ofConfined()) {
            long[] l = Libc.getrlimit(Libc.newCallState(a), Libc.RLIMIT_MEMLOCK);
            limit = "this process may lock " + bytes(l[0]) + " (RLIMIT_MEMLOCK soft limit; `ulimit -l` = "
                    + (l[0] == -1 ? "unlimited" : (l[0] / 1024) + " KiB") + ", hard limit " + bytes(l[1]) + ")";
        } catch (java.io.IOException e) {
            limit = "the RLIMIT_MEMLOCK limit could not be read (" + e.getMessage() + ")";
        }
        return new VerbsException(Errno.ENOMEM, "ibv_reg_mr(" + length + " bytes) on " + device
                + " failed: ENOMEM. Registered memory is locked (pinned) memory and " + limit
                + ". Raise the limit (ulimit -l unlimited in the shell that starts the JVM; /etc/security/limits.conf"
                + " 'memlock'; systemd LimitMEMLOCK=infinity; docker run --ulimit memlock=-1) or grant the process"
                + " CAP_IPC_LOCK; if the limit is already high enough, the host is out of memory");
    }

    private static String bytes(long v) {
        return v == -1 ? "unlimited" : v + " bytes";
    }

    /**
     * {@return the errno it left}
     *
     * @param st the call state of the failed call
     */
    static int errnoOf(MemorySegment st) {
        return Ibv.errno(st);
    }
}
