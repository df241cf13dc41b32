// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.foreign.MemorySegment;

import org.rdma4j.dma.DmaSpace;
import org.rdma4j.verbs.ScatterGatherEntry;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WrOpcode;

/**
 * A QP's send queue (docs/engine.md, "Rings"), the twin of {@link RecvQueue}: a ring of fixed-size slots, each the
 * posted request copied out of the user's {@link SendWorkRequest} plus the engine's progress on it, and the three
 * indexes the roles move. Slots {@code [comp, head)} are outstanding: {@code head} is the next slot a post fills,
 * {@code req} the next WQE the requester starts or goes on with, {@code comp} the oldest WQE not yet completed
 * ({@code comp <= req <= head}, but for a requester the completer leaves behind, {@link #reqBehindComp}).
 *
 * <p>A WQE is named by its slot number ({@code int}, from {@link #slot}, {@link #reqSlot}, {@link #compSlot}):
 * every field lives in primitive arrays, so posting and completing allocate nothing and store no reference (a
 * reference store into an old object is a G1 card-marking barrier: docs/benchmarks.md, "Session 4"). One
 * {@code long[]} holds the fields of slot {@code s} at {@code s * STRIDE} (16 longs, two cache lines), a second
 * its scatter list at {@code s * 2 * maxSge} (address, then length and L_Key in one word). What cannot be
 * primitive sits in arrays indexed by slot, stored only when it changes: the UD address handle, the CPU memory of
 * each SGE, the resolved {@link Sgl} (made once per slot) and the DMA checker's posting stack. An INLINE
 * request's bytes are in the QP's inline area at {@link #inlineOff} (its scatter list is not copied and its
 * {@code Sgl} not used: the requester reads the inline area, so posting one touches the slot's first line and
 * one line of inline data, docs/benchmarks.md, the message-rate profile).
 *
 * <p>Memory ordering: none is needed. The queue is touched only under the QP's executor (docs/engine.md,
 * "Ownership": {@code postSend} copies in under it, the requester and the completer run under it), whose
 * acquire and release order every access, so all of them are plain. Not thread-safe otherwise.
 */
final class SendQueue {
    /** No WQE (what {@link Completer#outstanding} returns when there is none). */
    static final int NONE = -1;

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


    private static final int SHIFT = 4;
    /** Longs per slot: the fields below, padded to two cache lines. */
    private static final int STRIDE = 1 << SHIFT;
    private static final int WR_ID = 0;
    private static final int REMOTE_ADDR = 1;
    private static final int COMPARE_ADD = 2;
    private static final int SWAP = 3;
    /** The message's length: the sum of the SGEs', or the inline bytes copied. */
    private static final int LENGTH = 4;
    /** Bytes sent so far (a READ: bytes asked for). */
    private static final int SENT = 5;
    /** Bytes of READ response received so far. */
    private static final int RECEIVED = 6;
    /** DMA checker only: the payload's checksum when the requester started the WQE. */
    private static final int POST_CRC = 7;
    /** Send flags (bits 0-31), number of SGEs (40-55), signaled (56), inline (57); the opcode is in {@link #opcode}. */
    private static final int POSTED_WORD = 8;
    /** Immediate data (bits 32-63), R_Key (0-31). */
    private static final int IMM_RKEY = 9;
    /** Remote QP number (bits 32-63), remote Q_Key (0-31), of a UD send. */
    private static final int REMOTE_QP = 10;
    /** First PSN (bits 32-63), last PSN (0-31) of the requester's pass. */
    private static final int PSNS = 11;
    /** The WQE's state: {@link #POSTED} ... {@link #REWOUND}. */
    private static final int STATE = 12;
    /** 1 if the WQE holds an RDMA READ / atomic credit of the requester (rxe req.rd_atomic), else 0. */
    private static final int TOOK_CREDIT = 13;

    private static final long SIGNALED_BIT = 1L << 56;
    private static final long INLINE_BIT = 1L << 57;

    /** The most WQEs outstanding at once (max_send_wr). */
    final int capacity;
    final int maxSge;
    private final int mask;
    private final int inlineStride;
    private final long[] wqe;
    /** Per slot, maxSge pairs: address, then length (bits 32-63) and L_Key (0-31). */
    private final long[] sge;
    /** The CPU memory named with each SGE ({@code ScatterGatherEntry.dma}/{@code inline}), or null. */
    private final MemorySegment[] buf;
    private final SoftAh[] ah;
    /**
     * Per slot, the opcode: the roles ask it several questions per packet
     * (READ or atomic, immediate, write), and a reference in an array that changes only when the opcode does costs
     * one load where decoding the ordinal through {@code values()} cost three (the message-rate A/B of session 8).
     */
    private final WrOpcode[] opcode;
    private final Sgl[] sgl;
    /** DMA checker only: where each checked WQE was posted. */
    private final Throwable[] postedAt;

    private long head;
    private long req;
    private long comp;

