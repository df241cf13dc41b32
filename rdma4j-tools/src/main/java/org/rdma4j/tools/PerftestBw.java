// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.rdma4j.tools.PerftestSide.PEER_CHECK_NS;
import static org.rdma4j.tools.PerftestSide.STALL_NS;

import java.io.IOException;
import java.util.List;

import org.rdma4j.tools.Perftest.RunException;
import org.rdma4j.tools.PerftestOptions.Verb;
import org.rdma4j.tools.PerftestSide.Interrupted;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WorkCompletion;

/**
 * The bandwidth tests (ib_send_bw, ib_write_bw, ib_read_bw, ib_atomic_bw) on a connected {@link PerftestSide}:
 * perftest's {@code run_iter_bw} on the client (and the sender of SEND), {@code run_iter_bw_server} on the
 * receiver of SEND, and each tool's order of hand-shakes and report lines around them.
 */
final class PerftestBw extends PerftestRunner {
    private final PerftestFormat.Dest[] rem;
    private final int txDepth;
    private final int cqMod;
    private final List<PerftestFormat.Report> reports;
    /** ib_send_bw on iWARP: perftest's receive credits, or null. */
    private final PerftestCredit credit;

    /** A runner on {@code side}, whose QPs are connected. */
    PerftestBw(PerftestSide side) {
        super(side);
        this.rem = side.rem;
        this.txDepth = side.txDepth;
        this.cqMod = side.cqMod;
        this.reports = side.results.reports;
        this.credit = side.credit;
    }

    @Override
    int run() throws IOException {
        boolean duration = o.duration > 0;
        int margin = margin();
        boolean noPeak = side.noPeak;
        double unit = o.reportGbits ? PerftestFormat.GBS : PerftestFormat.MBS;
        if (side.printing()) {
            text.print(PerftestFormat.resultHeader(o.reportGbits));
            text.flush();
        }
        if (o.verb != Verb.SEND && !client) {
            // write_bw.c / read_bw.c / atomic_bw.c: the server waits for the client's end and prints its report.
            ch.handShake(my[0], withGid);
            PerftestFormat.Report remote = ch.exchangeReports(new PerftestFormat.Report(0, 0, 0, 0, 0));
            reports.add(remote);
            if (side.printing()) {
                text.print(PerftestFormat.reportLine(remote, o.reportGbits));
            }
            ch.handShake(my[0], withGid);
            if (side.printing()) {
                text.print(PerftestFormat.RESULT_LINE);
            }
            side.finish();
            return 0;
        }
        PerftestFormat.Report last = null;
        for (long size : side.sizes()) {
            if (o.verb == Verb.SEND) {
                if (!client) {
                    side.postReceives(size);
                }
                ch.handShake(my[0], withGid);
                if (credit != null) {
                    credit.reset(); // send_bw.c: every size starts with no credit (the server counts anew)
                }
            } else if (o.warmUp) {
                runClientBw(size, true, false, 0, 0, unit);
            }
            PerftestFormat.Report r;
            try {
                r = client ? runClientBw(size, noPeak, duration, o.duration, margin, unit)
                        : runServerBw(size, duration, o.duration, margin, unit);
            } catch (Interrupted i) {
                r = i.report;
            }
            reports.add(r);
            last = r;
            if (side.printing()) {
                text.print(PerftestFormat.reportLine(r, o.reportGbits));
                text.flush();
            }
            if (stop.stopped()) {
                side.stoppedAfterReport();
            }
            if (o.verb == Verb.SEND && o.all) {
                // send_bw.c hand-shakes after each size only under -a (RUN_ALL); a single size (RUN_REGULAR)
                // goes from print_report_bw straight to ctx_close_connection. One more here made us read
                // perftest's "done" and its close as the next hand-shake: "the peer closed the connection",
                // exit 1 after a good run (seen in the VM against perftest 4.5's ib_send_bw on rxe0, both roles).
                ch.handShake(my[0], withGid);
            }
        }
        if (side.printing()) {
            text.print(PerftestFormat.RESULT_LINE);
        }
        if (o.verb != Verb.SEND) {
            ch.handShake(my[0], withGid);
            ch.exchangeReports(last);
        }
        ch.handShake(my[0], withGid);
        side.finish();
        return 0;
    }

