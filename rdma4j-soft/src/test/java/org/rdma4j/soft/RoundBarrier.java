// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

/**
 * Two threads of a race test, rounds started together: the checking thread starts a round, its partner waits
 * for it, races, and says it is done. Spins only; every wait of the checking thread is bounded in time.
 */
final class RoundBarrier {
    private volatile int started;
    private volatile int done;
    private volatile boolean stopped;

    void start(int round) {
        started = round;
    }

    /** @return false once stopped */
    boolean awaitStart(int round) {
        while (started < round) {
            if (stopped) {
                return false;
            }
            Thread.onSpinWait();
        }
        return !stopped;
    }

    /** The partner finished {@code round} (Integer.MAX_VALUE: it ended). */
    void partnerDone(int round) {
        done = round;
    }

    void awaitPartner(int round, long deadline, String partner) {
        while (done < round) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("the " + partner + " did not finish round " + round);
            }
            Thread.onSpinWait();
        }
    }

    void stop() {
        stopped = true;
    }
}
