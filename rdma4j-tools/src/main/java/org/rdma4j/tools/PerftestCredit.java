// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

import org.rdma4j.tools.Perftest.RunException;
import org.rdma4j.tools.PerftestOptions.Verb;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.TransportType;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * perftest's receive credits of {@code ib_send_bw} on iWARP ({@code send_bw.c} sets {@code ctx.send_rcredit}
 * when the device's transport is iWARP). iWARP has no RNR NAK: a SEND that finds no posted receive ends the
 * connection. So the receiver tells the sender, by a 4-byte RDMA WRITE into a credit word the sender
 * advertised in place of its buffer's address and rkey ({@code ctx_alloc_credit}), how many SENDs of each QP
 * it has taken, every {@code rx_depth / 3} receives ({@code run_iter_bw_server}); the sender posts only while
 * {@code scnt + post_list - credit < rx_depth} ({@code run_iter_bw}). Both sides of perftest do it, so a
 * Linux client waits for these credits and stops one SEND short of {@code rx_depth} without them (seen in
 * the VM: our server on siw0 took 99 of 100 and Linux's client waited forever).
 */
final class PerftestCredit implements AutoCloseable {
    private static final VarHandle INT = ValueLayout.JAVA_INT.varHandle();

    private final int n;
    /** Words [0, n): what this side writes to the peer (ctrl_buf); [n, 2n): what the peer writes here. */
    private final MemorySegment words;
    private final MemoryRegion mr;
    /** ctx->credit_cnt: a credit WRITE every this many receives of a QP. */
    private final int every;
    private final int rxDepth;
    private final int txDepth;
    private final SendWorkRequest[] wrs;
    private final int[] inFlight;
    private int totInFlight;
    private final WorkCompletion[] wcs = PerftestSide.newWcs(16);

    /**
     * @return whether the run uses credits: ib_send_bw (not the latency test) on an iWARP device
     */
    static boolean applies(PerftestOptions o, Context ctx) {
        return o.verb == Verb.SEND && !o.lat && ctx.device().transportType() == TransportType.IWARP;
    }

    /** ctx_alloc_credit: the words, registered for the peer's WRITEs. */
    PerftestCredit(ProtectionDomain pd, Arena arena, int numQps, int rxDepth, int txDepth) {
        this.n = numQps;
        this.rxDepth = rxDepth;
        this.txDepth = Math.max(txDepth, 1);
        // perftest divides by rx_depth / 3 and crashes below 3; one credit per receive then
        this.every = Math.max(rxDepth / 3, 1);
        this.words = arena.allocate(2L * numQps * Integer.BYTES, 64);
        this.mr = pd.regMr(words, AccessFlag.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE));
        this.wrs = new SendWorkRequest[numQps];
        this.inFlight = new int[numQps];
    }

    /** {@return {@code d} with the credit word of QP {@code i} in place of its buffer's address and rkey} */
    PerftestFormat.Dest advertise(int i, PerftestFormat.Dest d) {
        return new PerftestFormat.Dest(d.lid(), d.qpn(), d.psn(), mr.rkey(), mr.address() + (long) (n + i) * Integer.BYTES,
                d.gid(), d.outReads());
    }

    /** ctx_set_credit_wqes: one signaled 4-byte WRITE per QP into the peer's credit word. */
    void peer(PerftestFormat.Dest[] rem) {
        for (int i = 0; i < n; i++) {
            wrs[i] = new SendWorkRequest(1).opcode(WrOpcode.RDMA_WRITE).sendFlags(SendFlags.SIGNALED).wrId(i)
                    .singleSge(mr.address() + (long) i * Integer.BYTES, Integer.BYTES, mr.lkey())
                    .remoteAddr(rem[i].vaddr()).rkey(rem[i].rkey());
        }
    }

    /** Zeroes the credit words the peer writes (a new message size: the receiver counts from 0 again). */
    void reset() {
        for (int q = 0; q < n; q++) {
            INT.setRelease(words, (long) (n + q) * Integer.BYTES, 0);
        }
    }

    /** {@return whether the sender may post {@code post} more SENDs on QP {@code q} after {@code scnt}} */
    boolean mayPost(int q, long scnt, int post) {
        int credit = (int) INT.getAcquire(words, (long) (n + q) * Integer.BYTES);
        int window = (int) scnt + post - credit; // uint32_t arithmetic, as perftest
        return Integer.compareUnsigned(window, rxDepth) < 0;
    }

    /**
     * The receiver took its {@code rcnt}-th SEND on QP {@code q} (and re-posted): every {@link #every} of
     * them (counted modulo rx_depth, as perftest), the count goes to the sender; at most tx_depth credit
     * WRITEs of a QP are in flight.
     */
    void received(QueuePair qp, CompletionQueue sendCq, int q, long rcnt) {
        if ((rcnt % rxDepth) % every != 0) {
            return;
        }
        INT.setRelease(words, (long) q * Integer.BYTES, (int) rcnt);
        long deadline = System.nanoTime() + PerftestSide.STALL_NS;
        while (inFlight[q] >= txDepth) {
            reap(sendCq, deadline);
        }
        if (!qp.postSend(wrs[q])) {
            throw new RunException("Couldn't post send qp " + q + " credit = " + rcnt + ": " + wrs[q].postErrorMessage());
        }
        inFlight[q]++;
        totInFlight++;
    }

    /** clean_scq_credit: waits for every credit WRITE still in flight. */
    void drain(CompletionQueue sendCq) {
        long deadline = System.nanoTime() + PerftestSide.STALL_NS;
        while (totInFlight > 0) {
            reap(sendCq, deadline);
        }
    }

    private void reap(CompletionQueue sendCq, long deadline) {
        int ne = sendCq.poll(wcs, wcs.length);
        for (int i = 0; i < ne; i++) {
            WorkCompletion wc = wcs[i];
            if (wc.status() != WcStatus.SUCCESS) {
                throw new RunException("Poll send CQ error status=" + wc.status().value() + " ("
                        + wc.status().description() + ") qp " + wc.wrId() + " (a receive credit WRITE)");
            }
            inFlight[(int) wc.wrId()]--;
            totInFlight--;
        }
        if (ne == 0) {
            if (System.nanoTime() - deadline > 0) {
                throw new RunException("No completion of a receive credit WRITE for " + PerftestSide.STALL_NS / 1_000_000_000L
                        + " s (" + totInFlight + " in flight)");
            }
            Thread.yield();
        }
    }

    @Override
    public void close() {
        mr.close();
    }
}
