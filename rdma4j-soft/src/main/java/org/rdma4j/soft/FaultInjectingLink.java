// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.SplittableRandom;
import java.util.function.Consumer;
import java.util.function.Predicate;

import org.rdma4j.common.ManualClock;

/**
 * A link decorator for tests that loses, duplicates, reorders, delays and corrupts packets, with
 * independent seeded probabilities, in front of another link (normally the fabric's in-process one).
 * What it does depends only on its seed and the packets it is given, so a failing run is repeated by
 * its seed (in {@link #toString()}).
 *
 * <ul>
 *   <li><b>drop</b>: the packet is gone.</li>
 *   <li><b>corrupt</b>: models a bit error in flight. The receiver would fail the ICRC check and
 *       discard the packet (rxe_icrc_check in rxe_rcv), so for in-process packets it is a drop
 *       counted on the receiving device as {@link SoftCounter#ICRC_ERROR}.</li>
 *   <li><b>reorder</b>: the packet is held and released after 1..3 later packets have passed (or at
 *       the next clock step, so a quiet link cannot keep it forever).</li>
 *   <li><b>delay</b>: the packet is held until a later time of the fabric's clock (1 ns ..
 *       {@code maxDelayNs} after it was sent). With a {@link ManualClock} it is released inside
 *       {@code advance}; on another clock, with the next packet sent after its time.</li>
 *   <li><b>duplicate</b>: the packet is delivered, and a copy of it right after.</li>
 * </ul>
 * A fixed {@link #latency latency} can be added to every packet that survives (a wire of that length:
 * packets stay in order, released by the fabric's clock), so that requests and responses are in
 * flight at the same time as on a real link; with it, {@link #jump} reorders as tc-netem's
 * {@code delay D reorder P} does (a packet picked is sent at once, ahead of all still in transit), and a
 * {@link #rate rate} makes each sender's packets leave one after another, as through a bottleneck that
 * queues them (a receiver slower than its sender, like kernel rxe in the TCG guest of interop/run).
 * Every packet the link keeps beyond the sender's call is a deep copy (payload copied out of the
 * sender's memory at send time, as a wire would carry it). Packets sent while this link is delivering
 * one (an ACK produced by the responder the packet reached, say) are queued and delivered in order
 * after it, as a wire would: a device never receives a packet re-entrantly from this link, whatever
 * the timing of held packets. Thread-safe: one thread at a time offers and delivers, under the link's monitor.
 */
final class FaultInjectingLink implements Link {
    /**
     * Fault probabilities, each in [0, 1], drawn independently per packet.
     *
     * @param drop       lose the packet
     * @param duplicate  deliver it twice
     * @param reorder    hold it until 1..3 later packets have passed
     * @param delay      hold it for up to {@code maxDelayNs} of the fabric's clock
     * @param corrupt    corrupt it in flight (an ICRC error: the receiver discards it)
     * @param maxDelayNs longest delay, at least 1
     */
    record Faults(double drop, double duplicate, double reorder, double delay, double corrupt, long maxDelayNs) {
        /** No faults. */
        static final Faults NONE = new Faults(0, 0, 0, 0, 0, 1);

        Faults {
            for (double d : new double[] {drop, duplicate, reorder, delay, corrupt}) {
                if (!(d >= 0 && d <= 1)) {
                    throw new IllegalArgumentException("fault probability " + d + " (expected 0..1)");
                }
            }
            if (maxDelayNs < 1) {
                throw new IllegalArgumentException("maxDelayNs " + maxDelayNs + " (expected >= 1)");
            }
        }

        /** {@return every fault with probability {@code p}} */
        static Faults all(double p, long maxDelayNs) {
            return new Faults(p, p, p, p, p, maxDelayNs);
        }

        /** {@return only drops, with probability {@code p}} */
        static Faults dropping(double p) {
            return new Faults(p, 0, 0, 0, 0, 1);
        }
    }

