// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.dma;

import java.lang.foreign.MemorySegment;

/**
 * One contiguous piece of memory a DMA address range translated to: the engine's out-parameter, so
 * translation allocates nothing. Not thread-safe; one per engine component.
 */
public final class DmaPiece {
    /** Creates a {@code DmaPiece}. */
    public DmaPiece() {
    }

    /** The memory. */
    public MemorySegment segment;
    /** Offset of the first byte in {@link #segment}. */
    public long offset;
    /** Bytes in this piece (at most what was asked). */
    public long length;

    void set(MemorySegment s, long off, long len) {
        segment = s;
        offset = off;
        length = len;
    }
}
