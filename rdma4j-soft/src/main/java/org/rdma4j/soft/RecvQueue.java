// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.foreign.MemorySegment;

import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.ScatterGatherEntry;

/**
 * A receive queue (a QP's own or an SRQ's): a ring of copied receive WQEs. Posting threads take the
 * queue's monitor; the engine consumes on the QP's executor (an SRQ's consumers under the monitor too). Thread-safe.
 */
final class RecvQueue {
    final int capacity;
    final int maxSge;
    final long[] wrId;
    final int[] numSge;
    final long[][] addr;
    final int[][] len;
    final int[][] lkey;
    /** The CPU memory of DMA-mapped entries (local DMA L_Key), else null. */
    final MemorySegment[][] buf;
    private final PaddedIndexes idx = new PaddedIndexes();

    private final int mask;

    RecvQueue(int capacity, int maxSge) {
        this.capacity = capacity;
        this.maxSge = maxSge;
        int n = Bytes.ceilPow2(capacity);
        mask = n - 1;
        wrId = new long[n];
        numSge = new int[n];
        addr = new long[n][maxSge];
        len = new int[n][maxSge];
        lkey = new int[n][maxSge];
        buf = new MemorySegment[n][maxSge];
    }

    /**
     * Copies a receive WQE in (rxe post_one_recv).
     *
     * @param owner the QP or SRQ, named in the refusal's message
     * @return whether it was posted; if not, the request's postError and message say why
     */
    synchronized boolean post(RecvWorkRequest wr, SoftResource owner) {
        int n = wr.numSge();
        if (n > maxSge) {
            wr.postError(Errno.EINVAL, "num_sge " + n + " exceeds max_recv_sge " + maxSge + " of " + owner.describe()
                    + " (ask for more when creating it)");
            return false;
        }
        long p = idx.producer();
        if (p - idx.consumer() >= capacity) {
            wr.postError(Errno.ENOMEM, fullMessage(owner));
            return false;
        }
        int slot = (int) p & mask;
        for (int i = 0; i < n; i++) {
            ScatterGatherEntry s = wr.sge(i);
            if (s.length() < 0) {
                wr.postError(Errno.EINVAL, "sge[" + i + "] has length " + s.length() + " (lengths are unsigned"
                        + " 32-bit in verbs; rdma4j takes 0.." + Integer.MAX_VALUE + ")");
                return false;
            }
            addr[slot][i] = s.addr();
            len[slot][i] = s.length();
            lkey[slot][i] = s.lkey();
            MemorySegment b = s.segment();
            if (buf[slot][i] != b) {
                buf[slot][i] = b;
            }
        }
        numSge[slot] = n;
        wrId[slot] = wr.wrId();
        idx.producer(p + 1);
        wr.postError(null, null);
        return true;
    }

    /** The full-queue sentence, made once (a full queue may be hit in a loop). */
    private String fullMessage;

    private String fullMessage(SoftResource owner) {
        String m = fullMessage;
        if (m == null) {
            m = fullMessage = "receive queue of " + owner.describe() + " is full (" + capacity
                    + " receives posted and not yet consumed): wait for receive completions before posting more";
        }
        return m;
    }

    boolean isEmpty() {
        return idx.producer() == idx.consumer();
    }

    int count() {
        return (int) (idx.producer() - idx.consumer());
    }

    /** {@return the slot of the oldest WQE; the queue must not be empty} */
    int headSlot() {
        return (int) idx.consumer() & mask;
    }

    /** Consumes the oldest WQE. The consumer only (the QP's owner; for an SRQ, under its monitor). */
    void advance() {
        idx.consumer(idx.consumer() + 1);
    }

    long totalLength(int slot) {
        long t = 0;
        for (int i = 0; i < numSge[slot]; i++) {
            t += len[slot][i];
        }
        return t;
    }

    /** Drops everything (RESET). */
    synchronized void reset() {
        idx.consumer(idx.producer());
    }
}