    /**
     * @param capacity max_send_wr
     * @param maxSge   max_send_sge (at least 1)
     * @param inlineStride bytes of the QP's inline area per slot
     * @param dma      the device's DMA space, for the slots' resolved lists
     */
    SendQueue(int capacity, int maxSge, int inlineStride, DmaSpace dma) {
        this.capacity = capacity;
        this.maxSge = maxSge;
        this.inlineStride = inlineStride;
        int n = Bytes.ceilPow2(capacity);
        mask = n - 1;
        wqe = new long[n * STRIDE];
        sge = new long[n * 2 * maxSge];
        buf = new MemorySegment[n * maxSge];
        ah = new SoftAh[n];
        opcode = new WrOpcode[n];
        sgl = new Sgl[n];
        for (int i = 0; i < n; i++) {
            sgl[i] = new Sgl(maxSge, dma);
        }
        postedAt = new Throwable[n];
    }

    /** {@return the number of slots (a power of two, at least the capacity)} */
    int slots() {
        return mask + 1;
    }

    // ------------------------------------------------------------------ indexes

    /** {@return the slot of ring index {@code idx}} */
    int slot(long idx) {
        return (int) idx & mask;
    }

    long head() {
        return head;
    }

    long req() {
        return req;
    }

    long comp() {
        return comp;
    }

    /** {@return whether no WQE is outstanding} */
    boolean isEmpty() {
        return comp == head;
    }

    /** {@return whether max_send_wr WQEs are outstanding: a post must be refused} */
    boolean isFull() {
        return head - comp >= capacity;
    }

    /** {@return the number of WQEs posted and not completed} */
    int count() {
        return (int) (head - comp);
    }

    /** {@return whether a posted WQE waits for the requester (to start or to go on)} */
    boolean hasWork() {
        return req != head;
    }

    /** {@return whether the requester's WQE is the last one posted so far} */
    boolean reqIsLast() {
        return req + 1 == head;
    }

    /** {@return whether every WQE before the requester's has completed (a FENCE may go)} */
    boolean reqAtComp() {
        return req == comp;
    }

    /** {@return whether the completer completed the WQE the requester is on (it was resending it)} */
    boolean reqBehindComp() {
        return req - comp < 0;
    }

    /** {@return the slot of the requester's WQE; {@link #hasWork} must hold} */
    int reqSlot() {
        return (int) req & mask;
    }

    /** {@return the slot of the oldest outstanding WQE; the queue must not be empty} */
    int compSlot() {
        return (int) comp & mask;
    }

    /** The requester is done with its WQE (sent whole, completed or failed without a packet). */
    void advanceReq() {
        req++;
    }

    /** Puts the requester back at the oldest outstanding WQE (go-back-N, or it fell behind the completer). */
    void rewindReq() {
        req = comp;
    }

    /** Puts the requester at ring index {@code idx}, in {@code [comp, head]} (the completer's skip ahead). */
    void moveReq(long idx) {
        req = idx;
    }

    /** The requester has nothing left to send (the queue is flushed). */
    void reqToHead() {
        req = head;
    }

    /** The oldest outstanding WQE has completed. */
    void advanceComp() {
        comp++;
    }

    /** Drops everything (RESET). */
    void reset() {
        head = 0;
        req = 0;
        comp = 0;
    }

    // ------------------------------------------------------------------ posting

    /** {@return the slot the next post fills; {@link #isFull} must not hold} */
    int headSlot() {
        return (int) head & mask;
    }

    /**
     * Copies the request's fields but its scatter list into slot {@code s} (the head slot): SGEs follow with
     * {@link #setSge} (or the inline bytes and {@link #setLength}), then {@link #publish}.
     */
    void write(int s, SendWorkRequest wr, boolean signaled) {
        int b = s << SHIFT;
        long[] w = wqe;
        int flags = wr.sendFlags();
        WrOpcode o = wr.opcode();
        w[b + WR_ID] = wr.wrId();
        w[b + REMOTE_ADDR] = wr.remoteAddr();
        w[b + COMPARE_ADD] = wr.compareAdd();
        w[b + SWAP] = wr.swap();
        w[b + POSTED_WORD] = (flags & 0xFFFF_FFFFL) | (long) (wr.numSge() & 0xFFFF) << 40 | (signaled ? SIGNALED_BIT : 0)
                | ((flags & SendFlags.INLINE) != 0 ? INLINE_BIT : 0);
        w[b + IMM_RKEY] = pack(wr.immData(), wr.rkey());
        w[b + REMOTE_QP] = pack(wr.remoteQpn(), wr.remoteQkey());
        if (opcode[s] != o) {
            opcode[s] = o; // reference stores only when they change: no GC barrier per request
        }
        SoftAh a = (SoftAh) wr.ah();
        if (ah[s] != a) {
            ah[s] = a; // reference stores only when they change: no GC barrier per request
        }
    }

    /** Copies SGE {@code i} of slot {@code s}. */
    void setSge(int s, int i, ScatterGatherEntry e) {
        int j = (s * maxSge + i) << 1;
        sge[j] = e.addr();
        sge[j + 1] = pack(e.length(), e.lkey());
        MemorySegment m = e.segment();
        int k = s * maxSge + i;
        if (buf[k] != m) {
            buf[k] = m; // the CPU memory of a DMA-mapped entry; skip the store when unchanged
        }
    }

