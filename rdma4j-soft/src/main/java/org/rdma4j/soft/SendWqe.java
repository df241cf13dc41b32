// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.foreign.MemorySegment;

import org.rdma4j.verbs.WrOpcode;

/**
 * A send-queue slot: the posted request copied out of the user's {@link org.rdma4j.verbs.SendWorkRequest}
 * (inline data included: in the QP's inline area, at {@link #inlineOff}) plus the engine's progress on it. An
 * INLINE request's scatter list is not copied (its bytes are), and its {@link #sgl} is not used: the requester
 * reads the inline area, so posting one touches the slot and one line of inline data, not the slot's lists too
 * (docs/benchmarks.md, the message-rate profile). Accessed by the QP's owner only (its executor).
 */
final class SendWqe {
    static final int POSTED = 0;
    /** Started: some packets may have been sent. */
    static final int PROCESSING = 1;
    /** All packets sent; waiting for the acknowledgement or response (RC). */
    static final int PENDING = 2;
    static final int DONE = 3;
    /**
     * Rewound by go-back-N and not yet sent again: the completer ignores responses to it until the
     * requester resends (rxe req_retry puts the WQE back to posted, and the completer's get_wqe
     * ignores posted WQEs), so one loss episode causes one retry.
     */
    static final int RETRY = 4;
    /**
     * Behind the first WQE of a go-back-N, sent whole before and not yet sent again (its PSNs stay those
     * of that pass): the requester starts it anew. An ACK that covers the last PSN of a SEND or WRITE in
     * this state completes it first, and the requester may skip it as already sent (the responder holds
     * what followed a gap: docs/roce.md, "Loss recovery").
     */
    static final int REWOUND = 5;

    long wrId;
    WrOpcode opcode;
    int flags;
    int imm;
    long remoteAddr;
    int rkey;
    long compareAdd;
    long swap;
    SoftAh ah;
    int remoteQpn;
    int remoteQkey;
    boolean signaled;
    int numSge;
    final long[] addr;
    final int[] len;
    final int[] lkey;
    /** The CPU memory named with each SGE ({@code ScatterGatherEntry.dma}/{@code inline}), or null. */
    final MemorySegment[] buf;
    /** Where this slot's inline data lives in its QP's inline area ({@link SoftQp#inlineArea}). */
    final long inlineOff;
    boolean inline;
    long length;

    // engine progress
    int state;
    int firstPsn;
    int lastPsn;
    long sent;
    long received;
    boolean tookCredit;
    final Sgl sgl;
    // DMA checker only: payload checksum at post, and the posting stack
    long postCrc;
    Throwable postedAt;

    SendWqe(int maxSge, long inlineOff, org.rdma4j.dma.DmaSpace dma) {
        addr = new long[maxSge];
        len = new int[maxSge];
        lkey = new int[maxSge];
        buf = new MemorySegment[maxSge];
        this.inlineOff = inlineOff;
        sgl = new Sgl(maxSge, dma);
    }
}