    /** What the link did to packets, counted. */
    enum Fault {
        /** Lost (randomly or by {@link #dropIf}). */
        DROPPED,
        /** Corrupted, and so discarded by the receiver. */
        CORRUPTED,
        /** Delivered twice. */
        DUPLICATED,
        /** Held and released after later packets. */
        REORDERED,
        /** Held until a later time. */
        DELAYED
    }

    private static final class Held {
        final SoftDevice from;
        final Packet p;
        /** Faults already applied: deliver as is. */
        final boolean release;
        int countdown;
        long dueNs;
        /** Order of entry among packets due at the same time ({@link #inFlight}). */
        long seq;

        Held(SoftDevice from, Packet p, boolean release) {
            this.from = from;
            this.p = p;
            this.release = release;
        }
    }

    private final SoftFabric fabric;
    private final Link next;
    private final long seed;
    private final SplittableRandom rnd;
    private Faults faults;
    private Predicate<Packet> dropIf;
    private Consumer<Packet> tap;
    private final long[] counts = new long[Fault.values().length];
    /** Packets to deliver, in order, before the current send returns. */
    private final ArrayDeque<Held> queue = new ArrayDeque<>();
    /** Reordered and delayed packets. */
    private final List<Held> held = new ArrayList<>();
    /**
     * The reordered ones among {@link #held}, in the same order: every packet sent counts them down, so this
     * walk must not visit the delayed ones too (thousands, in a long burst on a manual clock that does not move).
     */
    private final List<Held> reordered = new ArrayList<>();
    /** Packets on the wire when a latency or a rate is set, by the time they land (then as sent). */
    private final PriorityQueue<Held> inFlight = new PriorityQueue<>((x, y) -> x.dueNs != y.dueNs
            ? Long.compare(x.dueNs - y.dueNs, 0) : Long.compare(x.seq, y.seq));
    private long inFlightSeq;
    private long latencyNs;
    /** Time each packet takes to leave, per sender ({@link #rate}); 0 for none. */
    private long perPacketNs;
    /** Per sender: when its bottleneck is free for the next packet. */
    private final Map<SoftDevice, long[]> freeAt = new IdentityHashMap<>();
    /** Probability that a packet skips the latency ({@link #jump}). */
    private double jump;
    /** The draws of {@link #jump}: a source of their own, so that they leave the other faults' draws as they were. */
    private final SplittableRandom jumpRnd;
    private boolean delivering;
    private final ManualClock.Listener listener = this::onClock;
    private boolean closed;

    /**
     * @param fabric the fabric whose clock the link uses
     * @param next   the link that carries the packets that survive
     * @param seed   seed of every random choice
     * @param faults the probabilities
     */
    FaultInjectingLink(SoftFabric fabric, Link next, long seed, Faults faults) {
        this.fabric = fabric;
        this.next = next;
        this.seed = seed;
        this.rnd = new SplittableRandom(seed);
        this.jumpRnd = new SplittableRandom(~seed);
        this.faults = faults;
        if (fabric.clock instanceof ManualClock mc) {
            mc.addListener(listener);
        }
    }

    /** {@return the seed, to print on failure} */
    long seed() {
        return seed;
    }

    /** Changes the probabilities (any thread). */
    synchronized void faults(Faults f) {
        faults = f;
    }

    /**
     * Drops, before any random fault, every packet the predicate accepts (for scripted losses:
     * "the third READ response"). Called with each packet offered, valid only during the call.
     */
    synchronized void dropIf(Predicate<Packet> p) {
        dropIf = p;
    }

    /**
     * Gives every packet that survives the faults a fixed transit time of the fabric's clock (0, the
     * default, delivers at once). Any thread.
     *
     * @param ns the one-way latency, at least 0
     */
    synchronized void latency(long ns) {
        if (ns < 0) {
            throw new IllegalArgumentException("latency " + ns + " ns (expected >= 0)");
        }
        latencyNs = ns;
    }