    /** Makes the WQE in the head slot outstanding, POSTED with no progress. */
    void publish(int s) {
        int b = s << SHIFT;
        wqe[b + STATE] = POSTED;
        wqe[b + SENT] = 0;
        wqe[b + RECEIVED] = 0;
        wqe[b + TOOK_CREDIT] = 0;
        head++;
    }

    private static long pack(int hi, int lo) {
        return (long) hi << 32 | (lo & 0xFFFF_FFFFL);
    }

    // ------------------------------------------------------------------ posted fields

    long wrId(int s) {
        return wqe[(s << SHIFT) + WR_ID];
    }

    WrOpcode opcode(int s) {
        return opcode[s];
    }

    int flags(int s) {
        return (int) wqe[(s << SHIFT) + POSTED_WORD];
    }

    int numSge(int s) {
        return (int) (wqe[(s << SHIFT) + POSTED_WORD] >>> 40) & 0xFFFF;
    }

    boolean signaled(int s) {
        return (wqe[(s << SHIFT) + POSTED_WORD] & SIGNALED_BIT) != 0;
    }

    boolean inline(int s) {
        return (wqe[(s << SHIFT) + POSTED_WORD] & INLINE_BIT) != 0;
    }

    int imm(int s) {
        return (int) (wqe[(s << SHIFT) + IMM_RKEY] >>> 32);
    }

    int rkey(int s) {
        return (int) wqe[(s << SHIFT) + IMM_RKEY];
    }

    long remoteAddr(int s) {
        return wqe[(s << SHIFT) + REMOTE_ADDR];
    }

    long compareAdd(int s) {
        return wqe[(s << SHIFT) + COMPARE_ADD];
    }

    long swap(int s) {
        return wqe[(s << SHIFT) + SWAP];
    }

    int remoteQpn(int s) {
        return (int) (wqe[(s << SHIFT) + REMOTE_QP] >>> 32);
    }

    int remoteQkey(int s) {
        return (int) wqe[(s << SHIFT) + REMOTE_QP];
    }

    SoftAh ah(int s) {
        return ah[s];
    }

    long length(int s) {
        return wqe[(s << SHIFT) + LENGTH];
    }

    void setLength(int s, long v) {
        wqe[(s << SHIFT) + LENGTH] = v;
    }

    long sgeAddr(int s, int i) {
        return sge[(s * maxSge + i) << 1];
    }

    int sgeLen(int s, int i) {
        return (int) (sge[((s * maxSge + i) << 1) + 1] >>> 32);
    }

    int sgeLkey(int s, int i) {
        return (int) sge[((s * maxSge + i) << 1) + 1];
    }

    MemorySegment sgeBuf(int s, int i) {
        return buf[s * maxSge + i];
    }

    /** {@return where slot {@code s}'s inline data lives in its QP's inline area ({@link SoftQp#inlineArea})} */
    long inlineOff(int s) {
        return (long) s * inlineStride;
    }

    // ------------------------------------------------------------------ progress

    int state(int s) {
        return (int) wqe[(s << SHIFT) + STATE];
    }

    void setState(int s, int v) {
        wqe[(s << SHIFT) + STATE] = v;
    }

    int firstPsn(int s) {
        return (int) (wqe[(s << SHIFT) + PSNS] >>> 32);
    }

    int lastPsn(int s) {
        return (int) wqe[(s << SHIFT) + PSNS];
    }

    void setPsns(int s, int first, int last) {
        wqe[(s << SHIFT) + PSNS] = pack(first, last);
    }

    long sent(int s) {
        return wqe[(s << SHIFT) + SENT];
    }

    void setSent(int s, long v) {
        wqe[(s << SHIFT) + SENT] = v;
    }

    long received(int s) {
        return wqe[(s << SHIFT) + RECEIVED];
    }

    void setReceived(int s, long v) {
        wqe[(s << SHIFT) + RECEIVED] = v;
    }

    boolean tookCredit(int s) {
        return wqe[(s << SHIFT) + TOOK_CREDIT] != 0;
    }

    void setTookCredit(int s, boolean v) {
        wqe[(s << SHIFT) + TOOK_CREDIT] = v ? 1 : 0;
    }

    /** {@return slot {@code s}'s resolved scatter list (the requester fills it when it starts the WQE)} */
    Sgl sgl(int s) {
        return sgl[s];
    }

    long postCrc(int s) {
        return wqe[(s << SHIFT) + POST_CRC];
    }

    void setPostCrc(int s, long v) {
        wqe[(s << SHIFT) + POST_CRC] = v;
    }

    Throwable postedAt(int s) {
        return postedAt[s];
    }

    /** Stored only when it changes (null on every start of an unchecked WQE). */
    void setPostedAt(int s, Throwable t) {
        if (postedAt[s] != t) {
            postedAt[s] = t;
        }
    }
}
