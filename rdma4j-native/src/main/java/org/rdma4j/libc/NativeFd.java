// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.libc;

import java.lang.foreign.Arena;
import java.nio.channels.ClosedChannelException;
import java.util.function.IntConsumer;

/**
 * A file descriptor with a use count ({@link UseCount}), so that it is never closed while a call is inside it. A closed
 * descriptor number is reused by the next {@code open}/{@code socket} of any thread: a call still
 * running on the old number would then read, write or poll someone else's file. Every call on the
 * descriptor is bracketed by {@link #enter()} and {@link #exit()}; {@link #close} marks the descriptor
 * closed (new calls fail with {@link ClosedChannelException}), wakes the calls in progress (for a socket
 * with {@code shutdown(2)}), waits for them to leave, and only then calls {@code close(2)}.
 *
 * <pre>{@code
 * fd.enter();
 * try {
 *     n = Libc.recvfrom(st, fd.fd(), ...);
 * } finally {
 *     fd.exit();
 * }
 * }</pre>
 *
 * Thread-safe: any number of threads may be inside at once, and any thread may close.
 */
public final class NativeFd {
    /** How long {@link #close()} waits for calls in progress by default. */
    public static final long DEFAULT_CLOSE_WAIT_NS = 10_000_000_000L;

    private final int fd;
    private final UseCount users = new UseCount();

    /**
     * Takes ownership of a descriptor.
     *
     * @param fd an open descriptor this object now owns
     */
    public NativeFd(int fd) {
        if (fd < 0) {
            throw new IllegalArgumentException("descriptor " + fd);
        }
        this.fd = fd;
    }

    /**
     * {@return the descriptor number; use it only between {@link #enter()} and {@link #exit()}}
     *
     */
    public int fd() {
        return fd;
    }

    /**
     * Starts a call on the descriptor.
     *
     * @throws ClosedChannelException if {@link #close} has started
     */
    public void enter() throws ClosedChannelException {
        if (!tryEnter()) {
            throw new ClosedChannelException();
        }
    }

    /**
     * Starts a call on the descriptor unless it is closed.
     *
     * @return true if entered (then {@link #exit()} must follow), false if closed
     */
    public boolean tryEnter() {
        return users.tryEnter();
    }

    /** Ends a call started with {@link #enter()} or a successful {@link #tryEnter()}. */
    public void exit() {
        users.exit();
    }

    /** {@return true once {@link #close} has started (calls in progress may still be returning)} */
    public boolean isClosed() {
        return users.isClosed();
    }

    /**
     * Closes without a wake-up, waiting up to {@link #DEFAULT_CLOSE_WAIT_NS} for calls in progress.
     *
     * @return see {@link #close(IntConsumer, long)}
     */
    public boolean close() {
        return close(null, DEFAULT_CLOSE_WAIT_NS);
    }

    /**
     * Marks the descriptor closed, wakes the calls in progress, waits for them to return, then closes it.
     * Idempotent.
     *
     * @param wake   called once with the descriptor number after new calls are refused, to make the calls
     *               in progress return (e.g. {@code shutdown(fd, SHUT_RDWR)}); null if they return by
     *               themselves (bounded timeouts)
     * @param waitNs how long to wait for them
     * @return true if this call closed the descriptor; false if it was already closed by another call, or
     *     a call in progress did not return in time: then the descriptor is left open for the life of the
     *     process rather than closed under that call, and the owner must keep the memory such a call may
     *     touch (its scratch segments) alive as well
     */
    public boolean close(IntConsumer wake, long waitNs) {
        if (!users.beginClose()) {
            return false;
        }
        if (wake != null) {
            wake.accept(fd);
        }
        if (!users.awaitIdle(waitNs)) {
            return false;
        }
        try (Arena a = Arena.ofConfined()) {
            // close(2) releases the descriptor even when it reports an error (EINTR, EIO): never retry
            Libc.close(Libc.newCallState(a), fd);
        }
        return true;
    }

    @Override
    public String toString() {
        return "fd " + fd + (isClosed() ? " (closed)" : "");
    }
}
