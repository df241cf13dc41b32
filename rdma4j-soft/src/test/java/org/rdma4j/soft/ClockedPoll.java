// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

import org.rdma4j.common.ManualClock;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.WorkCompletion;

/**
 * Busy-polls a CQ for one completion while a manual clock follows wall time, for tests whose packets really travel
 * (RoCE on loopback) and whose retransmit timers must run at the pace they do.
 */
final class ClockedPoll {
    private ClockedPoll() {
    }

    /**
     * Polls until a completion with {@code id} comes, others being skipped; every 200 µs of wall time the clock is
     * moved on by as much.
     *
     * @param clock the fabric's manual clock, or null for a system-clock fabric
     * @param bound how long to wait at most
     * @return the completion
     * @throws AssertionError if none came within {@code bound}
     */
    static WorkCompletion await(CompletionQueue cq, long id, ManualClock clock, Duration bound) {
        WorkCompletion wc = new WorkCompletion();
        long last = System.nanoTime();
        long deadline = last + bound.toNanos();
        while (System.nanoTime() - deadline < 0) {
            if (cq.poll(wc)) {
                if (wc.wrId() == id) {
                    return wc;
                }
                continue;
            }
            long now = System.nanoTime();
            if (clock != null && now - last >= TimeUnit.MICROSECONDS.toNanos(200)) {
                clock.advance(now - last);
                last = now;
            }
            Thread.onSpinWait();
        }
        throw new AssertionError("no completion for wr_id " + id + " within " + bound);
    }
}
