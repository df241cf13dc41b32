// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit;

import java.lang.foreign.Arena;
import java.net.InetAddress;

import org.rdma4j.common.ManualClock;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * The fixture of the CM conformance suite ({@link AbstractCmTest}): two hosts, each with its own
 * connection manager (its own port tables) and an RDMA device with an IP address, that reach each other.
 * A provider whose CM timers run on {@link #clock()} lets the suite drive retransmissions and TIMEWAIT;
 * one on real time returns false from {@link #manualTimers()} and the timer-driven tests are skipped.
 */
public interface CmFabric extends AutoCloseable {
    /**
     * {@return the host's CM (the providers of that host)}
     *
     * @param host 0 or 1
     */
    RdmaCm cm(int host);

    /**
     * {@return an address of the host's device that the other host reaches}
     *
     * @param host 0 or 1
     */
    InetAddress address(int host);

    /** {@return the clock of the CMs' timers (MAD retransmissions, TIMEWAIT)} */
    ManualClock clock();

    /** {@return whether the CMs' timers follow {@link #clock()}} */
    default boolean manualTimers() {
        return true;
    }

    /**
     * Lets the CMs process what arrived (for CMs driven by their owner); called in every wait of the suite.
     * The default does nothing (CMs with their own threads).
     */
    default void progress() {
    }

    /**
     * An address on host 1's network that no host owns, so a REQ sent there is never answered, or null
     * if the fabric has none (the unreachable-peer tests are skipped).
     *
     * @return the address, or null
     */
    default InetAddress unownedAddress() {
        return null;
    }

    /**
     * A counter of a host's CM, by name (e.g. {@code cm_duplicate_req}), for tests that check what was
     * counted; -1 when the provider has no such counter.
     *
     * @param host 0 or 1
     * @param name the counter
     * @return its value, or -1
     */
    default long cmCounter(int host, String name) {
        return -1;
    }

    /** {@return a new arena for test buffers (memory the devices can reach)} */
    default Arena bufferArena() {
        return Arena.ofShared();
    }

    /** Tears the hosts down. */
    @Override
    void close();
}