    /**
     * Makes each sender's packets that survive the faults leave one every {@code nsPerPacket} of the fabric's
     * clock, queued behind one another without limit (then the {@link #latency}): a bottleneck, as a slow
     * receiver is, so that a sender's window turns into queueing delay and a loss costs what the queue holds.
     * Packets picked by {@link #jump} wait their turn here too, and skip only the latency. Any thread.
     *
     * @param nsPerPacket the time per packet, at least 0 (0, the default: none)
     */
    synchronized void rate(long nsPerPacket) {
        if (nsPerPacket < 0) {
            throw new IllegalArgumentException("rate " + nsPerPacket + " ns per packet (expected >= 0)");
        }
        perPacketNs = nsPerPacket;
    }

    /**
     * tc-netem's reordering ({@code delay D reorder P}, netem_enqueue): with a {@link #latency} set, each packet
     * that survives the faults is, with probability {@code p}, delivered at once instead of after the latency,
     * ahead of every packet still in transit (counted {@link Fault#REORDERED}). A packet so picked overtakes a
     * whole latency of traffic, unlike the random {@link Faults#reorder} (1..3 packets). Any thread.
     *
     * @param p the probability, in [0, 1]
     */
    synchronized void jump(double p) {
        if (!(p >= 0 && p <= 1)) {
            throw new IllegalArgumentException("jump probability " + p + " (expected 0..1)");
        }
        jump = p;
    }

    /** Shows every packet offered to the link, before faults (valid only during the call). */
    synchronized void tap(Consumer<Packet> t) {
        tap = t;
    }

    /** {@return how often the link did that} */
    synchronized long count(Fault f) {
        return counts[f.ordinal()];
    }

    /** {@return packets held for reordering or delay, or in flight} */
    synchronized int heldCount() {
        return held.size() + inFlight.size();
    }

    /**
     * {@inheritDoc}
     *
     * <p>Under the link's monitor: one thread at a time offers and delivers (a delivery only ever tries the
     * target QP's executor, so the monitor never waits on a QP).
     */
    @Override
    public synchronized void send(SoftDevice from, Packet p) {
        if (tap != null) {
            tap.accept(p);
        }
        if (delivering) {
            queue.add(new Held(from, p.deepCopy(), false)); // sent from inside a delivery: after it
            return;
        }
        delivering = true;
        try {
            long now = fabric.clock.nanoTime();
            land(now);
            releaseDue(now, false);
            offer(from, p);
            drain();
        } finally {
            delivering = false;
        }
    }

    /** Applies the faults to one packet and delivers it, holds it, or drops it. */
    private void offer(SoftDevice from, Packet p) {
        Faults f = faults;
        // One draw per fault whatever happens, so a packet's fate does not shift the later ones'.
        boolean drop = rnd.nextDouble() < f.drop;
        boolean corrupt = rnd.nextDouble() < f.corrupt;
        boolean reorder = rnd.nextDouble() < f.reorder;
        boolean delay = rnd.nextDouble() < f.delay;
        boolean dup = rnd.nextDouble() < f.duplicate;
        int countdown = 1 + rnd.nextInt(3);
        long delayNs = 1 + rnd.nextLong(f.maxDelayNs);
        tickReordered();
        if (dropIf != null && dropIf.test(p) || drop) {
            counts[Fault.DROPPED.ordinal()]++;
            return;
        }
        if (corrupt) {
            counts[Fault.CORRUPTED.ordinal()]++;
            SoftDevice to = p.route != null ? p.route : fabric.deviceFor(p.dgid);
            if (to != null) {
                to.count(SoftCounter.ICRC_ERROR); // the receiver's ICRC check discards it
            }
            return;
        }
        if (reorder || delay) {
            Packet c = copy(from, p);
            if (c == null) {
                return;
            }
            Held h = new Held(from, c, true);
            if (reorder) {
                counts[Fault.REORDERED.ordinal()]++;
                h.countdown = countdown;
            } else {
                counts[Fault.DELAYED.ordinal()]++;
                h.dueNs = fabric.clock.nanoTime() + delayNs;
            }
            held.add(h);
            if (h.countdown > 0) {
                reordered.add(h);
            }
            return;
        }
        Packet again = null;
        if (dup) {
            again = copy(from, p); // copied before delivery: the receiver may change the source memory
        }
        deliver(from, p);
        if (again != null) {
            counts[Fault.DUPLICATED.ordinal()]++;
            queue.addFirst(new Held(from, again, true));
        }
    }

