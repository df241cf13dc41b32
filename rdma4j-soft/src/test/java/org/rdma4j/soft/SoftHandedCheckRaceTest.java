// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;

/**
 * The timer service's check of packets handed to pollers (docs/engine.md, "Active poller") races with a sender
 * that hands one more: the sender puts the packet in the QP's inbox and then reads {@code handedWatched} (set:
 * the service watches the QP already, nothing to do); the service, finding the inbox empty, clears the flag and
 * looks at the inbox again before it forgets the QP. Either the service sees the packet or the sender sees the
 * flag cleared and watches the QP again: never neither, or a packet left to a poller that has stopped stays in
 * the inbox with nobody to run it. Before the fix the service's second look read the inbox's published slots,
 * while the only store the sender orders before its read of the flag is its claim of the slot (a CAS): the
 * publish is a release store, which a later load may overtake.
 *
 * <p>A stress loop in the manner of jcstress, bounded in rounds and time: per round, 64 QPs watched with empty
 * inboxes; one thread hands each a packet (an ACK, which the QP, in RESET, drops when it runs), the other runs the
 * service's check (an advance of the fabric's manual clock). After the round every QP with a packet must still be
 * watched. Then the QPs are run, forgotten and watched again through the product's own paths.
 */
class SoftHandedCheckRaceTest {
    private static final int QPS = 64;
    private static final int MAX_ROUNDS = 40_000;
    private static final long MAX_NS = 8_000_000_000L;

    @Test
    void aPacketHandedWhileTheServiceForgetsTheQpIsSeenByOneOfThem() throws Exception {
        ManualClock clock = new ManualClock();
        try (SoftFabric fabric = new SoftFabric(clock)) {
            SoftDevice dev = fabric.addDevice("d0");
            try (Context ctx = dev.open(); ProtectionDomain pd = ctx.allocPd();
                 CompletionQueue cq = ctx.createCq(16, null, 0)) {
                SoftQp[] qps = new SoftQp[QPS];
                QueuePair[] opened = new QueuePair[QPS];
                try {
                    for (int i = 0; i < QPS; i++) {
                        opened[i] = pd.createQp(new QpInitAttributes().type(QpType.RC).sendCq(cq).recvCq(cq)
                                .cap(new QpCapabilities(4, 4, 1, 1, 0)));
                        qps[i] = (SoftQp) opened[i];
                    }
                    run(qps, fabric.timers, clock);
                } finally {
                    for (QueuePair qp : opened) {
                        if (qp != null) {
                            qp.close();
                        }
                    }
                }
            }
        }
    }

    private static void run(SoftQp[] qps, TimerService timers, ManualClock clock) throws Exception {
        // the order in which the check visits a list of QPs it forgets one after the other (it moves the last
        // into the place of the one it forgets): the sender hands packets in the same order, so the two meet
        int[] order = new int[QPS];
        order[0] = 0;
        for (int k = 1; k < QPS; k++) {
            order[k] = QPS - k;
        }
        RoundBarrier barrier = new RoundBarrier();
        AtomicReference<Throwable> senderFailed = new AtomicReference<>();
        Thread sender = new Thread(() -> {
            try {
                Packet p = new Packet();
                p.opcode = Opcodes.RC | Opcodes.ACKNOWLEDGE;
                for (int r = 1; barrier.awaitStart(r); r++) {
                    for (int k : order) {
                        SoftQp qp = qps[k];
                        p.destQpn = qp.qpn;
                        p.psn = r;
                        assertTrue(qp.inbox.offer(p), "inbox full");
                        timers.handedOver(qp);
                    }
                    barrier.partnerDone(r);
                }
            } catch (Throwable t) {
                senderFailed.set(t);
                barrier.partnerDone(Integer.MAX_VALUE);
            }
        }, "handing-sender");
        sender.setDaemon(true);
        sender.start();
        long start = System.nanoTime();
        long trials = 0;
        long kept = 0;
        int round = 0;
        try {
            while (round < MAX_ROUNDS && System.nanoTime() - start < MAX_NS) {
                // watched, inboxes empty: a check now forgets every QP unless a packet arrives meanwhile
                for (int k = QPS - 1; k >= 0; k--) {
                    timers.handedOver(qps[order[k]]); // pushed onto a stack: the check lists them in order
                }
                round++;
                barrier.start(round);
                clock.advance(1); // the service's check, on this thread
                barrier.awaitPartner(round, start + MAX_NS + 10_000_000_000L, "sender");
                if (senderFailed.get() != null) {
                    throw new AssertionError("the sender failed", senderFailed.get());
                }
                for (int i = 0; i < QPS; i++) {
                    SoftQp qp = qps[i];
                    trials++;
                    if (!qp.inbox.isEmpty()) {
                        if (!qp.handedWatched) {
                            fail("round " + round + ", QP " + i + ": a packet is in the inbox and the timer service"
                                    + " no longer watches the QP: nobody would run it (lost after " + trials
                                    + " trials, " + kept + " with the packet left for a later check)");
                        }
                        kept++;
                    }
                }
                // run what is left, then a check forgets every QP (all empty)
                for (SoftQp qp : qps) {
                    qp.exec.schedule();
                }
                clock.advance(1);
                for (SoftQp qp : qps) {
                    assertTrue(qp.inbox.isEmpty() && !qp.handedWatched, "a QP was not reset");
                }
            }
        } finally {
            barrier.stop();
            sender.join(10_000);
        }
        assertTrue(!sender.isAlive(), "the sender did not stop");
        System.out.println("SoftHandedCheckRaceTest: " + round + " rounds, " + trials + " trials, " + kept
                + " with the packet left for a later check, none lost");
    }
}
