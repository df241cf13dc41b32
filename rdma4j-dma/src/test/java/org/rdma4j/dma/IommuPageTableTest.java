// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.dma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.LongRange;
import org.junit.jupiter.api.Test;

/** The IOMMU page table: translation, permissions, the window limit, and next-fit reuse. */
class IommuPageTableTest {
    @Test
    void translatesWithinTheBufferAndFaultsOutsideOrAgainstPermission() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment buf = a.allocate(10_000, 4096).asSlice(100, 9000); // starts 100 bytes into a page
            IommuPageTable t = new IommuPageTable(64 * 4096);
            long iova = t.map(buf, 0, buf.byteSize(), DmaSpace.READ);
            assertEquals(100, iova & IommuPageTable.PAGE_MASK, "the IOVA keeps the offset in the page");
            assertEquals(3, t.usedPages());
            DmaPiece p = new DmaPiece();
            assertTrue(t.translate(iova + 5000, 10, DmaSpace.READ, p));
            assertEquals(buf, p.segment);
            assertEquals(5000, p.offset);
            assertTrue(t.translate(iova, 9000, DmaSpace.READ, p));
            assertEquals(9000, p.length, "contiguous pages of one mapping make one piece");
            assertFalse(t.translate(iova, 10, DmaSpace.WRITE, p), "TO_DEVICE pages are read-only");
            assertFalse(t.translate(iova - 1, 1, DmaSpace.READ, p), "before the buffer, same page");
            assertFalse(t.translate(iova + 9000, 1, DmaSpace.READ, p), "after the buffer, same page");
            assertFalse(t.translate(buf.address(), 1, DmaSpace.READ, p), "a virtual address is no IOVA");
            assertTrue(t.unmap(iova));
            assertFalse(t.unmap(iova), "nothing left to unmap");
            assertFalse(t.translate(iova, 1, DmaSpace.READ, p));
            assertEquals(0, t.usedPages());
        }
    }

    @Property(tries = 50)
    void randomMapsAndUnmapsNeverOverlapAndAlwaysTranslateBack(@ForAll @LongRange(min = 1, max = 1 << 30) long seed) {
        SplittableRandom rnd = new SplittableRandom(seed);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment mem = a.allocate(1 << 20, 4096);
            IommuPageTable t = new IommuPageTable(32 * 4096);
            List<long[]> live = new ArrayList<>(); // {iova, off, len}
            DmaPiece p = new DmaPiece();
            for (int step = 0; step < 200; step++) {
                if (live.isEmpty() || rnd.nextInt(3) != 0) {
                    long off = rnd.nextLong(0, (1 << 20) - 20_000);
                    long len = rnd.nextLong(1, 20_000);
                    long iova = t.map(mem, off, len, DmaSpace.READ | DmaSpace.WRITE);
                    if (iova == -1) {
                        long need = (((mem.address() + off) & 4095) + len + 4095) / 4096;
                        assertTrue(need > 32 - t.usedPages() || t.usedPages() > 0,
                                "seed " + seed + ": a map may only fail for lack of room");
                        continue;
                    }
                    live.add(new long[] {iova, off, len});
                } else {
                    long[] m = live.remove(rnd.nextInt(live.size()));
                    assertTrue(t.unmap(m[0]), "seed " + seed);
                }
                for (long[] m : live) {
                    long at = rnd.nextLong(0, m[2]);
                    assertTrue(t.translate(m[0] + at, 1, DmaSpace.READ, p), "seed " + seed);
                    assertEquals(m[1] + at, p.offset, "seed " + seed);
                }
            }
        }
    }
}
