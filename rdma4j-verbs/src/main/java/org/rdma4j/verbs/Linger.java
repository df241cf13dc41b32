// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.function.LongSupplier;

/**
 * Keeps a reliable-connected QP alive for a while after a program's last completion, so that the peer
 * gets its last ACK even when that ACK was lost.
 *
 * <p>Why: a responder ACKs a request and forgets it. If that ACK is lost, the requester's transport
 * timer fires and it resends the request. The responder sees a duplicate and ACKs it again (IBA
 * 9.9.2, duplicate requests), but only while its QP still exists. A program whose last event was a
 * receive (ibv_rc_pingpong's client receiving the server's last SEND, ib_write_lat's side seeing the
 * peer's last WRITE) has nothing left to wait for and destroys its QP at once. A packet to a destroyed
 * QP is dropped, so the peer's resends go unanswered: it retries until {@code retry_cnt} runs out,
 * and never when {@code retry_cnt} is 7, which rdma_rxe treats as "retry forever" (rxe_comp.c) and
 * which rdma-core's pingpongs and perftest set. Nothing in the verbs says when the peer has its ACK:
 * there is no ACK of an ACK. So the program lingers, like TCP's TIME-WAIT.
 *
 * <p>How long: the peer resends after its local ACK timeout, 4.096 us × 2^{@code timeout}
 * (ibv_modify_qp(3); rxe_qp.c computes {@code qp_timeout_jiffies} from it). The programs that linger
 * set the same {@code timeout} on both ends, so the local QP's attribute stands for the peer's. The
 * linger lasts until no packet has arrived for {@link #QUIET_RETRANSMITS} timeouts (so the peer has
 * had that many chances to resend, and each resend that arrives starts the quiet period again), or
 * until the peer is known to be done (both ends in one process), and never longer than
 * {@link #CAP_RETRANSMITS} timeouts (at most {@link #MAX_CAP_NS}): a peer that keeps sending for
 * another reason must not keep the program forever. Arrivals are read from the port's
 * {@code rcvd_pkts} counter ({@link Context#queryPortCounters}); a provider without counters gets
 * the quiet period counted from the start. With {@code timeout} 0 the peer has no transport timer
 * and resends nothing, so there is nothing to wait for.
 */
public final class Linger {
    /** Timeouts without an arriving packet that end the linger. */
    public static final int QUIET_RETRANSMITS = 3;
    /** Timeouts after which the linger ends whatever arrives. */
    public static final int CAP_RETRANSMITS = 30;
    /** The longest linger, whatever the timeout attribute (timeout 31 is 2.4 hours). */
    public static final long MAX_CAP_NS = TimeUnit.SECONDS.toNanos(10);
    /** The counter whose movement shows that a packet arrived (rxe_hw_counters.c). */
    public static final String ACTIVITY_COUNTER = "rcvd_pkts";
    /** With a manual clock, the real time after which {@link #await} gives up on the clock moving. */
    static final long MANUAL_CLOCK_REAL_BOUND_NS = TimeUnit.SECONDS.toNanos(60);

    /** Why a linger ended. */
    public enum End {
        /** The timeout attribute is 0: the peer resends nothing. */
        NOTHING_TO_WAIT_FOR,
        /** The peer said it is done (both ends in one process). */
        PEER_DONE,
        /** No packet arrived for {@link #QUIET_RETRANSMITS} timeouts. */
        QUIET,
        /** The cap was reached while packets kept arriving. */
        CAP
    }

    private final LongSupplier activity;
    private final long rtoNs;
    private final long quietNs;
    private final long capNs;
    private final long startNs;
    private long lastActivity;
    private long quietSinceNs;
    private long arrivals;
    private End end;

    /**
     * Starts a linger.
     *
     * @param activity a count that moves when a packet arrives, or null when there is none
     * @param rtoNs the peer's retransmit timeout ({@link #retransmitTimeoutNs}); 0 when it has none
     * @param nowNs the time the linger starts
     */
    public Linger(LongSupplier activity, long rtoNs, long nowNs) {
        if (rtoNs < 0) {
            throw new IllegalArgumentException("rtoNs=" + rtoNs);
        }
        this.activity = activity;
        this.rtoNs = rtoNs;
        this.capNs = Math.min(MAX_CAP_NS, saturatingMultiply(rtoNs, CAP_RETRANSMITS));
        this.quietNs = Math.min(capNs, saturatingMultiply(rtoNs, QUIET_RETRANSMITS));
        this.startNs = nowNs;
        this.quietSinceNs = nowNs;
        this.lastActivity = activity == null ? 0 : activity.getAsLong();
        if (rtoNs == 0) {
            end = End.NOTHING_TO_WAIT_FOR;
        }
    }

