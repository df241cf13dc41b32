// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common.agent;

/**
 * What a thread does when it has nothing to do: called after each duty cycle of an {@link Agent} (or each
 * empty poll of a waiting thread) with the amount of work the cycle did, after Agrona's
 * {@code IdleStrategy}. A strategy holds per-thread backoff state: one instance per thread. The choice is
 * the user's ({@link IdleStrategies#parse}): spinning gives the lowest latency and takes a core, parking
 * gives the core away and costs a wake-up (about 10 µs between the two cores of a small VM).
 */
public interface IdleStrategy {
    /**
     * Called after a duty cycle.
     *
     * @param workCount work the cycle did; a strategy idles only when it is 0, and resets when it is not
     */
    void idle(int workCount);

    /**
     * Idles once (a cycle that did nothing), parking at most {@code maxParkNs} if the strategy parks: the time
     * to the caller's next deadline.
     *
     * @param maxParkNs upper bound of a park, in nanoseconds ({@link Long#MAX_VALUE}: the strategy's own)
     */
    default void idleAtMost(long maxParkNs) {
        idle(0);
    }

    /** Forgets the backoff state: the next idle starts from the strategy's first step. */
    void reset();

    /**
     * Returns whether this strategy ever parks the thread (a waker must then unpark it).
     *
     * @return whether this strategy ever parks the thread (a waker must then unpark it)
     */
    default boolean parks() {
        return false;
    }

    /**
     * Returns the name {@link IdleStrategies#parse} accepts for this strategy, with its parameters.
     *
     * @return the name {@link IdleStrategies#parse} accepts for this strategy, with its parameters
     */
    String alias();
}
