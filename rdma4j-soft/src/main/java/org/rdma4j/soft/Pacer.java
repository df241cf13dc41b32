// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

/**
 * How fast one queue pair puts the packets of a long operation on its link (docs/engine.md, "Pacing"): in
 * bursts of at most {@link #BURST} packets, each flushed to the link before the next is built, with a gap
 * between bursts that widens when the peer shows it lost what we sent and narrows again while it does not.
 *
 * <p>rxe (6.1, the guest kernel of the interop matrix) bounds its requester at {@code
 * RXE_INFLIGHT_SKBS_PER_QP_HIGH} = 64 skbs in flight per QP (rxe_req.c rxe_requester; the skb destructor,
 * rxe_net.c rxe_skb_tx_dtor, resumes it below {@code RXE_INFLIGHT_SKBS_PER_QP_LOW}); its responder sends one
 * READ response per call (rxe_resp.c read_reply returns RESPST_DONE while the READ has bytes left, the next call
 * resumes in RESPST_READ_REPLY) and yields the CPU every {@code RXE_MAX_ITERATIONS} = 1024 calls (rxe_task.c
 * rxe_do_task). A UDP socket gives us no such completion signal on the paths that lose packets: the host tap
 * frees a packet's socket memory when it queues it and drops it when its ring is full, and loopback hands it
 * to the peer's receive queue, which drops when full; neither tells the sender. The only evidence is the peer's
 * own recovery: a requester that reads again what we already sent (a duplicate RDMA READ) lost our responses.
 * So the gap is loss-driven, as a rate-based RoCE congestion control reacts to its congestion notifications: a
 * re-read widens it to what the path took of the reply (a burst's worth of the time per packet it delivered before
 * the loss, at least double, at most eight times the gap before), a re-read of what was not sent yet (the peer's
 * timer ran out while a burst waited) halves it, and a calm path narrows it slowly.
 *
 * <p>What is learnt belongs to the path, not to one QP: the QPs of a device that send to the same destination GID
 * share one {@link Path} (the device keeps them, {@link SoftDevice#pacePath}), so a QP connected after another
 * learnt the gap paces its first long READ reply from its first burst instead of overflowing the path once more
 * (the interop matrix opens a new QP per perftest run: each row's first READ used to cost 5,000-10,000 tap drops).
 * A QP with no destination yet has a path of its own.
 *
 * <p>One per QP; its methods run on the QP's owner (the QP's executor), the shared path's under the path's monitor
 * (several QPs' owners may pace toward one destination at once; called once per burst, not per packet). The gap
 * starts at {@code -Drdma4j.soft.paceGapUs} (0: a loss-free path runs at full speed and never waits).
 */
final class Pacer {
    /** Packets per burst: rxe's RXE_INFLIGHT_SKBS_PER_QP_HIGH (rxe_param.h), {@code -Drdma4j.soft.paceBurst}. */
    static final int BURST = Math.clamp(Integer.getInteger("rdma4j.soft.paceBurst", 64), 1, 1 << 20);
    /** The gap the first loss opens. */
    static final long MIN_GAP_NS = 20_000;
    /** The widest gap: a burst of 64 MTU-sized packets per 20 ms still moves 3 MiB/s at path MTU 1024. */
    static final long MAX_GAP_NS = 20_000_000;
    /** Without a loss for this long the gap narrows by an eighth. */
    static final long CALM_NS = 250_000_000;
    /** The first loss opens the gap at most this wide, whatever the estimate (which includes the peer's timeout). */
    static final long FIRST_MAX_NS = 1_000_000;
    /** The gap a QP starts with and never narrows below. */
    static final long FLOOR_NS = Math.clamp(Long.getLong("rdma4j.soft.paceGapUs", 0) * 1000, 0, MAX_GAP_NS);

    /**
     * The gap toward one destination, shared by the QPs of a device that send there: widened by a loss any of them
     * saw, narrowed when one of them had to wait too long or the path stayed calm. Thread-safe (its monitor).
     */
    static final class Path {
        private long gapNs = FLOOR_NS;
        private long calmSince;
        /** Counts the widenings: a loss of packets sent before the last one says nothing new. */
        private int epoch;

