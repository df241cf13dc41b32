// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * Pacing (docs/engine.md, "Pacing"), on the manual clock: a READ's responses leave in bursts of at most 64
 * packets, each flushed before the next is built, and resume from the responder's state; requests that arrive
 * meanwhile wait behind them; a responder whose responses a requester had to read again leaves a gap between
 * bursts, after which a path that dropped them stops dropping. The path is a model of the interop matrix's host
 * tap in front of a slow guest: a queue of {@link Tap#capacity} packets toward A, drained at a fixed rate of the
 * fabric's clock, that drops what does not fit (drivers/net/tun.c tun_net_xmit drops on a full ring).
 */
class SoftPacingTest {
    private static final int READ = 1 << 20; // 1,024 responses at path MTU 1024
    private static final long STEP_NS = 10_000;

    private LossyPair pair;

    @AfterEach
    void tearDown() {
        if (pair != null) {
            pair.close();
        }
    }

    /**
     * A link in front of the pair's fault-injecting one that records what B sends, and the flushes between its
     * bursts, and queues B's packets toward A: at most {@code capacity} wait, {@code perStep} leave per clock step,
     * the rest is dropped (counted).
     */
    static final class Tap implements Link {
        final SoftFabric fabric;
        final Link next;
        final SoftDevice from;
        final int capacity;
        final int perStep;
        final ArrayDeque<Packet> queue = new ArrayDeque<>();
        /**
         * What B sent, in order: a READ response's PSN, -1 for a flush, -2 for an ACK (its PSN follows), -3 when
         * the clock moved since the previous packet.
         */
        final List<Long> sent = new ArrayList<>();
        private long lastNs = Long.MIN_VALUE;
        long dropped;
        private final ManualClock.Listener tick = this::onTick;

        Tap(SoftFabric fabric, Link next, SoftDevice from, int capacity, int perStep) {
            this.fabric = fabric;
            this.next = next;
            this.from = from;
            this.capacity = capacity;
            this.perStep = perStep;
            ((ManualClock) fabric.clock()).addListener(tick);
        }

        @Override
        public synchronized void send(SoftDevice d, Packet p) {
            if (d != from) {
                next.send(d, p);
                return;
            }
            long now = fabric.clock().nanoTime();
            if (now != lastNs && lastNs != Long.MIN_VALUE) {
                sent.add(-3L);
            }
            lastNs = now;
            int op = p.opcode & 0x1F;
            if (op == Opcodes.READ_RESPONSE_FIRST || op == Opcodes.READ_RESPONSE_MIDDLE
                    || op == Opcodes.READ_RESPONSE_LAST || op == Opcodes.READ_RESPONSE_ONLY) {
                sent.add((long) p.psn);
            } else if (op == Opcodes.ACKNOWLEDGE) {
                sent.add(-2L);
                sent.add((long) p.psn);
            }
            if (queue.size() >= capacity) {
                dropped++;
                return;
            }
            queue.add(p.deepCopy());
        }

        @Override
        public synchronized void flush() {
            sent.add(-1L);
        }

        private void onTick(long nowNs) {
            Burst b = Burst.enter();
            try {
                synchronized (this) {
                    for (int i = 0; i < perStep && !queue.isEmpty(); i++) {
                        next.send(from, queue.poll());
                    }
                }
            } finally {
                b.exit();
            }
        }

        @Override
        public void close() {
            ((ManualClock) fabric.clock()).removeListener(tick);
        }

        /** {@return the most READ responses B sent at one time of the clock with no flush between them} */
        synchronized int largestBurst() {
            int max = 0;
            int run = 0;
            for (int i = 0; i < sent.size(); i++) {
                long v = sent.get(i);
                if (v == -1 || v == -3) {
                    run = 0;
                } else if (v == -2) {
                    i++; // an ACK and its PSN
                } else {
                    max = Math.max(max, ++run);
                }
            }
            return max;
        }

        synchronized long flushes() {
            return sent.stream().filter(v -> v == -1).count();
        }
    }

    private Tap tap(int capacity, int perStep) {
        pair = new LossyPair(LossyPair.Config.of(QpType.RC).mtu(Mtu.MTU_1024).rdAtomic(16), 1,
                FaultInjectingLink.Faults.NONE, 8192, 2 * READ);
        pair.stepNs(STEP_NS);
        Tap t = new Tap(pair.fabric, pair.link, pair.b.dev, capacity, perStep);
        pair.fabric.setLink(t);
        return t;
    }

    private SendWorkRequest read(long wrId, long off, int len) {
        return read(pair, wrId, off, len);
    }

    private static SendWorkRequest read(LossyPair on, long wrId, long off, int len) {
        return new SendWorkRequest(1).wrId(wrId).opcode(WrOpcode.RDMA_READ).sendFlags(SendFlags.SIGNALED)
                .singleSge(on.a.addr(off), len, on.a.mr.lkey()).remoteAddr(on.b.addr(off)).rkey(on.b.mr.rkey());
    }

    private List<WorkCompletion> complete(CompletionQueue cq, int n) {
        return complete(pair, cq, n);
    }

    private List<WorkCompletion> complete(LossyPair on, CompletionQueue cq, int n) {
        int maxSteps = (int) (200 * on.timeoutNs() / STEP_NS);
        List<WorkCompletion> got = on.collect(new CompletionQueue[] {cq}, new int[] {n}, maxSteps).get(0);
        for (WorkCompletion wc : got) {
            assertEquals(WcStatus.SUCCESS, wc.status(), () -> wc + "\n" + pair.describe());
        }
        return got;
    }

    private void assertSameBytes(long off, int len) {
        MemorySegment x = pair.a.mem.asSlice(off, len);
        MemorySegment y = pair.b.mem.asSlice(off, len);
        assertEquals(-1, x.mismatch(y), () -> "A's copy differs from B's\n" + pair.describe());
    }

    private long counter(SoftDevice d, SoftCounter c) {
        return d.counter(c);
    }

    @Test
    void aLongReadIsAnsweredInBurstsOfSixtyFourEachFlushedAndResumedToTheEnd() {
        Tap t = tap(1 << 20, 1 << 20); // a path that loses nothing
        assertTrue(pair.a.qp.postSend(read(1, 0, READ)));
        complete(pair.a.scq, 1);
        assertSameBytes(0, READ);
        assertEquals(Pacer.BURST, t.largestBurst(), () -> t.sent.toString());
        assertEquals(READ / 1024 / Pacer.BURST - 1, t.flushes(), "a flush after every burst but the last");
        assertEquals(READ / 1024 / Pacer.BURST - 1, counter(pair.b.dev, SoftCounter.PACED_BURSTS));
        // every response once, in PSN order: the resumption continues where the burst stopped
        List<Long> psns = t.sent.stream().filter(v -> v >= 0).toList();
        assertEquals(READ / 1024, psns.size());
        for (int i = 1; i < psns.size(); i++) {
            assertEquals((psns.get(i - 1) + 1) & 0xFF_FFFF, (long) psns.get(i));
        }
        assertEquals(0, t.dropped);
        assertEquals(0, counter(pair.b.dev, SoftCounter.PACE_SLOWDOWNS), "no loss, no gap");
        assertEquals(0, counter(pair.a.dev, SoftCounter.COMPLETER_RETRY_ERR));
    }

    @Test
    void aResponderWhoseResponsesWereReadAgainLeavesAGapAndThePathStopsDropping() {
        // 256 packets of queue drained at 4.8 per us: a burst of 1,024 overflows it, bursts of 64 every 20 us do not
        Tap t = tap(256, 48);
        assertTrue(pair.a.qp.postSend(read(1, 0, READ)));
        complete(pair.a.scq, 1);
        assertSameBytes(0, READ);
        long firstDrops = t.dropped;
        assertTrue(firstDrops > 0, "the unpaced first READ overflowed the queue");
        assertTrue(counter(pair.b.dev, SoftCounter.PACE_SLOWDOWNS) >= 1, pair::describe);
        long retries = counter(pair.a.dev, SoftCounter.COMPLETER_RETRY_ERR);

        // the next READs of that QP are paced from their first burst: nothing is dropped, nothing read again
        pair.b.mem.fill((byte) 0x5A);
        assertTrue(pair.a.qp.postSend(read(2, 0, READ)));
        complete(pair.a.scq, 1);
        assertSameBytes(0, READ);
        assertEquals(firstDrops, t.dropped, pair::describe);
        assertEquals(retries, counter(pair.a.dev, SoftCounter.COMPLETER_RETRY_ERR), pair::describe);
        assertTrue(t.largestBurst() <= Pacer.BURST);
    }

    @Test
    void aNewQpToTheSameDestinationPacesItsFirstReadWithWhatTheDevicesQpsLearnt() {
        // A device's later QPs toward the same peer (perftest -q N, a server's reconnecting clients): the first
        // QP's READ overflows the tap once and learns the gap; a QP connected afterwards between the same two
        // devices paces its first READ from its first burst (the path's gap is the device's, not the QP's).
        Tap t = tap(256, 48);
        assertTrue(pair.a.qp.postSend(read(1, 0, READ)));
        complete(pair.a.scq, 1);
        assertSameBytes(0, READ);
        long firstDrops = t.dropped;
        assertTrue(firstDrops > 0, "the unpaced first READ overflowed the queue");
        long retries = counter(pair.a.dev, SoftCounter.COMPLETER_RETRY_ERR);
        long slowdowns = counter(pair.b.dev, SoftCounter.PACE_SLOWDOWNS);
        try (LossyPair second = LossyPair.on(pair, pair.cfg)) {
            assertTrue(second.a.qp.postSend(read(second, 9, 0, READ)));
            complete(second, second.a.scq, 1);
            MemorySegment x = second.a.mem.asSlice(0, READ);
            assertEquals(-1, x.mismatch(second.b.mem.asSlice(0, READ)), second::describe);
            assertEquals(firstDrops, t.dropped, () -> "the new QP's first READ overflowed the tap\n" + second.describe());
            assertEquals(retries, counter(pair.a.dev, SoftCounter.COMPLETER_RETRY_ERR), second::describe);
            assertEquals(slowdowns, counter(pair.b.dev, SoftCounter.PACE_SLOWDOWNS), "nothing new to learn");
            assertTrue(((SoftQp) second.b.qp).pacer.path() == ((SoftQp) pair.b.qp).pacer.path(),
                    "B's two QPs toward A share one path");
        }
    }

    @Test
    void aResetQpLeavesThePathsGapToTheOthersAndIsBoundAgainWhenConnected() {
        Pacer.Path shared = new Pacer.Path();
        Pacer a = new Pacer();
        Pacer b = new Pacer();
        a.bind(shared);
        b.bind(shared);
        assertTrue(a.lost(a.epoch(), 1_000_000, 64, 0));
        assertEquals(a.gap(1_000_000), b.gap(1_000_000), "one gap for both");
        assertTrue(b.gap(1_000_000) > 0);
        int e = b.epoch();
        // a loss of packets sent before that widening (b's READ in flight at the time) widens nothing more
        assertTrue(!b.lost(e - 1, 1_100_000, 64, 0));
        a.reset();
        assertEquals(Pacer.FLOOR_NS, a.gap(1_200_000), "a reset QP starts afresh");
        assertTrue(b.gap(1_200_000) > Pacer.FLOOR_NS, "the others keep what the path taught");
    }

    @Test
    void aRequestThatArrivesWhileAReadIsPausedIsAnsweredAfterTheReadsLastResponse() {
        Tap t = tap(256, 48);
        assertTrue(pair.a.qp.postSend(read(1, 0, READ)));
        complete(pair.a.scq, 1); // learns the gap
        t.sent.clear();
        // a READ of two bursts and a SEND behind it: the SEND reaches B while the READ's second burst waits
        int len = 2 * Pacer.BURST * 1024;
        RecvWorkRequest r = new RecvWorkRequest(1).wrId(7).singleSge(pair.b.addr(READ), 64, pair.b.mr.lkey());
        assertTrue(pair.b.qp.postRecv(r));
        SendWorkRequest send = new SendWorkRequest(1).wrId(3).opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                .singleSge(pair.a.addr(READ), 64, pair.a.mr.lkey());
        assertTrue(pair.a.qp.postSend(new SendWorkRequest[] {read(2, 0, len), send}, 2) == 2);
        List<WorkCompletion> done = complete(pair.a.scq, 2);
        assertEquals(2, done.get(0).wrId());
        assertEquals(3, done.get(1).wrId());
        complete(pair.b.rcq, 1);
        assertSameBytes(0, len);
        // B answered the SEND (its ACK) only after the READ's last response
        List<Long> seq = new ArrayList<>(t.sent);
        int ack = seq.indexOf(-2L);
        assertTrue(ack > 0, seq::toString);
        assertEquals(2 * Pacer.BURST, seq.subList(0, ack).stream().filter(v -> v >= 0).count(), seq::toString);
        assertTrue(seq.subList(0, ack).contains(-3L), () -> "the READ's second burst waited for the gap: " + seq);
        assertTrue(t.largestBurst() <= Pacer.BURST);
        assertEquals(1, t.flushes(), "the READ paused once, between its two bursts: " + seq);
    }
}
