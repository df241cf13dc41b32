// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/**
 * Which way data moves through a DMA mapping (Linux enum dma_data_direction). The direction decides
 * what the device may do with the buffer and, on a bounce-buffered device, which way the copies go.
 */
public enum DmaDirection {
    /** The device both reads and writes the buffer (DMA_BIDIRECTIONAL); registrations are always this. */
    BIDIRECTIONAL(true, true),
    /** The device reads the buffer: data goes to the device, e.g. a send buffer (DMA_TO_DEVICE). */
    TO_DEVICE(true, false),
    /** The device writes the buffer: data comes from the device, e.g. a receive buffer (DMA_FROM_DEVICE). */
    FROM_DEVICE(false, true);

    private final boolean deviceReads;
    private final boolean deviceWrites;

    DmaDirection(boolean deviceReads, boolean deviceWrites) {
        this.deviceReads = deviceReads;
        this.deviceWrites = deviceWrites;
    }

    /** {@return whether the device may read the mapped memory} */
    public boolean deviceReads() {
        return deviceReads;
    }

    /** {@return whether the device may write the mapped memory} */
    public boolean deviceWrites() {
        return deviceWrites;
    }
}
