// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common.agent;

/**
 * Receives what an {@link Agent} threw (Agrona's {@code ErrorHandler}). Called on the agent's thread; it
 * must not throw.
 */
@FunctionalInterface
public interface ErrorHandler {
    /**
     * Handles an error a duty cycle threw.
     *
     * @param agent the agent whose duty cycle threw
     * @param error what it threw
     */
    void onError(Agent agent, Throwable error);
}
