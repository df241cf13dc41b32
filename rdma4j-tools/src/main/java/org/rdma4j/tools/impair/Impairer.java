// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools.impair;

import java.util.SplittableRandom;

/**
 * What happens to each packet, decided in netem's order (Linux {@code net/sched/sch_netem.c},
 * {@code netem_enqueue}): duplication, then loss, then corruption, then delay or reordering. A packet
 * that is both duplicated and lost goes once. A copy made by duplication is impaired again on its
 * own, but not duplicated again (netem re-enqueues it with duplication off). With a delay, each
 * packet is held for it, except that with probability {@code reorder} (once every {@code gap} packets)
 * one is sent at once, ahead of those still held: that is netem's reordering. Every draw comes from
 * one seeded generator, so the same seed and the same packets give the same fates. Not thread-safe:
 * one thread decides.
 */
public final class Impairer {
    /** What to do with one packet. */
    public enum Fate {
        /** Lost. */
        DROP,
        /** Goes (at {@link Decision#dueNs}). */
        PASS
    }

    /**
     * One packet's fate.
     *
     * @param fate      dropped or passed
     * @param duplicate also send a copy (which comes back to {@link #decide} with {@code copy} true)
     * @param corruptAt the byte whose bit {@code corruptBit} flips, or -1
     * @param corruptBit the bit, 0..7
     * @param dueNs     when it goes: the arrival time, or later by the delay
     * @param reordered sent at once although a delay is set
     */
    public record Decision(Fate fate, boolean duplicate, int corruptAt, int corruptBit, long dueNs, boolean reordered) {
    }

    /** Counts of what was done. */
    public static final class Counts {
        /** All zero. */
        public Counts() {
        }

        /** Packets decided (copies included). */
        public long packets;
        /** Lost. */
        public long lost;
        /** Duplicated (copies made). */
        public long duplicated;
        /** Corrupted. */
        public long corrupted;
        /** Held for the delay. */
        public long delayed;
        /** Sent at once although a delay is set. */
        public long reordered;
    }

    private final NetemSpec spec;
    private final SplittableRandom rnd;
    private final Counts counts = new Counts();
    /** netem q->counter: packets delayed since the last one sent at once. */
    private int counter;

    /**
     * An impairer of the given parameters.
     *
     * @param spec the impairments
     * @param seed seed of every random choice
     */
    public Impairer(NetemSpec spec, long seed) {
        this.spec = spec;
        this.rnd = new SplittableRandom(seed);
    }

    /** {@return what was done so far (read by the deciding thread, or after it stopped)} */
    public Counts counts() {
        return counts;
    }

    /**
     * Decides the fate of one packet, as netem's enqueue does.
     *
     * @param length the packet's length in bytes (for the corrupted byte)
     * @param copy   the packet is a copy made by duplication
     * @param nowNs  its arrival time
     * @return its fate
     */
    public Decision decide(int length, boolean copy, long nowNs) {
        counts.packets++;
        int count = 1;
        // netem draws only for the impairments that are set (each test is "q->x && q->x >= random").
        if (!copy && spec.duplicate() > 0 && rnd.nextDouble() < spec.duplicate()) {
            count++;
        }
        if (spec.loss() > 0 && rnd.nextDouble() < spec.loss()) {
            count--;
        }
        if (count == 0) {
            counts.lost++;
            return new Decision(Fate.DROP, false, -1, 0, nowNs, false);
        }
        boolean dup = count > 1;
        if (dup) {
            counts.duplicated++;
        }
        int at = -1;
        int bit = 0;
        if (spec.corrupt() > 0 && rnd.nextDouble() < spec.corrupt() && length > 0) {
            at = rnd.nextInt(length);
            bit = rnd.nextInt(8);
            counts.corrupted++;
        }
        if (spec.delayNs() == 0) {
            return new Decision(Fate.PASS, dup, at, bit, nowNs, false);
        }
        // netem: "if (q->gap == 0 || q->counter < q->gap - 1 || q->reorder < get_crandom(...))" delay it,
        // else send it now, at the head of the queue, and restart the count.
        int gap = spec.gap();
        if (gap == 0 || counter < gap - 1 || !(rnd.nextDouble() < spec.reorder())) {
            counter++;
            counts.delayed++;
            return new Decision(Fate.PASS, dup, at, bit, nowNs + spec.delayNs(), false);
        }
        counter = 0;
        counts.reordered++;
        return new Decision(Fate.PASS, dup, at, bit, nowNs, true);
    }
}