    /** A deep copy, or null (counted as a drop) if the sender's memory is already gone. */
    private Packet copy(SoftDevice from, Packet p) {
        try {
            return p.deepCopy();
        } catch (IllegalStateException | IndexOutOfBoundsException e) {
            counts[Fault.DROPPED.ordinal()]++;
            return null;
        }
    }

    /** One more packet has passed: reordered packets whose count is up go next. */
    private void tickReordered() {
        for (Iterator<Held> it = reordered.iterator(); it.hasNext(); ) {
            Held h = it.next();
            if (--h.countdown == 0) {
                it.remove();
                held.remove(h);
                queue.add(h);
            }
        }
    }

    private void releaseDue(long nowNs, boolean all) {
        for (Iterator<Held> it = held.iterator(); it.hasNext(); ) {
            Held h = it.next();
            if (h.countdown > 0 ? all : nowNs - h.dueNs >= 0) {
                it.remove();
                if (h.countdown > 0) {
                    reordered.remove(h);
                }
                queue.add(h);
            }
        }
    }

    private void drain() {
        Held h;
        while ((h = queue.poll()) != null) {
            if (h.release) {
                deliver(h.from, h.p);
            } else {
                offer(h.from, h.p);
            }
        }
    }

    /** Hands a packet that survived to the next link, now or after the latency. */
    private void deliver(SoftDevice from, Packet p) {
        if (latencyNs == 0 && perPacketNs == 0) {
            next.send(from, p);
            return;
        }
        boolean jumps = jump > 0 && jumpRnd.nextDouble() < jump;
        if (jumps) {
            counts[Fault.REORDERED.ordinal()]++;
            if (perPacketNs == 0) {
                next.send(from, p); // netem: sent without its delay, ahead of those in transit
                return;
            }
        }
        Packet c = copy(from, p);
        if (c != null) {
            Held h = new Held(from, c, true);
            long now = fabric.clock.nanoTime();
            long leave = now;
            if (perPacketNs > 0) {
                long[] free = freeAt.computeIfAbsent(from, d -> new long[] {now});
                leave = Math.max(now, free[0]) + perPacketNs;
                free[0] = leave;
            }
            // a packet picked by jump still waits its turn at the bottleneck, then overtakes what is in transit
            h.dueNs = jumps ? leave : leave + latencyNs;
            h.seq = inFlightSeq++;
            inFlight.add(h);
        }
    }

    /** Delivers the packets whose transit time is over, in order. */
    private void land(long nowNs) {
        Held h;
        while ((h = inFlight.peek()) != null && nowNs - h.dueNs >= 0) {
            inFlight.poll();
            next.send(h.from, h.p);
            drain(); // what that delivery sent goes on the wire behind it
        }
    }

    /** Time moved: delayed packets that are due go, and so do reordered ones still waiting. */
    private void onClock(long nowNs) {
        Burst b = Burst.enter();
        try {
            synchronized (this) {
                if (delivering || closed || held.isEmpty() && inFlight.isEmpty()) {
                    return;
                }
                delivering = true;
                try {
                    land(nowNs);
                    releaseDue(nowNs, true);
                    drain();
                } finally {
                    delivering = false;
                }
            }
        } finally {
            b.exit();
        }
    }

    @Override
    public synchronized void close() {
        closed = true;
        if (fabric.clock instanceof ManualClock mc) {
            mc.removeListener(listener);
        }
        held.clear();
        reordered.clear();
        queue.clear();
        inFlight.clear();
        freeAt.clear();
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder("FaultInjectingLink{seed=").append(seed).append(", ").append(faults);
        for (Fault f : Fault.values()) {
            sb.append(", ").append(f.name().toLowerCase(java.util.Locale.ROOT)).append('=').append(counts[f.ordinal()]);
        }
        return sb.append(", held=").append(held.size()).append('}').toString();
    }
}
