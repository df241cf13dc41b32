// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.statistics.Statistics;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.ConnParam;

/**
 * Connection setup and teardown over a lossy path: every MAD may be lost, duplicated or held and
 * delivered later (reordered), in both directions, with seeded probabilities up to 30 % each; the
 * passive application may accept late (so duplicate REQs meet an MRA). Whatever happens, each side ends
 * either connected exactly once and then disconnected exactly once, or failed cleanly, and no event
 * repeats. Half-open ends only where Linux's CM leaves them too: a passive side whose REP timed out (the
 * active side is established until its DREQ), and a side that no DREQ of its peer reached (all lost).
 * jqwik prints the seed of a failing run.
 */
class LossyCmPropertiesTest {
    private static final Duration STEP = Duration.ofMillis(512);
    private static final int MAX_STEPS = 600; // 307 s of CM time: longer than 16 REQs or DREQs
    /**
     * Beyond {@link #MAX_STEPS}, while the active side has no outcome yet, the run goes on in coarser steps up to
     * this much CM time: an MRA stretches each remaining REQ retry to its service timeout (Linux's
     * CMA_CM_MRA_SETTING, 2^24 x 4.096 us = 68.7 s, and cm_mra_handler's ib_modify_mad keeps it for every
     * retry), so a REQ whose REPs are all lost after an MRA fails only after up to 15 x 68.7 s.
     */
    private static final Duration MAX_CM_TIME = Duration.ofSeconds(1_400);
    private static final Duration LONG_STEP = Duration.ofSeconds(4);

    @Property(tries = 100)
    void connectsExactlyOnceOrFailsCleanly(@ForAll long seed) {
        run(seed);
    }

    /**
     * Samples that failed once, kept as examples: 3817 (drop 0.85, dup 0.28, hold 0.06: every DREQ lost) on main
     * at 4de0d50; 1692471 (drop 0.85: the passive side's REP timed out, then a retransmitted REQ made a second
     * request, as in Linux) at 323e949; -19649528581631 (drop 0.85: an MRA, then every REP and REQ lost: the active
     * side fails only after the MRA-stretched retries, past the first 307 s) at a31429c.
     */
    @Example
    void samplesThatFailedOnce() {
        run(3817);
        run(1692471);
        run(-19649528581631L);
    }

    /** {@return whether the active side's connection has come to an end: failed, or up and disconnected} */
    private static boolean outcome(Map<CmEventType, Integer> a) {
        return a.containsKey(CmEventType.UNREACHABLE) || a.containsKey(CmEventType.REJECTED)
                || a.containsKey(CmEventType.CONNECT_ERROR) || a.containsKey(CmEventType.DISCONNECTED);
    }

