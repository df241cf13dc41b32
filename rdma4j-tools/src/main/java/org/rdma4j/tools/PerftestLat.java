// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.rdma4j.tools.Perftest.RunException;
import org.rdma4j.tools.PerftestOptions.Verb;
import org.rdma4j.tools.PerftestSide.Interrupted;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Linger;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WorkCompletion;

/**
 * The latency tests (ib_send_lat, ib_write_lat, ib_read_lat, ib_atomic_lat) on a connected {@link PerftestSide}:
 * perftest's {@code run_iter_lat_write}, {@code run_iter_lat_send} and {@code run_iter_lat}, each tool's order
 * of hand-shakes and report lines around them, and ib_write_lat's linger over RC.
 */
final class PerftestLat extends PerftestRunner {
    private static final VarHandle BYTE = ValueLayout.JAVA_BYTE.varHandle();

    private final boolean reportErrors;
    private final Context ctx;
    private final List<LatStats> lats;
    /** write_lat over RC: the linger, started at the last completion of the last size, and when. */
    private Linger lingerStart;
    private long lingerFrom;

    /** A runner on {@code side}, whose QPs are connected. */
    PerftestLat(PerftestSide side) {
        super(side);
        this.reportErrors = side.reportErrors;
        this.ctx = side.ctx;
        this.lats = side.results.lats;
    }

    @Override
    int run() throws IOException {
        boolean duration = o.duration > 0;
        int margin = margin();
        boolean passive = (o.verb == Verb.READ || o.verb == Verb.ATOMIC) && !client;
        if (passive) {
            // read_lat.c / atomic_lat.c: only the client posts; the server waits for its end.
            ch.handShake(my[0], withGid);
            if (side.printing()) {
                text.print(PerftestFormat.RESULT_LINE);
            }
            side.finish();
            return 0;
        }
        if (side.printing()) {
            text.print(PerftestFormat.latHeader(duration));
            text.flush();
        }
        int rtt = o.verb == Verb.READ || o.verb == Verb.ATOMIC ? 1 : 2;
        for (long size : side.sizes()) {
            if (o.verb == Verb.SEND) {
                side.postReceives(size);
                ch.handShake(my[0], withGid);
            }
            LatStats s;
            try {
                s = runLatSize(size, duration, o.duration, margin, rtt);
                if (o.verb == Verb.WRITE && o.connection.equals("RC")) {
                    // The linger counts from the last completion, before the report is printed.
                    lingerFrom = System.nanoTime();
                    lingerStart = Linger.forPeerOf(ctx, o.ibPort, qps[0].query().timeout(), lingerFrom);
                }
            } catch (Interrupted i) {
                s = i.lat;
            }
            if (s != null) {
                lats.add(s);
                if (side.printing()) {
                    text.print(PerftestFormat.latLine(s));
                    text.flush();
                }
            }
            if (stop.stopped()) {
                side.stoppedAfterReport();
            }
        }
        boolean lingers = false;
        if (o.verb == Verb.WRITE) {
            // write_lat.c ends without a closing hand-shake.
            if (side.printing()) {
                text.print(PerftestFormat.RESULT_LINE);
            }
            lingers = lingerStart != null && !stop.stopped();
        } else if (o.verb == Verb.SEND) {
            if (side.printing()) {
                text.print(PerftestFormat.RESULT_LINE);
            }
            ch.handShake(my[0], withGid);
        } else {
            ch.handShake(my[0], withGid);
            if (side.printing()) {
                text.print(PerftestFormat.RESULT_LINE);
            }
        }
        side.finish();
        if (lingers) {
            linger();
        }
        return 0;
    }