        synchronized int epoch() {
            return epoch;
        }

        synchronized boolean lost(int sentEpoch, long nowNs, long delivered, long sinceNs) {
            if (sentEpoch != epoch) {
                return false;
            }
            epoch++;
            long est = delivered > 0 ? BURST * Math.max(0, nowNs - sinceNs) / delivered : 0;
            long g = Math.min(est, gapNs == 0 ? FIRST_MAX_NS : 8 * gapNs);
            gapNs = Math.min(MAX_GAP_NS, Math.max(MIN_GAP_NS, Math.max(g, gapNs * 2)));
            calmSince = nowNs;
            return true;
        }

        synchronized boolean tooSlow() {
            if (gapNs <= FLOOR_NS) {
                return false;
            }
            gapNs = gapNs / 2 < MIN_GAP_NS ? FLOOR_NS : Math.max(FLOOR_NS, gapNs / 2);
            return true;
        }

        synchronized long gap(long nowNs) {
            if (gapNs > FLOOR_NS) {
                long calm = nowNs - calmSince;
                while (calm >= CALM_NS && gapNs > FLOOR_NS) {
                    gapNs = gapNs < MIN_GAP_NS ? FLOOR_NS : Math.max(FLOOR_NS, gapNs - gapNs / 8);
                    calm -= CALM_NS;
                    calmSince += CALM_NS;
                }
            }
            return gapNs;
        }

        /** {@return the gap as it stands, without the calm's narrowing (tests, toString)} */
        synchronized long gapNs() {
            return gapNs;
        }

        @Override
        public synchronized String toString() {
            return "gap=" + gapNs / 1000 + " us, epoch=" + epoch;
        }
    }

    /** The path this QP paces on: its destination's (shared) once it has one, else its own. */
    private Path path = new Path();

    /**
     * The QP's destination is set (modify with an address vector): from now on it paces on what the device's QPs
     * learnt of the path there.
     *
     * @param shared the device's path toward the destination
     */
    void bind(Path shared) {
        path = shared;
    }

    /** {@return the path this QP paces on (tests)} */
    Path path() {
        return path;
    }

    /** {@return the current epoch, to remember with what is sent now and hand back to {@link #lost}} */
    int epoch() {
        return path.epoch();
    }

    /**
     * The peer lost packets this QP sent in {@code sentEpoch}: the gap widens, once per epoch of the path, so the
     * re-reads of all the READs a requester had outstanding (on this QP or another toward the same destination)
     * widen it once. The new gap is what the path took: a burst's worth of the time per packet it delivered since
     * {@code sinceNs} (that time includes the peer's wait for its timer, so it errs on the slow side), at least
     * twice the old gap and {@link #MIN_GAP_NS}, at most eight times the old gap ({@link #FIRST_MAX_NS} from none)
     * and {@link #MAX_GAP_NS}.
     *
     * @param sentEpoch the {@link #epoch} the lost packets were sent in
     * @param nowNs the fabric's clock
     * @param delivered packets the peer took in order since {@code sinceNs} (the PSN it asks for, less the first sent)
     * @param sinceNs when those packets started to leave
     * @return whether the gap widened
     */
    boolean lost(int sentEpoch, long nowNs, long delivered, long sinceNs) {
        return path.lost(sentEpoch, nowNs, delivered, sinceNs);
    }

    /**
     * The requester's timer ran out while a burst waited for the gap (it asked again for responses not sent yet):
     * the gap halves, down to the floor, so that a paced reply stays within the requester's local ACK timeout.
     *
     * @return whether the gap narrowed
     */
    boolean tooSlow() {
        return path.tooSlow();
    }

    /**
     * {@return the gap to leave after a full burst, in nanoseconds of the fabric's clock (0: go on at once)}
     *
     * @param nowNs the fabric's clock
     */
    long gap(long nowNs) {
        return path.gap(nowNs);
    }

    /**
     * A QP reset: it leaves the path it paced on (a new connection may take another, and is bound again when it gets
     * its destination); what the path learnt stays with the device's other QPs.
     */
    void reset() {
        path = new Path();
    }

    @Override
    public String toString() {
        return "Pacer{" + path + '}';
    }
}
