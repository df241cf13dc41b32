// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.time.Duration;

import org.junit.jupiter.api.Tag;
import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.testkit.model.AbstractConcurrencyTest;

/**
 * The long run of the concurrency suite between two RoCE devices that meet only through UDP sockets on
 * 127.0.0.1 and 127.0.0.2, for {@code ./rdma4j test -Pslow} (issue 16 item 15): several QPs and threads,
 * up to 27 times the messages per thread of the default tier, with the receive agents and the pollers'
 * busy-poll receive taking turns on the same sockets. RC only: over a real UDP socket a burst of UC or UD
 * messages larger than the receiver's socket buffer loses some (the sender does not wait for anyone),
 * which those transports allow; 32,000 unacknowledged UC messages did lose 1,378 here.
 */
@Tag("slow")
class SoftRoceConcurrencySlowTest extends AbstractConcurrencyTest {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftRoceTestFabric(clock);
    }

    /** UC over UDP may lose messages: not a property of this run (see the class comment). */
    @Override
    public void ucQpsSharingOneCqCompleteEveryRequestOnce() {
    }

    /** UC over UDP may lose messages: not a property of this run (see the class comment). */
    @Override
    public void ucConcurrentPostersOnOneQpKeepPerThreadOrder() {
    }

    /** UD over UDP may lose messages: not a property of this run (see the class comment). */
    @Override
    public void udConcurrentPostersOnOneQpDeliverEveryMessageOnce() {
    }

    @Override
    protected int messagesPerThread() {
        return 8000;
    }

    @Override
    protected Duration deadline() {
        return Duration.ofMinutes(5);
    }
}
