// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit.model;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;

import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.WorkCompletion;

/**
 * Bounded polling: completions may come from device threads, so tests spin (no sleeping) until they
 * have what they expect or a wall-clock deadline passes, and then fail saying what they got.
 */
final class Completions {
    private Completions() {
    }

    /**
     * Polls until exactly {@code n} completions were taken.
     *
     * @param cq         the CQ
     * @param n          how many are expected
     * @param deadlineNs {@link System#nanoTime()} deadline
     * @param what       describes the CQ and the operations, for the failure message
     * @return the completions, copied, in CQ order
     */
    static List<WorkCompletion> take(CompletionQueue cq, int n, long deadlineNs, Supplier<String> what) {
        List<WorkCompletion> got = new ArrayList<>(n);
        WorkCompletion[] wcs = newArray(16);
        long spins = 0;
        while (got.size() < n) {
            int k = cq.poll(wcs, Math.min(wcs.length, n - got.size()));
            for (int i = 0; i < k; i++) {
                got.add(new WorkCompletion().copyFrom(wcs[i]));
            }
            if (k == 0) {
                if (System.nanoTime() - deadlineNs > 0) {
                    throw new AssertionError("timed out waiting for completions: got " + got.size() + " of " + n
                            + " " + got + "\n" + what.get());
                }
                if ((++spins & 0x3FF) == 0) {
                    Thread.yield();
                } else {
                    Thread.onSpinWait();
                }
            }
        }
        return got;
    }

    /**
     * Asserts the CQ holds nothing more right now.
     *
     * @param cq   the CQ
     * @param what context for the failure message
     */
    static void assertEmpty(CompletionQueue cq, Supplier<String> what) {
        WorkCompletion wc = new WorkCompletion();
        if (cq.poll(wc)) {
            List<WorkCompletion> extra = new ArrayList<>();
            extra.add(new WorkCompletion().copyFrom(wc));
            while (extra.size() < 64 && cq.poll(wc)) {
                extra.add(new WorkCompletion().copyFrom(wc));
            }
            throw new AssertionError("unexpected extra completions " + extra + "\n" + what.get());
        }
    }

    /** {@return {@code n} fresh completion objects} */
    static WorkCompletion[] newArray(int n) {
        WorkCompletion[] wcs = new WorkCompletion[n];
        for (int i = 0; i < n; i++) {
            wcs[i] = new WorkCompletion();
        }
        return wcs;
    }
}
