// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit;

import java.lang.foreign.Arena;

import org.rdma4j.common.ManualClock;
import org.rdma4j.verbs.Device;

/**
 * A test network of at least two devices that behave as two hosts on one network. Every protocol
 * timer of its devices (retransmit, RNR NAK) is driven by {@link #clock()}: tests move time with
 * {@code clock().advance(ns)} and never sleep.
 */
public interface Fabric extends AutoCloseable {
    /**
     * {@return the device}
     *
     * @param index 0-based device index, below {@link #deviceCount()}
     */
    Device device(int index);

    /** {@return how many devices the fabric has (at least 2)} */
    int deviceCount();

    /** {@return the clock that drives all protocol timers of the fabric's devices} */
    ManualClock clock();

    /**
     * Changes the logical state of a port, as pulling a cable or {@code ip link set down} would.
     * Optional: fabrics that cannot do this throw {@link UnsupportedOperationException}.
     *
     * @param deviceIndex device index
     * @param port        1-based port number
     * @param active      true for ACTIVE, false for DOWN
     */
    default void setPortState(int deviceIndex, int port, boolean active) {
        throw new UnsupportedOperationException("this fabric cannot change port states");
    }

    /**
     * A new arena for the test's buffers (the memory tests register and read and write directly). A
     * fabric whose devices live in other processes returns one that allocates from memory those processes
     * share, at the same virtual address in each; the default is {@link Arena#ofShared()}. Closed by
     * the test after every region over it is deregistered, before the fabric is closed.
     *
     * @return a fresh arena whose segments are native, zeroed and alive until it is closed
     */
    default Arena bufferArena() {
        return Arena.ofShared();
    }

    /** Tears the fabric down; its devices are gone afterwards. */
    @Override
    void close();
}
