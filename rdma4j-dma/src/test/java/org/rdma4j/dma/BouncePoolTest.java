// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.dma;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.junit.jupiter.api.Test;

/** The bounce pool: copies at map, unmap and sync; slot limits; translation only inside live mappings. */
class BouncePoolTest {
    @Test
    void copiesInAtMapAndBackAtUnmapOrSync() {
        BouncePool pool = new BouncePool(8 * BouncePool.SLOT_SIZE);
        byte[] orig = {1, 2, 3, 4, 5};
        MemorySegment cpu = MemorySegment.ofArray(orig);
        long a = pool.map(cpu, true, BouncePool.MAX_SEGMENT_SLOTS);
        assertTrue(pool.contains(a));
        DmaPiece p = new DmaPiece();
        assertTrue(pool.translate(a + 1, 4, p));
        assertEquals(2, p.segment.get(ValueLayout.JAVA_BYTE, p.offset), "copied in at map");
        p.segment.set(ValueLayout.JAVA_BYTE, p.offset, (byte) 42); // the device writes the slot
        assertEquals(2, orig[1], "the CPU does not see it yet");
        assertTrue(pool.sync(a, 5, true));
        assertEquals(42, orig[1], "sync for the CPU copies back");
        orig[0] = 9;
        assertTrue(pool.sync(a, 5, false));
        assertTrue(pool.translate(a, 1, p));
        assertEquals(9, p.segment.get(ValueLayout.JAVA_BYTE, p.offset), "sync for the device copies in");
        assertFalse(pool.translate(a + 5, 1, p), "beyond the mapping's size");
        assertTrue(pool.unmap(a, true));
        assertFalse(pool.translate(a, 1, p), "unmapped");
        assertArrayEquals(new byte[] {9, 42, 3, 4, 5}, orig);
    }

    @Test
    void limitedPoolAndSegmentSize() {
        BouncePool pool = new BouncePool(4 * BouncePool.SLOT_SIZE);
        long a = pool.map(MemorySegment.ofArray(new byte[3 * 2048]), true, BouncePool.MAX_SEGMENT_SLOTS);
        assertTrue(a != -1);
        assertEquals(-1, pool.map(MemorySegment.ofArray(new byte[2 * 2048]), true, BouncePool.MAX_SEGMENT_SLOTS));
        long b = pool.map(MemorySegment.ofArray(new byte[10]), true, BouncePool.MAX_SEGMENT_SLOTS);
        assertTrue(b != -1);
        assertEquals(-1, pool.map(MemorySegment.ofArray(new byte[1]), true, BouncePool.MAX_SEGMENT_SLOTS), "full");
        assertTrue(pool.unmap(a, false));
        assertFalse(pool.unmap(a, false), "double unmap is refused");
        BouncePool big = new BouncePool(1024 * BouncePool.SLOT_SIZE);
        assertEquals(-1, big.map(MemorySegment.ofArray(new byte[129 * 2048]), true, BouncePool.MAX_SEGMENT_SLOTS),
                "a per-I/O mapping is at most 128 slots (swiotlb IO_TLB_SEGSIZE)");
    }
}