    /** run_iter_bw for one message size (the client, or the sender of SEND), then print_report_bw. */
    private PerftestFormat.Report runClientBw(long size, boolean noPeak, boolean duration, int durationS,
                                              int marginS, double unit) {
        int numQps = o.numQps;
        long iters = o.iters;
        long totIters = duration ? 0 : iters * numQps;
        int post = o.postList;
        long[] scnt = new long[numQps];
        long[] ccnt = new long[numQps];
        boolean[] flushed = new boolean[numQps];
        int flagsBase = size <= inline && o.verb != Verb.READ && o.verb != Verb.ATOMIC ? SendFlags.INLINE : 0;
        SendWorkRequest[][] lists = new SendWorkRequest[post][];
        for (int l = 0; l < post; l++) {
            lists[l] = side.sendWrs(size, flagsBase);
        }
        SendWorkRequest[] batch = new SendWorkRequest[post];
        long[] locBase = new long[numQps];
        long[] remBase = new long[numQps];
        for (int q = 0; q < numQps; q++) {
            locBase[q] = mrs[q].address();
            remBase[q] = rem[q].vaddr();
        }
        boolean cycle = size <= PerftestWire.CYCLE_BUFFER / 2 && o.verb != Verb.ATOMIC;
        long inc = size > PerftestWire.CACHE_LINE_SIZE ? PerftestSide.alignUp(size, PerftestWire.CACHE_LINE_SIZE)
                : PerftestWire.CACHE_LINE_SIZE;
        long perCycle = PerftestWire.CYCLE_BUFFER / inc;

        long[] tposted = noPeak ? null : new long[(int) totIters];
        int maxCompletions = noPeak ? 0 : (int) (totIters / Math.max(cqMod, 1) + numQps + 1);
        int[] compIdx = noPeak ? null : new int[maxCompletions];
        long[] compTime = noPeak ? null : new long[maxCompletions];
        int completions = 0;

        WorkCompletion[] wcs = PerftestSide.newWcs(16);
        long totscnt = 0;
        long totccnt = 0;
        long start = System.nanoTime();
        long t0 = start;
        long t1 = 0;
        // duration: 0 START (warm-up margin), 1 SAMPLE, 2 STOP_SAMPLE (cool-down margin), 3 END
        int state = duration && marginS == 0 ? 1 : 0;
        long sampleStart = start + marginS * 1_000_000_000L;
        long sampleEnd = start + (long) (durationS - marginS) * 1_000_000_000L;
        long end = start + durationS * 1_000_000_000L;
        long sampled = 0;
        long lastProgress = start;
        PerftestProgress progress = PerftestProgress.maybe(o, err, size, totIters, duration);
        boolean stopping = false;

        while (totscnt < totIters || totccnt < totIters
                || (duration && (state != 3 || totccnt < totscnt || !allTrue(flushed)))) {
            if (!stopping && stop.stopped()) {
                stopping = true;
                if (!duration) {
                    totIters = totscnt; // stop posting; wait for what is in flight
                } else {
                    state = 3;
                    t1 = t1 == 0 ? System.nanoTime() : t1;
                }
            }
            if (duration && state != 3) {
                long now = System.nanoTime();
                if (state == 0 && now >= sampleStart) {
                    state = 1;
                    t0 = now;
                }
                if (state == 1 && now >= sampleEnd) {
                    state = 2;
                    t1 = now;
                }
                if (state == 2 && now >= end) {
                    state = 3;
                }
            }
            for (int q = 0; q < numQps; q++) {
                if (duration && state == 3 && !flushed[q]) {
                    flushed[q] = flushDuration(q, scnt, ccnt, lists[0][q], locBase[q], remBase[q], size);
                    if (flushed[q]) {
                        totscnt++;
                    }
                    continue;
                }
                while ((duration ? state != 3 : scnt[q] < iters && totscnt < totIters)
                        && scnt[q] + post <= txDepth + ccnt[q]
                        && (credit == null || credit.mayPost(q, scnt[q], post))) {
                    for (int l = 0; l < post; l++) {
                        long k = scnt[q] + l;
                        boolean signaled = (k % cqMod == cqMod - 1) || (!duration && k == iters - 1);
                        SendWorkRequest wr = lists[l][q];
                        wr.wrId(((long) q << 48) | k).sendFlags(flagsBase | (signaled ? SendFlags.SIGNALED : 0));
                        if (cycle) {
                            long off = (k % perCycle) * inc;
                            wr.sge(0).addr(locBase[q] + off);
                            if (o.verb != Verb.SEND) {
                                wr.remoteAddr(remBase[q] + off);
                            }
                        }
                        if (tposted != null) {
                            tposted[(int) (totscnt + l)] = System.nanoTime();
                        }
                        batch[l] = wr;
                    }
                    boolean ok = post == 1 ? qps[q].postSend(batch[0]) : qps[q].postSend(batch, post) == post;
                    if (!ok) {
                        throw new RunException("Couldn't post send: qp " + q + " scnt=" + scnt[q] + " || err="
                                + batch[0].postError() + " tx_depth=" + txDepth);
                    }
                    scnt[q] += post;
                    totscnt += post;
                }
            }
            if (totccnt < totIters || (duration && totccnt < totscnt)) {
                int ne = sendCq.poll(wcs, wcs.length);
                long now = System.nanoTime();
                if (ne > 0) {
                    lastProgress = now;
                    for (int i = 0; i < ne; i++) {
                        WorkCompletion wc = wcs[i];
                        side.checkWc(wc, "client", totscnt, totccnt);
                        int q = (int) (wc.wrId() >>> 48);
                        long k = wc.wrId() & 0xFFFF_FFFF_FFFFL;
                        long fill = k + 1 - ccnt[q];
                        ccnt[q] = k + 1;
                        totccnt += fill;
                        if (compIdx != null && completions < compIdx.length) {
                            compIdx[completions] = (int) (totccnt - 1);
                            compTime[completions] = now;
                            completions++;
                        }
                        if (duration && state == 1) {
                            sampled += fill;
                        }
                    }
                    if (progress != null) {
                        progress.update(now, duration ? now - start : totccnt);
                    }
                } else if (side.peerGone(now)) {
                    throw side.peerClosed("send completions (scnt=" + totscnt + ", ccnt=" + totccnt + ")");
                } else if (now - lastProgress > STALL_NS) {
                    throw new RunException("No completion for " + STALL_NS / 1_000_000_000L + " s: scnt=" + totscnt
                            + ", ccnt=" + totccnt + " (the device stopped completing, or the peer is gone)"
                            + side.inProcessHint());
                } else {
                    // Not onSpinWait: the device's engine threads need this CPU (perftest's busy poll
                    // assumes the NIC works on its own silicon).
                    Thread.yield();
                }
            }
        }
        if (progress != null) {
            progress.clear();
        }
        PerftestFormat.Report r;
        if (duration) {
            r = BwCalc.noPeak(size, sampled, (t1 == 0 ? System.nanoTime() : t1) - t0, unit);
        } else if (noPeak || stopping) {
            r = BwCalc.noPeak(size, totccnt, System.nanoTime() - start, unit);
        } else {
            r = BwCalc.withPeak(size, totIters, tposted, compIdx, compTime, completions, unit);
        }
        if (stopping) {
            throw new Interrupted(r, null);
        }
        return r;
    }