    /**
     * ib_write_lat over RC ends without a closing hand-shake, and each side's last event may be one
     * whose ACK is still on the wire: the side that sees the peer's last WRITE in memory has ACKed it,
     * and the side whose last WRITE completed has ACKed the peer's last one before. If that ACK is lost,
     * the peer resends the WRITE, and only a live QP answers a duplicate (IBA 9.9.2); rdma_rxe with
     * retry_cnt 7 resends forever to a destroyed one. So the QP stays until no packet has arrived for
     * 3 local ACK timeouts ({@code -u}, default 14: 67 ms each), capped ({@link Linger}), or until the
     * peer role in this process is done. The other tests end with a hand-shake over TCP that each side
     * reaches only after its last completion, so a lost ACK is resent and answered before either QP
     * goes.
     */
    private void linger() {
        side.done = true;
        PerftestSide p = side.peer;
        Linger l = lingerStart;
        Linger.End end = l.await(() -> p != null && p.done || stop.stopped());
        side.lastLinger = l;
        if (reportErrors && (l.arrivals() > 0 || end == Linger.End.CAP)) {
            // Only under loss: then it shows that the linger answered the peer's resends.
            err.println(" kept the QP " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - lingerFrom)
                    + " ms after the last completion; " + l.arrivals()
                    + " packet(s) arrived meanwhile (resends whose ACK was lost)"
                    + (end == Linger.End.CAP ? "; stopped at the cap" : ""));
        }
    }

    private LatStats runLatSize(long size, boolean duration, int durationS, int marginS, int rtt) {
        long iters = duration ? Long.MAX_VALUE : o.iters;
        if (!duration && iters > Integer.MAX_VALUE - 8) {
            throw new RunException("-n " + iters + " is too large for a latency test here");
        }
        long[] tposted = duration ? null : new long[(int) iters];
        int flags = SendFlags.SIGNALED | (size <= inline && o.verb != Verb.READ && o.verb != Verb.ATOMIC
                ? SendFlags.INLINE : 0);
        SendWorkRequest wr = side.sendWrs(size, flags)[0];
        QueuePair qp = qps[0];
        MemorySegment buf = MemorySegment.ofAddress(mrs[0].address()).reinterpret(2 * bufSize);
        long postOff = size - 1;
        long pollOff = bufSize + size - 1;
        RecvWorkRequest rwr = new RecvWorkRequest(1).wrId(0)
                .singleSge(mrs[0].address() + bufSize, (int) size, mrs[0].lkey());
        WorkCompletion wc = new WorkCompletion();
        long scnt = 0;
        long rcnt = 0;
        long ccnt = 0;
        long start = System.nanoTime();
        long t0 = 0;
        long t1 = 0;
        long sampled = 0;
        int state = duration && marginS == 0 ? 1 : 0;
        if (state == 1) {
            t0 = start;
        }
        PerftestProgress progress = PerftestProgress.maybe(o, err, size, duration ? 0 : iters, duration);
        boolean pendingSend = false;
        // In duration mode a side may wait for a message the peer, whose clock ended first, will not send:
        // every wait also ends at the end of the run.
        long hardEnd = duration ? start + durationS * 1_000_000_000L : Long.MAX_VALUE;
        run:
        while (duration ? state != 3 : scnt < iters || rcnt < iters && o.verb != Verb.READ
                && o.verb != Verb.ATOMIC || ccnt < scnt) {
            long now = System.nanoTime();
            if (stop.stopped()) {
                return interruptedLat(size, tposted, (int) scnt, rtt, duration, sampled, t0, now);
            }
            if (duration) {
                if (state == 0 && now >= start + marginS * 1_000_000_000L) {
                    state = 1;
                    t0 = now;
                }
                if (state == 1 && now >= start + (long) (durationS - marginS) * 1_000_000_000L) {
                    state = 2;
                    t1 = now;
                }
                if (state == 2 && now >= start + durationS * 1_000_000_000L) {
                    state = 3;
                    break;
                }
            }
            if (progress != null && (scnt & 255) == 0) {
                progress.update(now, duration ? now - start : scnt);
            }
            switch (o.verb) {
                case WRITE -> {
                    // run_iter_lat_write: wait for the peer's counter in the last byte, then write ours.
                    if ((duration || rcnt < iters) && !(scnt < 1 && !client)) {
                        rcnt++;
                        byte want = (byte) rcnt;
                        long since = System.nanoTime();
                        int spins = 0;
                        while ((byte) BYTE.getVolatile(buf, pollOff) != want) {
                            spins = side.spinWait(spins, since, "the peer's RDMA WRITE #" + rcnt);
                            if (duration && System.nanoTime() >= hardEnd) {
                                rcnt--;
                                break run;
                            }
                            if (stop.stopped()) {
                                return interruptedLat(size, tposted, (int) scnt, rtt, duration, sampled, t0,
                                        System.nanoTime());
                            }
                        }
                        if (state == 1) {
                            sampled++;
                        }
                    }
                    if (duration || scnt < iters) {
                        if (pendingSend) {
                            if (!waitSend(wc, scnt, ccnt, hardEnd)) {
                                break run;
                            }
                            ccnt++;
                            pendingSend = false;
                        }
                        long t = System.nanoTime();
                        if (tposted != null) {
                            tposted[(int) scnt] = t;
                        }
                        BYTE.setVolatile(buf, postOff, (byte) ++scnt);
                        post(qp, wr, scnt);
                        pendingSend = true;
                    }
                    if (!duration && scnt == iters && pendingSend) {
                        waitSend(wc, scnt, ccnt);
                        ccnt++;
                        pendingSend = false;
                    }
                }
                case READ, ATOMIC -> {
                    // run_iter_lat: one signaled operation at a time.
                    if (tposted != null) {
                        tposted[(int) scnt] = System.nanoTime();
                    }
                    scnt++;
                    post(qp, wr, scnt);
                    waitSend(wc, scnt, ccnt);
                    ccnt++;
                    if (state == 1) {
                        sampled++;
                    }
                }
                case SEND -> {
                    // run_iter_lat_send: the server waits first; every receive is re-posted while more will come.
                    if ((duration || rcnt < iters) && !(scnt < 1 && client)) {
                        long since = System.nanoTime();
                        int spins = 0;
                        while (!recvCq.poll(wc)) {
                            spins = side.spinWait(spins, since, "the peer's SEND #" + (rcnt + 1));
                            if (duration && System.nanoTime() >= hardEnd) {
                                break run;
                            }
                            if (stop.stopped()) {
                                return interruptedLat(size, tposted, (int) scnt, rtt, duration, sampled, t0,
                                        System.nanoTime());
                            }
                        }
                        side.checkWc(wc, client ? "client" : "server", scnt, rcnt);
                        rcnt++;
                        if (state == 1) {
                            sampled++;
                        }
                        if (duration || rcnt + rxDepth <= iters) {
                            if (!qp.postRecv(rwr)) {
                                throw new RunException("Couldn't post recv: rcnt=" + rcnt + " err="
                                        + rwr.postError());
                            }
                        }
                    }
                    if (duration || scnt < iters) {
                        if (pendingSend) {
                            if (!waitSend(wc, scnt, ccnt, hardEnd)) {
                                break run;
                            }
                            ccnt++;
                            pendingSend = false;
                        }
                        if (tposted != null) {
                            tposted[(int) scnt] = System.nanoTime();
                        }
                        scnt++;
                        post(qp, wr, scnt);
                        pendingSend = true;
                    }
                    if (!duration && scnt == iters && pendingSend) {
                        waitSend(wc, scnt, ccnt);
                        ccnt++;
                        pendingSend = false;
                    }
                }
                default -> throw new IllegalStateException();
            }
        }
        if (progress != null) {
            progress.clear();
        }
        if (duration) {
            // Each side stops on its own clock, as perftest's alarm does, abandoning what is in flight.
            long end = t1 == 0 ? System.nanoTime() : t1;
            return LatStats.ofDuration(size, sampled, end - t0, rtt);
        }
        if (client || o.verb == Verb.WRITE || o.verb == Verb.SEND) {
            if (o.unsorted) {
                text.print(LatStats.samples(tposted, (int) iters, rtt, false));
            }
            if (o.histogram) {
                text.print(LatStats.samples(tposted, (int) iters, rtt, true));
            }
            if ((o.unsorted || o.histogram) && side.printing()) {
                text.print(PerftestFormat.latHeader(false));
            }
        }
        return LatStats.of(size, tposted, (int) iters, rtt);
    }

    private LatStats interruptedLat(long size, long[] tposted, int posts, int rtt, boolean duration,
                                    long sampled, long t0, long now) {
        if (duration) {
            throw new Interrupted(null, t0 == 0 ? null : LatStats.ofDuration(size, sampled, now - t0, rtt));
        }
        throw new Interrupted(null, posts >= 5 ? LatStats.of(size, tposted, posts, rtt) : null);
    }

    private void post(QueuePair qp, SendWorkRequest wr, long scnt) {
        wr.wrId(scnt);
        if (!qp.postSend(wr)) {
            throw new RunException("Couldn't post send: scnt=" + scnt + " err=" + wr.postError());
        }
    }

    private void waitSend(WorkCompletion wc, long scnt, long ccnt) {
        waitSend(wc, scnt, ccnt, Long.MAX_VALUE);
    }

    /** {@return false when {@code deadline} passed first (a duration run ended; the peer may be gone)} */
    private boolean waitSend(WorkCompletion wc, long scnt, long ccnt, long deadline) {
        long since = System.nanoTime();
        int spins = 0;
        while (!sendCq.poll(wc)) {
            spins = side.spinWait(spins, since, "the completion of send #" + scnt);
            if (System.nanoTime() >= deadline) {
                return false;
            }
        }
        side.checkWc(wc, client ? "client" : "server", scnt, ccnt);
        return true;
    }
}
