// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.dma;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * A bounce-buffer pool in memory the device can reach (Linux swiotlb; Windows map registers): 2 KiB
 * slots (IO_TLB_SHIFT 11); one per-I/O mapping takes at most 128 contiguous slots (IO_TLB_SEGSIZE,
 * 256 KiB). Map copies the buffer into its slots, unmap and sync-for-CPU copy a device's writes back,
 * sync-for-device copies the CPU's writes in. The device only ever touches the slots. Not thread-safe:
 * {@link DmaSpace} serialises access.
 */
final class BouncePool {
    static final int SLOT_SHIFT = 11;
    static final long SLOT_SIZE = 1L << SLOT_SHIFT;
    /** Largest per-I/O mapping, in slots (swiotlb IO_TLB_SEGSIZE). */
    static final int MAX_SEGMENT_SLOTS = 128;
    /** Bounce addresses: above user-space virtual addresses and the IOMMU window. */
    static final long BASE = 1L << 50;

    final MemorySegment pool;
    private final int slots;
    /** At a mapping's first slot: the original buffer. */
    private final MemorySegment[] orig;
    private final long[] size;
    /** For every slot in use: the first slot of its mapping + 1 (0 = free). */
    private final int[] head;
    private int cursor;

    BouncePool(long bytes) {
        slots = (int) (bytes >>> SLOT_SHIFT);
        pool = Arena.ofAuto().allocate(bytes, 4096);
        orig = new MemorySegment[slots];
        size = new long[slots];
        head = new int[slots];
    }

    boolean contains(long addr) {
        return addr >= BASE && addr - BASE < (long) slots << SLOT_SHIFT;
    }

    /**
     * {@return the bounce address, or -1 when the pool has no room}
     *
     * @param cpu      the original buffer
     * @param copyIn   copy it into the slots now
     * @param maxSlots the largest run allowed
     */
    long map(MemorySegment cpu, boolean copyIn, int maxSlots) {
        return map(cpu, cpu.byteSize(), copyIn, maxSlots);
    }

    /** {@return the address of len bytes of pool memory with no original (coherent memory), or -1} */
    long reserve(long len) {
        return map(null, len, false, Integer.MAX_VALUE);
    }

    private long map(MemorySegment cpu, long len, boolean copyIn, int maxSlots) {
        long n = Math.max(1, (len + SLOT_SIZE - 1) >>> SLOT_SHIFT);
        if (n > maxSlots || n > slots) {
            return -1;
        }
        int start = find((int) n);
        if (start < 0) {
            return -1;
        }
        for (int k = 0; k < n; k++) {
            head[start + k] = start + 1;
        }
        orig[start] = cpu;
        size[start] = len;
        cursor = (int) ((start + n) % slots);
        long addr = BASE + ((long) start << SLOT_SHIFT);
        if (copyIn && len > 0) {
            MemorySegment.copy(cpu, 0, pool, addr - BASE, len);
        }
        return addr;
    }

    private int find(int n) {
        int i = cursor;
        int scanned = 0;
        while (scanned < slots + n) {
            if (i + n > slots) {
                scanned += slots - i;
                i = 0;
                continue;
            }
            int k = 0;
            while (k < n && head[i + k] == 0) {
                k++;
            }
            if (k == n) {
                return i;
            }
            scanned += k + 1;
            i += k + 1;
            if (i >= slots) {
                i = 0;
            }
        }
        return -1;
    }

    /** {@return the first slot of the live mapping holding addr, or -1} */
    private int mappingOf(long addr) {
        if (!contains(addr)) {
            return -1;
        }
        int h = head[(int) ((addr - BASE) >>> SLOT_SHIFT)];
        return h - 1;
    }

    /** {@return the original buffer of the mapping starting exactly at addr, or null} */
    MemorySegment original(long addr) {
        int s = mappingOf(addr);
        return s >= 0 && BASE + ((long) s << SLOT_SHIFT) == addr ? orig[s] : null;
    }

    /**
     * Unmaps the mapping starting at addr, copying the slots back first when {@code copyOut}.
     *
     * @return false if no mapping starts there
     */
    boolean unmap(long addr, boolean copyOut) {
        int s = mappingOf(addr);
        if (s < 0 || BASE + ((long) s << SLOT_SHIFT) != addr) {
            return false;
        }
        long len = size[s];
        MemorySegment o = orig[s];
        // the original's arena may have been closed under the mapping: nothing is copied back then (the
        // slots are freed all the same)
        if (copyOut && len > 0 && o != null && o.scope().isAlive() && o.isAccessibleBy(Thread.currentThread())) {
            MemorySegment.copy(pool, addr - BASE, o, 0, len);
        }
        long n = Math.max(1, (len + SLOT_SIZE - 1) >>> SLOT_SHIFT);
        for (int k = 0; k < n; k++) {
            head[s + k] = 0;
        }
        orig[s] = null;
        return true;
    }

    /**
     * Copies [addr, addr+len) between the slots and the original: toCpu = slots to original.
     *
     * @return false if the range is not inside one live mapping
     */
    boolean sync(long addr, long len, boolean toCpu) {
        int s = mappingOf(addr);
        if (s < 0) {
            return false;
        }
        long within = addr - (BASE + ((long) s << SLOT_SHIFT));
        if (len < 0 || within + len > size[s] || orig[s] == null) {
            return false; // outside the mapping, or coherent memory: nothing to copy
        }
        if (len > 0) {
            if (toCpu) {
                MemorySegment.copy(pool, addr - BASE, orig[s], within, len);
            } else {
                MemorySegment.copy(orig[s], within, pool, addr - BASE, len);
            }
        }
        return true;
    }

    /** {@return false unless [addr, addr+len) lies inside one live mapping; else fills out with the slots} */
    boolean translate(long addr, long len, DmaPiece out) {
        int s = mappingOf(addr);
        if (s < 0) {
            return false;
        }
        long within = addr - (BASE + ((long) s << SLOT_SHIFT));
        if (len < 0 || within + len > size[s]) {
            return false;
        }
        out.set(pool, addr - BASE, len);
        return true;
    }
}
