// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

import java.lang.foreign.MemorySegment;

/**
 * A scatter/gather list for {@link Dma#mapSg} (Linux struct scatterlist): the CPU buffers in, the DMA
 * address and length of each entry out. Reusable, so a ULP keeps one per in-flight request and the
 * data path allocates nothing. Not thread-safe.
 */
public final class DmaSgList {
    private final MemorySegment[] buffers;
    private final long[] dmaAddresses;

    /**
     * Creates an empty list.
     *
     * @param capacity how many entries the list can hold
     */
    public DmaSgList(int capacity) {
        if (capacity < 1) {
            throw new IllegalArgumentException("capacity=" + capacity + " (expected >= 1)");
        }
        buffers = new MemorySegment[capacity];
        dmaAddresses = new long[capacity];
    }

    /** {@return how many entries the list can hold} */
    public int capacity() {
        return buffers.length;
    }

    /**
     * Sets the CPU memory of entry {@code i}.
     *
     * @param i      entry index
     * @param buffer the CPU memory of entry i
     * @return this
     */
    public DmaSgList buffer(int i, MemorySegment buffer) {
        buffers[i] = buffer;
        dmaAddresses[i] = Dma.MAPPING_ERROR;
        return this;
    }

    /**
     * {@return the CPU memory of entry i}
     *
     * @param i entry index
     */
    public MemorySegment buffer(int i) {
        return buffers[i];
    }

    /**
     * {@return the DMA address of entry i after a successful map (sg_dma_address)}
     *
     * @param i entry index
     */
    public long dmaAddress(int i) {
        return dmaAddresses[i];
    }

    /**
     * {@return the DMA length of entry i (sg_dma_len): the buffer's size}
     *
     * @param i entry index
     */
    public long dmaLength(int i) {
        return buffers[i].byteSize();
    }

    /**
     * Set by the mapping layer.
     *
     * @param i       entry index
     * @param address the DMA address of entry i
     */
    public void dmaAddress(int i, long address) {
        dmaAddresses[i] = address;
    }
}
