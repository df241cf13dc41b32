// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit.model;

import java.util.ArrayDeque;

/**
 * Closes what a test opened, last opened first (QPs and AHs before MRs, MRs before the PD, the PD and
 * CQs before the context, the context before the arena that backs its memory). Every close is tried;
 * the first failure is rethrown with the later ones suppressed, so a leak that makes
 * {@code Context.close()} fail with EBUSY fails the test. Not thread-safe.
 */
final class Closer implements AutoCloseable {
    private final ArrayDeque<AutoCloseable> stack = new ArrayDeque<>();

    /**
     * {@return the resource}
     *
     * @param resource something to close later
     * @param <T>      its type
     */
    <T extends AutoCloseable> T add(T resource) {
        stack.push(resource);
        return resource;
    }

    /** Closes and forgets everything added so far, newest first. */
    @Override
    public void close() {
        Throwable first = null;
        while (!stack.isEmpty()) {
            AutoCloseable r = stack.pop();
            try {
                r.close();
            } catch (Throwable t) {
                AssertionError e = new AssertionError("closing " + r + " failed: " + t, t);
                if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        if (first instanceof Error err) {
            throw err;
        }
    }
}