    /**
     * A linger for a QP whose peer uses the same timeout attribute, watching the port's
     * {@value #ACTIVITY_COUNTER}.
     *
     * @param ctx     the QP's context
     * @param port    the QP's port
     * @param timeout the QP's local ACK timeout attribute (0 to 31)
     * @param nowNs   the time the linger starts
     * @return the linger
     */
    public static Linger forPeerOf(Context ctx, int port, int timeout, long nowNs) {
        LongSupplier a = ctx.queryPortCounters(port).containsKey(ACTIVITY_COUNTER)
                ? () -> ctx.queryPortCounters(port).getOrDefault(ACTIVITY_COUNTER, 0L) : null;
        return new Linger(a, retransmitTimeoutNs(timeout), nowNs);
    }

    /**
     * {@return 4.096 us × 2^timeout in nanoseconds (ibv_modify_qp(3)); 0 for timeout 0, which IBA makes infinite
     * and rxe turns into no retransmit timer at all}
     *
     * @param timeout the local ACK timeout attribute, 0 to 31
     */
    public static long retransmitTimeoutNs(int timeout) {
        if (timeout < 0 || timeout > 31) {
            throw new IllegalArgumentException("timeout=" + timeout + " (expected 0..31)");
        }
        return timeout == 0 ? 0 : 4096L << timeout;
    }

    /**
     * Looks at the time and the counter.
     *
     * @param nowNs    the time now
     * @param peerDone whether the peer is known to be done
     * @return why the linger ended, or null while it goes on
     */
    public End poll(long nowNs, boolean peerDone) {
        if (end != null) {
            return end;
        }
        if (peerDone) {
            return end = End.PEER_DONE;
        }
        // The counter first, then the deadlines: an arrival seen now starts the quiet period again.
        if (activity != null) {
            long a = activity.getAsLong();
            if (a != lastActivity) {
                arrivals += a - lastActivity;
                lastActivity = a;
                quietSinceNs = nowNs;
            }
        }
        if (nowNs - startNs >= capNs) {
            return end = End.CAP;
        }
        if (nowNs - quietSinceNs >= quietNs) {
            return end = End.QUIET;
        }
        return null;
    }

    /**
     * Lingers on the system clock, parking between looks.
     *
     * @param peerDone whether the peer is known to be done
     * @return why it ended
     */
    public End await(BooleanSupplier peerDone) {
        return await(System::nanoTime, false, peerDone);
    }

    /**
     * Lingers on a clock.
     *
     * @param clock    the time source the linger started on
     * @param manual   whether the clock moves only when a test moves it: then the wait spins instead of
     *                 parking, and gives up after {@link #MANUAL_CLOCK_REAL_BOUND_NS} of real time
     * @param peerDone whether the peer is known to be done
     * @return why it ended
     */
    public End await(LongSupplier clock, boolean manual, BooleanSupplier peerDone) {
        long slice = Math.max(TimeUnit.MILLISECONDS.toNanos(1), rtoNs / 8);
        long realStart = System.nanoTime();
        // Bounded in looks as well as in time: the cap over the slice, or the manual bound.
        long maxLooks = manual ? Long.MAX_VALUE : capNs / slice + 2;
        for (long looks = 0; ; looks++) {
            End e = poll(clock.getAsLong(), peerDone.getAsBoolean());
            if (e != null) {
                return e;
            }
            if (manual) {
                if (System.nanoTime() - realStart > MANUAL_CLOCK_REAL_BOUND_NS) {
                    return end = End.CAP;
                }
                Thread.onSpinWait();
                if ((looks & 0xFF) == 0) {
                    Thread.yield();
                }
            } else {
                if (looks >= maxLooks) {
                    return end = End.CAP;
                }
                LockSupport.parkNanos(slice);
            }
        }
    }

    /** {@return packets counted while lingering (0 without a counter)} */
    public long arrivals() {
        return arrivals;
    }

    /** {@return the quiet period that ends the linger, in nanoseconds} */
    public long quietNs() {
        return quietNs;
    }

    /** {@return the longest linger, in nanoseconds} */
    public long capNs() {
        return capNs;
    }

    /** {@return whether arrivals are observed (the provider has an {@value #ACTIVITY_COUNTER} counter)} */
    public boolean observesArrivals() {
        return activity != null;
    }

    @Override
    public String toString() {
        return "Linger[quiet " + quietNs + " ns, cap " + capNs + " ns, arrivals " + arrivals
                + (activity == null ? " (not observed)" : "") + (end == null ? "" : ", ended " + end) + "]";
    }

    private static long saturatingMultiply(long a, int b) {
        long r = a * b;
        return a != 0 && r / a != b ? Long.MAX_VALUE : r;
    }
}
