// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.common.ManualClock;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;

/**
 * Closing a RoCE device's link frees its native memory: the transmit buffer lives in a shared arena, which
 * nothing but close frees, and each endpoint's receive batch in its own, freed when its agent ends. It used to stay allocated (1 MiB per device) for the life of the process, and the
 * -Pslow RoCE property runs, which make thousands of device pairs, grew past 20 GB and were OOM-killed.
 */
class SoftRoceLinkCloseTest {
    @Test
    void closingTheFabricFreesEveryRoceLinksTransmitBuffer() throws Exception {
        int port = SoftRoceTestFabric.freeUdpPort();
        RoceLink link;
        try (SoftFabric f = new SoftFabric(new ManualClock())) {
            SoftDevice d = f.addRoceDevice("rxe0",
                    new RoceConfig(List.of(InetAddress.ofLiteral("127.0.0.1")), port, null));
            link = d.roceLink();
            // a QP, so that the device has sent nothing yet but is fully set up
            try (Context c = d.open(); ProtectionDomain pd = c.allocPd(); CompletionQueue cq = c.createCq(4, null, 0);
                 QueuePair qp = pd.createQp(new QpInitAttributes().type(QpType.RC).sendCq(cq).recvCq(cq)
                         .cap(new QpCapabilities(4, 4, 1, 1, 0)))) {
                assertEquals(QpType.RC, qp.type());
                assertFalse(link.transmitBufferFreed(), "in use while the device is open");
                assertFalse(link.receiveBatchesFreed(), "the receive batches too");
            }
        }
        assertTrue(link.transmitBufferFreed(), "freed when the fabric closed its links");
        assertTrue(link.receiveBatchesFreed(), "and every endpoint's receive batch (1 MiB each with GRO), not left"
                + " to the garbage collector");
        link.close(); // a second close is harmless
    }

    @Test
    void anEndpointWhoseBindFailsFreesItsReceiveBatch() throws Exception {
        int port = SoftRoceTestFabric.freeUdpPort();
        RoceConfig config = new RoceConfig(List.of(InetAddress.ofLiteral("127.0.0.1")), port, null);
        try (SoftFabric owner = new SoftFabric(new ManualClock());
             SoftFabric second = new SoftFabric(new ManualClock())) {
            owner.addRoceDevice("rxe0", config); // holds the address and port
            SoftDevice d = second.addRoceDeviceBoundOnFirstQp("rxe0", config);
            try (Context c = d.open(); ProtectionDomain pd = c.allocPd(); CompletionQueue cq = c.createCq(4, null, 0)) {
                int live = RoceLink.LIVE_RX_BATCHES.get();
                VerbsException e = assertThrows(VerbsException.class,
                        () -> pd.createQp(new QpInitAttributes().type(QpType.RC).sendCq(cq).recvCq(cq)
                                .cap(new QpCapabilities(4, 4, 1, 1, 0))));
                assertEquals(Errno.EADDRINUSE, e.errno(), e.getMessage());
                assertEquals(live, RoceLink.LIVE_RX_BATCHES.get(),
                        "the endpoint that could not bind gave its receive batch back (1 MiB with GRO)");
            }
        }
    }
}
