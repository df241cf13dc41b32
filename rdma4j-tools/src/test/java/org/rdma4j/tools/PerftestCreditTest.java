// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.Arena;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.Verbs;

/**
 * perftest's iWARP receive credits ({@link PerftestCredit}) between two connected RC QPs of the soft
 * device: the receiver's 4-byte WRITEs land in the credit word the sender advertised, and the sender's
 * window opens exactly as perftest's {@code run_iter_bw} computes it. (The tools use credits only on iWARP
 * devices; the end-to-end proof against Linux's perftest on siw0 is interop/ibverbs-tools.)
 */
class PerftestCreditTest {
    @Test
    void theReceiversCreditWritesOpenTheSendersWindowAsPerftestCountsThem() {
        assumeTrue(Verbs.devices().size() >= 2, "needs soft0 and soft1");
        int rxDepth = 9; // a credit every 3 receives
        int txDepth = 2;
        try (Arena arena = Arena.ofShared();
             Context a = Verbs.device("soft0").open();
             Context b = Verbs.device("soft1").open();
             ProtectionDomain pdA = a.allocPd();
             ProtectionDomain pdB = b.allocPd();
             CompletionQueue cqA = a.createCq(16, null, 0);
             CompletionQueue cqB = b.createCq(16, null, 0);
             QueuePair sender = pdA.createQp(new QpInitAttributes().type(QpType.RC).sendCq(cqA).recvCq(cqA)
                     .cap(new QpCapabilities(4, 4, 1, 1, 0)));
             QueuePair receiver = pdB.createQp(new QpInitAttributes().type(QpType.RC).sendCq(cqB).recvCq(cqB)
                     .cap(new QpCapabilities(txDepth, 4, 1, 1, 0)));
             PerftestCredit senderSide = new PerftestCredit(pdA, arena, 1, rxDepth, 4);
             PerftestCredit receiverSide = new PerftestCredit(pdB, arena, 1, rxDepth, txDepth)) {
            ReadmeExampleTest.connect(sender, receiver.qpNum(), b.queryGid(1, 0));
            ReadmeExampleTest.connect(receiver, sender.qpNum(), a.queryGid(1, 0));
            PerftestFormat.Dest blank = new PerftestFormat.Dest(0, 0, 0, 0, 0, new byte[16]);
            receiverSide.peer(new PerftestFormat.Dest[] {senderSide.advertise(0, blank)});

            // No credit yet: scnt + 1 - 0 < 9 lets 9 SENDs go (scnt 0..8), not the 10th.
            assertTrue(senderSide.mayPost(0, 7, 1));
            assertFalse(senderSide.mayPost(0, 8, 1), "perftest's window is rx_depth - 1 SENDs ahead of the credit");

            // The receiver takes receives 1 and 2: no WRITE (every rx_depth / 3 = 3); the 3rd sends credit 3.
            receiverSide.received(receiver, cqB, 0, 1);
            receiverSide.received(receiver, cqB, 0, 2);
            assertFalse(senderSide.mayPost(0, 8, 1));
            receiverSide.received(receiver, cqB, 0, 3);
            receiverSide.drain(cqB); // the WRITE completed, so its 4 bytes are in the sender's word
            assertTrue(senderSide.mayPost(0, 10, 1)); // 10 + 1 - 3 = 8 < 9
            assertFalse(senderSide.mayPost(0, 11, 1));
            assertFalse(senderSide.mayPost(0, 10, 2), "a post list counts whole");

            // More WRITEs than tx_depth in flight wait for completions instead of overrunning the SQ.
            for (long r = 4; r <= 27; r++) {
                receiverSide.received(receiver, cqB, 0, r);
            }
            receiverSide.drain(cqB);
            assertTrue(senderSide.mayPost(0, 34, 1)); // credit 27: 34 + 1 - 27 = 8 < 9
            assertFalse(senderSide.mayPost(0, 35, 1));

            senderSide.reset(); // the next message size starts from no credit
            assertFalse(senderSide.mayPost(0, 8, 1));
        }
    }
}
