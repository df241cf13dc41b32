// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common.agent;

/**
 * Parks the thread when idle, doubling the park from {@code minParkNs} to {@code maxParkNs} over consecutive
 * idle cycles and starting again after a cycle that did work. Gives the core away; a thread that makes work
 * for a parked one unparks it ({@link AgentRunner#wake}), else it notices the work within the current park.
 * Not thread-safe: one instance per thread.
 */
public final class ParkingIdleStrategy implements IdleStrategy {
    private final long minParkNs;
    private final long maxParkNs;
    private final Parker parker;
    private long parkNs;

    /**
     * A strategy that parks the thread.
     *
     * @param minParkNs first park, at least 1 ns
     * @param maxParkNs longest park, at least {@code minParkNs}
     */
    public ParkingIdleStrategy(long minParkNs, long maxParkNs) {
        this(minParkNs, maxParkNs, Parker.THREAD);
    }

    /**
     * A strategy that parks with the given parker.
     *
     * @param minParkNs first park, at least 1 ns
     * @param maxParkNs longest park, at least {@code minParkNs}
     * @param parker    how to park (the thread, or a wait for a descriptor)
     */
    public ParkingIdleStrategy(long minParkNs, long maxParkNs, Parker parker) {
        if (minParkNs < 1 || maxParkNs < minParkNs) {
            throw new IllegalArgumentException("minParkNs=" + minParkNs + ", maxParkNs=" + maxParkNs
                    + " (expected 1 <= minParkNs <= maxParkNs)");
        }
        this.minParkNs = minParkNs;
        this.maxParkNs = maxParkNs;
        this.parker = parker;
        this.parkNs = minParkNs;
    }

    @Override
    public void idle(int workCount) {
        if (workCount > 0) {
            reset();
            return;
        }
        idleAtMost(Long.MAX_VALUE);
    }

    @Override
    public void idleAtMost(long maxNs) {
        long t = Math.min(parkNs, maxNs);
        if (t > 0) {
            parker.park(t);
        }
        parkNs = Math.min(parkNs << 1, maxParkNs);
    }

    @Override
    public void reset() {
        parkNs = minParkNs;
    }

    @Override
    public boolean parks() {
        return true;
    }

    @Override
    public String alias() {
        return "park:" + IdleStrategies.formatNs(minParkNs) + ":" + IdleStrategies.formatNs(maxParkNs);
    }
}
