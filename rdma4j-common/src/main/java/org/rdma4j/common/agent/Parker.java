// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common.agent;

import java.util.concurrent.locks.LockSupport;

/**
 * How a parking idle strategy gives its core away for a while: {@link #THREAD} parks the thread (woken by
 * {@link LockSupport#unpark}); an agent that waits for a file descriptor supplies one that waits in
 * {@code poll(2)} instead, so that the descriptor's readiness ends the park as an unpark would.
 */
@FunctionalInterface
public interface Parker {
    /** {@link LockSupport#parkNanos(long)}. */
    Parker THREAD = LockSupport::parkNanos;

    /**
     * Gives the core away for at most {@code nanos} (less if woken).
     *
     * @param nanos at least 1
     */
    void park(long nanos);
}
