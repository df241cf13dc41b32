// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/** The fault-injecting link itself, on UD (no retransmission to hide what it does). */
class FaultInjectingLinkTest {
    private static final int RECV = 1 << 20;

    private static void sendUd(LossyPair pair, long id, long off, int len) {
        SendWorkRequest wr = new SendWorkRequest(1).wrId(id).opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                .singleSge(pair.a.addr(off), len, pair.a.mr.lkey()).ah(pair.a.ahToPeer).remoteQpn(pair.b.qp.qpNum())
                .remoteQkey(LossyPair.QKEY);
        assertEquals(true, pair.a.qp.postSend(wr));
    }

    private static void postRecvs(LossyPair pair, int n) {
        for (int i = 0; i < n; i++) {
            assertEquals(true, pair.b.qp.postRecv(new RecvWorkRequest(1).wrId(i)
                    .singleSge(pair.b.addr(RECV + 4096L * i), 4096, pair.b.mr.lkey())));
        }
    }

    private static byte[] bytes(MemorySegment m, long off, int len) {
        byte[] b = new byte[len];
        MemorySegment.copy(m, ValueLayout.JAVA_BYTE, off, b, 0, len);
        return b;
    }

    @Test
    void aDelayedPacketCarriesTheBytesOfSendTimeAndArrivesWhenItsTimeComes() {
        try (LossyPair pair = new LossyPair(LossyPair.Config.of(QpType.UD), 3,
                new FaultInjectingLink.Faults(0, 0, 0, 1.0, 0, 1_000_000))) {
            postRecvs(pair, 1);
            byte[] sent = bytes(pair.a.mem, 0, 500);
            sendUd(pair, 1, 0, 500);
            WorkCompletion wc = new WorkCompletion();
            assertEquals(true, pair.a.scq.poll(wc), "UD completes when sent");
            pair.a.mem.asSlice(0, 500).fill((byte) 0x5A); // the sender reuses its buffer
            assertEquals(1, pair.link.heldCount());
            assertEquals(false, pair.b.rcq.poll(wc));
            pair.clock.advance(1_000_000);
            assertEquals(0, pair.link.heldCount());
            assertEquals(true, pair.b.rcq.poll(wc), "released by the clock");
            assertEquals(WcStatus.SUCCESS, wc.status());
            assertArrayEquals(sent, bytes(pair.b.mem, RECV + Responder.GRH_BYTES, 500), "a deep copy");
            assertEquals(1, pair.link.count(FaultInjectingLink.Fault.DELAYED));
        }
    }

    @Test
    void reorderedPacketsComeAfterLaterOnesAndDuplicatesTwice() {
        try (LossyPair pair = new LossyPair(LossyPair.Config.of(QpType.UD), 5, FaultInjectingLink.Faults.NONE)) {
            postRecvs(pair, 8);
            for (int i = 0; i < 4; i++) {
                pair.a.mem.set(ValueLayout.JAVA_INT_UNALIGNED, 64L * i, i);
            }
            pair.link.faults(new FaultInjectingLink.Faults(0, 0, 1.0, 0, 0, 1));
            sendUd(pair, 0, 0, 4); // held for 1..3 later packets
            pair.link.faults(new FaultInjectingLink.Faults(0, 1.0, 0, 0, 0, 1));
            sendUd(pair, 1, 64, 4);
            sendUd(pair, 2, 128, 4);
            sendUd(pair, 3, 192, 4);
            pair.clock.advance(1); // whatever is still held goes now
            int[] order = new int[8];
            int n = 0;
            WorkCompletion wc = new WorkCompletion();
            while (pair.b.rcq.poll(wc)) {
                order[n] = pair.b.mem.get(ValueLayout.JAVA_INT_UNALIGNED, RECV + 4096L * wc.wrId() + Responder.GRH_BYTES);
                n++;
            }
            assertEquals(7, n, "three duplicated, one reordered");
            assertEquals(1, order[0], "the held packet is not first");
            assertEquals(3, pair.link.count(FaultInjectingLink.Fault.DUPLICATED));
            assertEquals(1, pair.link.count(FaultInjectingLink.Fault.REORDERED));
        }
    }

    @Test
    void corruptedPacketsAreDiscardedAsIcrcErrors() {
        try (LossyPair pair = new LossyPair(LossyPair.Config.of(QpType.UD), 7,
                new FaultInjectingLink.Faults(0, 0, 0, 0, 1.0, 1))) {
            postRecvs(pair, 3);
            for (int i = 0; i < 3; i++) {
                sendUd(pair, i, 0, 100);
            }
            assertNull(pollOrNull(pair.b.rcq));
            assertEquals(3, pair.b.dev.counter(SoftCounter.ICRC_ERROR));
            assertEquals(0, pair.b.dev.counter(SoftCounter.RCVD_PKTS));
        }
    }

    @Test
    void theSameSeedGivesTheSameFates() {
        long[][] counts = new long[2][];
        for (int k = 0; k < 2; k++) {
            try (LossyPair pair = new LossyPair(LossyPair.Config.of(QpType.UD), 42,
                    FaultInjectingLink.Faults.all(0.3, 10_000))) {
                postRecvs(pair, 64);
                for (int i = 0; i < 40; i++) {
                    sendUd(pair, i, 8L * i, 8);
                }
                pair.quiesce(2);
                counts[k] = new long[FaultInjectingLink.Fault.values().length + 1];
                for (FaultInjectingLink.Fault f : FaultInjectingLink.Fault.values()) {
                    counts[k][f.ordinal()] = pair.link.count(f);
                }
                counts[k][counts[k].length - 1] = pair.b.dev.counter(SoftCounter.RCVD_PKTS);
            }
        }
        assertArrayEquals(counts[0], counts[1]);
        assertNotNull(counts[0]);
    }

    @Test
    void probabilitiesAreChecked() {
        assertThrows(IllegalArgumentException.class, () -> new FaultInjectingLink.Faults(1.5, 0, 0, 0, 0, 1));
        assertThrows(IllegalArgumentException.class, () -> new FaultInjectingLink.Faults(0, 0, 0, 0, 0, 0));
    }

    private static WorkCompletion pollOrNull(org.rdma4j.verbs.CompletionQueue cq) {
        WorkCompletion wc = new WorkCompletion();
        return cq.poll(wc) ? wc : null;
    }
}
