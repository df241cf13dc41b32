// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common.agent;

/**
 * Never gives the CPU away: returns at once. The lowest latency; takes a whole core while idle. It does
 * not call {@link Thread#onSpinWait()}: on a KVM guest the PAUSE instruction costs over 100 cycles and can
 * cause pause-loop exits (docs/benchmarks.md).
 */
public final class BusySpinIdleStrategy implements IdleStrategy {
    /** The strategy; it holds no state, so one instance serves every thread. */
    public static final BusySpinIdleStrategy INSTANCE = new BusySpinIdleStrategy();

    private BusySpinIdleStrategy() {
    }

    @Override
    public void idle(int workCount) {
    }

    @Override
    public void reset() {
    }

    @Override
    public String alias() {
        return "spin";
    }
}
