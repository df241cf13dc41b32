// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common.agent;

/**
 * A unit of background work that an {@link AgentRunner} calls in a loop (a "duty cycle"), after Agrona's
 * {@code Agent}: the runner's thread calls {@link #onStart}, then {@link #doWork} until it is closed, then
 * {@link #onClose}, all on the same thread. Between duty cycles that did nothing the runner calls its
 * {@link IdleStrategy}, so the agent itself never sleeps, spins or parks.
 *
 * <p>An exception thrown by {@link #doWork} does not end the agent: the runner hands it to its
 * {@link ErrorHandler}, counts it, and calls {@link #doWork} again.
 */
public interface Agent {
    /**
     * Does one cycle of work, without blocking.
     *
     * @return how much work was done (0 = nothing: the runner idles)
     * @throws Exception anything; reported to the runner's error handler, and the agent carries on
     */
    int doWork() throws Exception;

    /**
     * Returns the agent's role, e.g. "timer" or "roce-rx-rxe0-v4": it names the runner's thread.
     *
     * @return the agent's role, e.g. "timer" or "roce-rx-rxe0-v4": it names the runner's thread
     */
    String roleName();

    /**
     * How long the runner may park the agent's thread after a cycle that did no work, if its idle strategy
     * parks: the time to the agent's next deadline. {@link AgentRunner#wake} ends such a park early.
     *
     * @return nanoseconds, or {@link Long#MAX_VALUE} for "until woken or the idle strategy's own limit"
     */
    default long idleBudgetNs() {
        return Long.MAX_VALUE;
    }

    /** Called once on the runner's thread before the first {@link #doWork}. */
    default void onStart() {
    }

    /** Called once on the runner's thread after the last {@link #doWork}. */
    default void onClose() {
    }
}
