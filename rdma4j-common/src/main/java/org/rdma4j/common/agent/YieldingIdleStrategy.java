// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common.agent;

/**
 * Calls {@link Thread#yield()} when idle: the core goes to any other runnable thread and comes back at
 * once when there is none. Low latency while the machine has spare cores; on a loaded one it behaves
 * like a short sleep.
 */
public final class YieldingIdleStrategy implements IdleStrategy {
    /** The strategy; it holds no state, so one instance serves every thread. */
    public static final YieldingIdleStrategy INSTANCE = new YieldingIdleStrategy();

    private YieldingIdleStrategy() {
    }

    @Override
    public void idle(int workCount) {
        if (workCount == 0) {
            Thread.yield();
        }
    }

    @Override
    public void reset() {
    }

    @Override
    public String alias() {
        return "yield";
    }
}
