// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common.agent;

/**
 * Spins, then yields, then parks with a doubling park, over consecutive idle cycles (Agrona's
 * {@code BackoffIdleStrategy}): a thread woken by new work a few microseconds after it went idle finds it
 * while still spinning, one idle for longer gives its core away. Not thread-safe: one instance per thread.
 */
public final class BackoffIdleStrategy implements IdleStrategy {
    private final long maxSpins;
    private final long maxYields;
    private final long minParkNs;
    private final long maxParkNs;
    private final Parker parker;
    private long spins;
    private long yields;
    private long parkNs;

    /**
     * A backoff that parks the thread.
     *
     * @param maxSpins  idle cycles that return at once
     * @param maxYields idle cycles that yield, after the spins
     * @param minParkNs first park, at least 1 ns
     * @param maxParkNs longest park, at least {@code minParkNs}
     */
    public BackoffIdleStrategy(long maxSpins, long maxYields, long minParkNs, long maxParkNs) {
        this(maxSpins, maxYields, minParkNs, maxParkNs, Parker.THREAD);
    }

    /**
     * A backoff that parks with the given parker.
     *
     * @param maxSpins  idle cycles that return at once
     * @param maxYields idle cycles that yield, after the spins
     * @param minParkNs first park, at least 1 ns
     * @param maxParkNs longest park, at least {@code minParkNs}
     * @param parker    how to park (the thread, or a wait for a descriptor)
     */
    public BackoffIdleStrategy(long maxSpins, long maxYields, long minParkNs, long maxParkNs, Parker parker) {
        if (maxSpins < 0 || maxYields < 0 || minParkNs < 1 || maxParkNs < minParkNs) {
            throw new IllegalArgumentException("maxSpins=" + maxSpins + ", maxYields=" + maxYields + ", minParkNs="
                    + minParkNs + ", maxParkNs=" + maxParkNs + " (expected >= 0, >= 0, 1 <= min <= max)");
        }
        this.maxSpins = maxSpins;
        this.maxYields = maxYields;
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
        if (spins < maxSpins) {
            spins++;
        } else if (yields < maxYields) {
            yields++;
            Thread.yield();
        } else {
            long t = Math.min(parkNs, maxNs);
            if (t > 0) {
                parker.park(t);
            }
            parkNs = Math.min(parkNs << 1, maxParkNs);
        }
    }

    @Override
    public void reset() {
        spins = 0;
        yields = 0;
        parkNs = minParkNs;
    }

    @Override
    public boolean parks() {
        return true;
    }

    @Override
    public String alias() {
        return "backoff:" + maxSpins + ":" + maxYields + ":" + IdleStrategies.formatNs(minParkNs) + ":"
                + IdleStrategies.formatNs(maxParkNs);
    }
}
