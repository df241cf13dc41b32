// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.libc;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * The count of calls in progress on a native object (a descriptor, a verbs handle), so that the object is
 * destroyed only after every call inside it has returned: each call is bracketed by {@link #tryEnter()} and
 * {@link #exit()}; {@link #beginClose()} refuses new calls, {@link #awaitIdle} waits for the calls in
 * progress. A destroyed native object is freed memory (or a reusable descriptor number); a call still using
 * it would touch whatever is there next. {@link NativeFd} is this protocol around {@code close(2)}.
 *
 * <p>Thread-safe and lock-free: entering costs one atomic increment, which on an idle object (one thread
 * posting) is an uncontended cache line.
 */
public final class UseCount {
    private static final int CLOSED = Integer.MIN_VALUE;

    /** Calls in progress; the sign bit is set once {@link #beginClose()} succeeded. */
    private final AtomicInteger users = new AtomicInteger();

    /** Creates an open count with no calls in progress. */
    public UseCount() {
    }

    /**
     * Starts a call unless closing has begun.
     *
     * @return true if entered (then {@link #exit()} must follow), false if closed
     */
    public boolean tryEnter() {
        if (users.getAndIncrement() < 0) {
            users.getAndDecrement();
            return false;
        }
        return true;
    }

    /** Ends a call started with a successful {@link #tryEnter()}. */
    public void exit() {
        users.getAndDecrement();
    }

    /** {@return true once {@link #beginClose()} has succeeded (calls in progress may still be returning)} */
    public boolean isClosed() {
        return users.get() < 0;
    }

    /**
     * Refuses new calls from now on.
     *
     * @return true for the one caller that closed it; false if it was already closed
     */
    public boolean beginClose() {
        int before;
        do {
            before = users.get();
            if (before < 0) {
                return false;
            }
        } while (!users.compareAndSet(before, before + CLOSED));
        return true;
    }

    /**
     * Undoes {@link #beginClose()} when destroying the object failed and it stays usable (e.g. the kernel
     * answered EBUSY).
     */
    public void reopen() {
        users.getAndAdd(-CLOSED);
    }

    /**
     * After {@link #beginClose()}: waits until the calls in progress have returned.
     *
     * @param waitNs how long to wait at most
     * @return true when none is left; false if one is still inside after {@code waitNs}
     */
    public boolean awaitIdle(long waitNs) {
        long deadline = System.nanoTime() + waitNs;
        while (users.get() != CLOSED) {
            if (System.nanoTime() - deadline > 0) {
                return false;
            }
            Thread.onSpinWait();
            Thread.yield();
        }
        return true;
    }

    /** {@return calls in progress (0 after close once they have returned)} */
    public int inProgress() {
        int u = users.get();
        return u < 0 ? u - CLOSED : u;
    }
}
