// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.dma;

import java.lang.foreign.MemorySegment;

/**
 * An IOMMU's view of memory: IO virtual addresses in a limited window, translated page by page
 * (4 KiB, the common IOMMU granule) to the memory they map, with a read and a write permission per
 * page. Linux maps DMA_TO_DEVICE as IOMMU_READ, DMA_FROM_DEVICE as IOMMU_WRITE and BIDIRECTIONAL as
 * both (dma_info_to_prot). A device access to a page that is not mapped, or without the permission
 * it needs, is a fault. IOVAs are handed out next-fit; a map that finds no room fails (the caller
 * must check dma_mapping_error). Not thread-safe: {@link DmaSpace} serialises access.
 */
final class IommuPageTable {
    static final int PAGE_SHIFT = 12;
    static final long PAGE_SIZE = 1L << PAGE_SHIFT;
    static final long PAGE_MASK = PAGE_SIZE - 1;
    /** Where IOVAs start: above every user-space virtual address, so a VA used as an IOVA faults. */
    static final long BASE = 1L << 48;

    private final int pages;
    private final MemorySegment[] seg;
    /** Offset in seg[i] of page i's first byte (negative for the part of a first page before the buffer). */
    private final long[] off;
    /** 0 = free, else 0x80 | DmaSpace.READ/WRITE bits. */
    private final byte[] perm;
    /** At the first page of a mapping: its page count. */
    private final int[] run;
    private int cursor;
    private int used;

    IommuPageTable(long window) {
        pages = (int) (window >>> PAGE_SHIFT);
        seg = new MemorySegment[pages];
        off = new long[pages];
        perm = new byte[pages];
        run = new int[pages];
    }

    boolean contains(long iova) {
        long p = (iova - BASE) >>> PAGE_SHIFT;
        return iova >= BASE && p < pages;
    }

    int usedPages() {
        return used;
    }

    /**
     * Maps {@code len} bytes of {@code s} from {@code sOff}.
     *
     * @return the IOVA of the first byte, or -1 when the window has no room
     */
    long map(MemorySegment s, long sOff, long len, int access) {
        long first = ((s.isNative() ? s.address() : 0) + sOff) & PAGE_MASK;
        long n = len == 0 ? 1 : (first + len + PAGE_MASK) >>> PAGE_SHIFT;
        if (n > pages - used) {
            return -1;
        }
        int start = find((int) n);
        if (start < 0) {
            return -1;
        }
        byte p = (byte) (0x80 | access);
        for (int k = 0; k < n; k++) {
            seg[start + k] = s;
            off[start + k] = sOff - first + (long) k * PAGE_SIZE;
            perm[start + k] = p;
        }
        run[start] = (int) n;
        used += (int) n;
        cursor = (int) ((start + n) % pages);
        return BASE + ((long) start << PAGE_SHIFT) + first;
    }

    /** Next-fit search for n free pages in a row; -1 if none. */
    private int find(int n) {
        int i = cursor;
        int scanned = 0;
        while (scanned < pages + n) {
            if (i + n > pages) {
                scanned += pages - i;
                i = 0;
                continue;
            }
            int k = 0;
            while (k < n && perm[i + k] == 0) {
                k++;
            }
            if (k == n) {
                return i;
            }
            scanned += k + 1;
            i += k + 1;
            if (i >= pages) {
                i = 0;
            }
        }
        return -1;
    }

    /**
     * Unmaps the mapping whose first byte is at {@code iova}.
     *
     * @return false if no mapping starts in that page
     */
    boolean unmap(long iova) {
        if (!contains(iova)) {
            return false;
        }
        int start = (int) ((iova - BASE) >>> PAGE_SHIFT);
        int n = run[start];
        if (n == 0 || perm[start] == 0) {
            return false;
        }
        for (int k = 0; k < n; k++) {
            seg[start + k] = null;
            perm[start + k] = 0;
        }
        run[start] = 0;
        used -= n;
        return true;
    }

    /**
     * Translates the start of [iova, iova+len) for an access; the piece covers as many following pages
     * as continue the same memory.
     *
     * @return false on a fault: unmapped page, missing permission, or bytes outside the mapped buffer
     */
    boolean translate(long iova, long len, int access, DmaPiece out) {
        if (!contains(iova) || len < 0) {
            return false;
        }
        int i = (int) ((iova - BASE) >>> PAGE_SHIFT);
        int p = perm[i];
        if (p == 0 || (p & access) != access) {
            return false;
        }
        MemorySegment s = seg[i];
        long o = off[i] + (iova & PAGE_MASK);
        long avail = PAGE_SIZE - (iova & PAGE_MASK);
        int j = i;
        while (avail < len && j + 1 < pages && seg[j + 1] == s && perm[j + 1] == p
                && off[j + 1] == off[j] + PAGE_SIZE) {
            j++;
            avail += PAGE_SIZE;
        }
        long n = Math.min(avail, len);
        if (o < 0 || o > s.byteSize() - n) {
            return false; // the rest of the IOMMU page lies outside the buffer: nothing to reach there
        }
        out.set(s, o, n);
        return true;
    }
}