    /**
     * End of a duration run on QP q: the last WRs may be unsignaled, so one signaled WR completes
     * after them (RC/UC order) and every WR is accounted for before close. For SEND the receiver keeps
     * receiving until the closing hand-shake, so a 1-byte SEND is fine too.
     */
    private boolean flushDuration(int q, long[] scnt, long[] ccnt, SendWorkRequest template, long loc, long rem,
                                  long size) {
        if (scnt[q] + 1 > txDepth + ccnt[q]) {
            return false;
        }
        long k = scnt[q];
        template.wrId(((long) q << 48) | k).sendFlags(SendFlags.SIGNALED);
        template.sge(0).addr(loc);
        if (o.verb != Verb.ATOMIC) {
            template.sge(0).length(1);
        }
        if (o.verb != Verb.SEND) {
            template.remoteAddr(rem);
        }
        if (!qps[q].postSend(template)) {
            throw new RunException("Couldn't post send: qp " + q + " scnt=" + k + " || err="
                    + template.postError() + " tx_depth=" + txDepth);
        }
        scnt[q]++;
        return true;
    }

    /**
     * run_iter_bw_server (SEND): count receives, re-post them, time from the first one. It stops
     * after {@code iters} per QP, or in duration mode when the client starts its closing hand-shake
     * (bytes on the TCP connection), so the client's last SENDs always find a receive.
     */
    private PerftestFormat.Report runServerBw(long size, boolean duration, int durationS, int marginS,
                                              double unit) throws IOException {
        int numQps = o.numQps;
        long iters = o.iters;
        long totIters = iters * numQps;
        long[] posted = new long[numQps];
        long[] rcntQp = new long[numQps];
        RecvWorkRequest[] rwrs = new RecvWorkRequest[numQps];
        for (int q = 0; q < numQps; q++) {
            posted[q] = rxDepth;
            rwrs[q] = new RecvWorkRequest(1).wrId(q).singleSge(mrs[q].address() + bufSize, (int) size,
                    mrs[q].lkey());
        }
        WorkCompletion[] wcs = PerftestSide.newWcs(16);
        long rcnt = 0;
        long first = 0;
        long t0 = 0;
        long t1 = 0;
        long sampled = 0;
        int state = 0;
        long lastProgress = System.nanoTime();
        PerftestProgress progress = PerftestProgress.maybe(o, err, size, duration ? 0 : totIters, duration);
        // Duration mode ends when the client starts its closing hand-shake (bytes on the connection).
        long nextLook = 0;
        while (duration || rcnt < totIters) {
            if (stop.stopped()) {
                long now = System.nanoTime();
                throw new Interrupted(BwCalc.noPeak(size, duration ? sampled : rcnt,
                        (duration ? (t1 == 0 ? now : t1) - t0 : now - first), unit), null);
            }
            int ne = recvCq.poll(wcs, wcs.length);
            long now = System.nanoTime();
            if (duration && first != 0) {
                if (state == 0 && now >= first + marginS * 1_000_000_000L) {
                    state = 1;
                    t0 = now;
                }
                if (state == 1 && now >= first + (long) (durationS - marginS) * 1_000_000_000L) {
                    state = 2;
                    t1 = now;
                }
            }
            if (ne > 0) {
                if (first == 0) {
                    first = now;
                    if (duration && marginS == 0) {
                        state = 1;
                        t0 = now;
                    }
                }
                lastProgress = now;
                for (int i = 0; i < ne; i++) {
                    WorkCompletion wc = wcs[i];
                    side.checkWc(wc, "server", rcnt, rcnt);
                    int q = (int) wc.wrId();
                    rcnt++;
                    if (state == 1) {
                        sampled++;
                    }
                    if (duration || posted[q] < iters) {
                        if (!qps[q].postRecv(rwrs[q])) {
                            throw new RunException("Couldn't post recv: rcnt=" + rcnt + " err="
                                    + rwrs[q].postError());
                        }
                        posted[q]++;
                    }
                    rcntQp[q]++;
                    if (credit != null) {
                        credit.received(qps[q], side.sendCq, q, rcntQp[q]);
                    }
                }
                if (progress != null) {
                    progress.update(now, duration ? now - first : rcnt);
                }
            } else {
                // Nothing received: has the client begun its closing hand-shake, or gone away?
                if (duration && ch.hasBytes()) {
                    break;
                }
                if (now - nextLook >= 0) {
                    nextLook = now + PEER_CHECK_NS;
                    int peer = ch.peerState();
                    if (peer > 0 && duration) {
                        break;
                    }
                    if (peer < 0) {
                        throw new RunException("The client closed the connection after " + rcnt + " receive(s)"
                                + (duration ? "" : " of " + totIters) + " (it ended or was killed)");
                    }
                }
                if (now - lastProgress > STALL_NS) {
                    throw new RunException("No receive completion for " + STALL_NS / 1_000_000_000L + " s: rcnt="
                            + rcnt + (duration ? "" : " of " + totIters) + " (is the client still running?)");
                }
                Thread.yield();
            }
        }
        if (progress != null) {
            progress.clear();
        }
        long now = System.nanoTime();
        if (credit != null) {
            credit.drain(side.sendCq); // clean_scq_credit, after the time is taken
        }
        if (duration) {
            return BwCalc.noPeak(size, sampled, (t1 == 0 ? now : t1) - t0, unit);
        }
        return BwCalc.noPeak(size, totIters, now - first, unit);
    }

    private static boolean allTrue(boolean[] b) {
        for (boolean x : b) {
            if (!x) {
                return false;
            }
        }
        return true;
    }
}