    private static void run(long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        // one run in eight loses most MADs, so that setups also fail (and the failure paths are checked)
        double drop = r.nextInt(8) == 0 ? 0.85 : r.nextDouble() * 0.3;
        double dup = r.nextDouble() * 0.3;
        double hold = r.nextDouble() * 0.3;
        long acceptDelaySteps = r.nextInt(4) == 0 ? r.nextInt(30) : 0;
        boolean clientCloses = r.nextBoolean();
        try (CmPair p = new CmPair(seed)) {
            for (int h = 0; h < 2; h++) {
                SplittableRandom hr = r.split();
                p.tap[h].drop = (a, n) -> hr.nextDouble() < drop;
                p.tap[h].duplicate = (a, n) -> hr.nextDouble() < dup;
                p.tap[h].hold = (a, n) -> hr.nextDouble() < hold;
            }
            p.listen();
            CmId c = p.connect();
            Map<CmEventType, Integer> a = new EnumMap<>(CmEventType.class);
            Map<CmEventType, Integer> b = new EnumMap<>(CmEventType.class);
            Map<CmId, Map<CmEventType, Integer>> bById = new HashMap<>();
            List<CmId> children = new ArrayList<>();
            CmId bConn = null; // the passive ID that got ESTABLISHED
            boolean byClient = clientCloses;
            CmEvent pending = null;
            long acceptAt = -1;
            boolean disconnecting = false;
            long cmTime = 0;
            for (int step = 0; step < MAX_STEPS || cmTime < MAX_CM_TIME.toNanos() && !outcome(a); step++) {
                for (CmEvent e; (e = p.poll(0)) != null; ) {
                    a.merge(e.type(), 1, Integer::sum);
                    e.ack();
                }
                for (CmEvent e; (e = p.poll(1)) != null; ) {
                    b.merge(e.type(), 1, Integer::sum);
                    bById.computeIfAbsent(e.id(), k -> new EnumMap<>(CmEventType.class)).merge(e.type(), 1, Integer::sum);
                    if (e.type() == CmEventType.ESTABLISHED) {
                        bConn = e.id();
                    }
                    if (e.type() == CmEventType.CONNECT_REQUEST) {
                        children.add(e.id());
                        pending = e;
                        acceptAt = step + acceptDelaySteps;
                    } else {
                        e.ack();
                        if (e.type() == CmEventType.UNREACHABLE) {
                            e.id().close(); // its REP went unanswered: the application gives up, as rping exits
                        }
                    }
                }
                if (pending != null && step >= acceptAt) {
                    CmId s = pending.id();
                    pending.ack();
                    pending = null;
                    p.qp(s);
                    s.accept(new ConnParam().responderResources(1).initiatorDepth(1).rnrRetryCount(7));
                }
                boolean aUp = a.containsKey(CmEventType.ESTABLISHED);
                // every passive ID so far failed (its REP timed out; a REQ retransmitted after that is a new
                // request, as in Linux, where cm_reset_to_idle forgets the remote comm ID)
                boolean bFailed = bConn == null && !children.isEmpty()
                        && b.getOrDefault(CmEventType.UNREACHABLE, 0) == children.size();
                if (!disconnecting && aUp && (bConn != null || bFailed)) {
                    disconnecting = true;
                    // a passive side whose REP timed out has nothing to disconnect: the client does it
                    byClient = clientCloses || bConn == null;
                    (byClient ? c : bConn).disconnect();
                }
                if (disconnecting) {
                    // the other side disconnects when told to, as rping and ucmatose do
                    if (byClient && bConn != null && b.containsKey(CmEventType.DISCONNECTED)) {
                        bConn.disconnect();
                    }
                    if (!byClient && a.containsKey(CmEventType.DISCONNECTED)) {
                        c.disconnect();
                    }
                }
                if (!p.tap[0].held.isEmpty() && r.nextInt(3) == 0) {
                    p.release(0);
                }
                if (!p.tap[1].held.isEmpty() && r.nextInt(3) == 0) {
                    p.release(1);
                }
                Duration d = step < MAX_STEPS ? STEP : LONG_STEP;
                p.advance(d);
                cmTime += d.toNanos();
            }
            p.release(0);
            p.release(1);
            String ctx = "seed " + seed + " drop " + drop + " dup " + dup + " hold " + hold + ": A " + a + ", B " + b;
            a.forEach((t, n) -> assertTrue(n == 1 || t == CmEventType.CONNECT_REQUEST, "repeated " + t + " at A; " + ctx));
            // at B each request is its own ID: no event repeats on one ID, and one connection at most comes up
            bById.values().forEach(m -> m.forEach((t, n) -> assertEquals(1, (int) n, "repeated " + t + " on one ID at B; " + ctx)));
            assertTrue(b.getOrDefault(CmEventType.ESTABLISHED, 0) <= 1, "B established twice; " + ctx);
            boolean aUp = a.containsKey(CmEventType.ESTABLISHED);
            Statistics.label("outcome").collect(aUp && b.containsKey(CmEventType.ESTABLISHED) ? "connected"
                    : aUp ? "passive side timed out" : "failed");
            Statistics.label("mra").collect(p.tap[1].of(CmMsg.MRA).isEmpty() ? "no MRA" : "MRA sent");
            Statistics.label("dup REP answered").collect(p.cm[0].counter(CmCounter.CM_DUPLICATE_REP) > 0);
            boolean bUp = b.containsKey(CmEventType.ESTABLISHED);
            assertTrue(aUp || !bUp, "B established without A; " + ctx);
            if (aUp && !bUp) {
                // Linux leaves the active side established when the passive side's REP times out (REP_ERROR sends
                // no REJ); its DREQ is then answered by the passive CM, which has no such communication any more
                assertTrue(b.containsKey(CmEventType.UNREACHABLE), "half open without B failing; " + ctx);
                assertEquals(1, (int) a.getOrDefault(CmEventType.DISCONNECTED, 0), "A disconnected once; " + ctx);
            } else if (aUp) {
                // the side that disconnects always ends DISCONNECTED (DREP or DREQ timeout); the other learns of it
                // only from a DREQ: when every retransmission was lost, Linux leaves it connected (until its QP
                // fails on traffic), so does this CM
                int closer = byClient ? 0 : 1;
                boolean dreqArrived = p.tap[closer].deliveredOf(CmMsg.DREQ) > 0;
                Map<CmEventType, Integer> other = byClient ? b : a;
                assertEquals(1, (int) (byClient ? a : b).getOrDefault(CmEventType.DISCONNECTED, 0),
                        "the closing side disconnected once; " + ctx);
                assertEquals(dreqArrived ? 1 : 0, (int) other.getOrDefault(CmEventType.DISCONNECTED, 0),
                        "the other side disconnected " + (dreqArrived ? "once" : "never (no DREQ reached it)") + "; " + ctx);
                Statistics.label("teardown").collect(dreqArrived ? "DREQ arrived" : "every DREQ lost");
                if (byClient || dreqArrived) {
                    assertEquals(QpState.ERR, c.qp().state(), ctx);
                }
            } else {
                assertTrue(a.containsKey(CmEventType.UNREACHABLE) || a.containsKey(CmEventType.REJECTED), "A failed; " + ctx);
            }
        }
    }
}
