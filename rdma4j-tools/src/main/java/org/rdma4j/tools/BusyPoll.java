// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

/**
 * How the tools wait for a completion or a peer's write: like rdma-core's and perftest's busy poll, but
 * giving the core away once a wait is more than a few polls long. On a NIC the poller has a core to itself
 * and the hardware works beside it; here the device's own threads (the RoCE receive agent, the timer) and,
 * between two processes on one host, the peer's poller need the same few cores. A poller that spun for
 * a thousand polls before yielding held a core for a millisecond or more while the peer, whose answer it
 * waited for, sat runnable behind it: two-process {@code rc_pingpong} over RoCE took 2-6 ms per round trip
 * where {@code ib_send_lat}, which yielded after 64, took tens of microseconds (issue 16 item 12;
 * docs/benchmarks.md). One policy for every tool: spin {@link #SPINS_BEFORE_YIELD} times, then yield on
 * every poll until something arrives.
 */
final class BusyPoll {
    /**
     * Polls spent spinning before each further empty poll yields ({@code -Drdma4j.tools.spins}; the older
     * {@code -Drdma4j.perftest.spins} is read too). Pure spinning (a large value) gives the best t_typical on
     * an idle machine and a far worse t_avg on a busy one, where a spinning side is preempted; 64 keeps both
     * sides responsive on 2 vCPUs.
     */
    static final int SPINS_BEFORE_YIELD = Integer.getInteger("rdma4j.tools.spins",
            Integer.getInteger("rdma4j.perftest.spins", 64));

    private BusyPoll() {
    }

    /**
     * Waits once after an empty poll.
     *
     * @param spins how many empty polls this wait has made so far (0 after something arrived)
     * @return {@code spins + 1}
     */
    static int idle(int spins) {
        if (spins < SPINS_BEFORE_YIELD) {
            Thread.onSpinWait();
        } else {
            Thread.yield();
        }
        return spins + 1;
    }

    /**
     * {@return whether the next {@link #idle} yields}
     *
     * @param spins the empty polls of a wait so far
     */
    static boolean yields(int spins) {
        return spins >= SPINS_BEFORE_YIELD;
    }
}
