// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.WorkCompletion;

/**
 * A thread that polled a RoCE device's empty CQ receives on its own thread, so the device's receive agent stays off
 * the socket for a while; once that thread blocks on a completion channel the agent must take over at once, or a
 * packet that arrives next waits out the poller window (about 200 us, seen in the IPoIB ping profile).
 */
class SoftRoceChannelWaitTest {
    @Test
    void blockingOnTheChannelHandsReceivingBackToTheAgent() throws Exception {
        try (SoftFabric fabric = new SoftFabric(new ManualClock())) {
            SoftDevice dev = fabric.addRoceDevice("rxe0", new RoceConfig(List.of(InetAddress.getByName("127.0.0.1")),
                    SoftRoceTestFabric.freeUdpPort(), null));
            try (Context ctx = dev.open(); CompletionChannel ch = ctx.createCompChannel();
                 CompletionQueue cq = ctx.createCq(4, ch, 0)) {
                WorkCompletion wc = new WorkCompletion();
                assertFalse(cq.poll(wc));
                assertFalse(dev.roceLink().pollerBlocked(), "an empty poll receives on the polling thread");
                assertNull(ch.getCqEvent(Duration.ZERO));
                assertFalse(dev.roceLink().pollerBlocked(), "a non-blocking look at the channel is still polling");
                cq.reqNotify(false);
                assertNull(ch.getCqEvent(Duration.ofMillis(1)));
                assertTrue(dev.roceLink().pollerBlocked(), "a thread blocked on the channel receives nothing");
                assertFalse(cq.poll(wc));
                assertFalse(dev.roceLink().pollerBlocked(), "polling again: the agent defers to it again");
            }
        }
    }
}
