package org.rdma4j.soft;

import java.lang.foreign.MemorySegment;

/**
 * A resolved scatter/gather list: pieces of registered memory (segment, offset, length) that checks
 * have already approved. All the device's data movement goes through {@link #transfer}, so every
 * copy is bounded by what the key checks allowed. Not thread-safe.
 */
final class Sgl {
    MemorySegment[] seg;
    long[] off;
    long[] len;
    int n;
    long total;

    Sgl(int capacity) {
        seg = new MemorySegment[Math.max(1, capacity)];
        off = new long[seg.length];
        len = new long[seg.length];
    }

    void clear() {
        n = 0;
        total = 0;
    }

    void add(MemorySegment s, long o, long l) {
        if (n == seg.length) {
            grow();
        }
        if (seg[n] != s) {
            seg[n] = s; // skip the reference store (and its GC barrier) when the piece is reused
        }
        off[n] = o;
        len[n] = l;
        n++;
        total += l;
    }

    void set(MemorySegment s, long o, long l) {
        clear();
        add(s, o, l);
    }

    private void grow() {
        int c = seg.length * 2;
        seg = java.util.Arrays.copyOf(seg, c);
        off = java.util.Arrays.copyOf(off, c);
        len = java.util.Arrays.copyOf(len, c);
    }

    /**
     * Copies {@code count} bytes starting at byte {@code srcPos} of {@code src} to byte {@code dstPos}
     * of {@code dst}. Both ranges must lie within the lists (callers check lengths first).
     */
    static void transfer(Sgl src, long srcPos, Sgl dst, long dstPos, long count) {
        if (src.n == 1 && dst.n == 1) {
            Bytes.copy(src.seg[0], src.off[0] + srcPos, dst.seg[0], dst.off[0] + dstPos, count);
            return;
        }
        int si = 0;
        while (si < src.n && srcPos >= src.len[si]) {
            srcPos -= src.len[si++];
        }
        int di = 0;
        while (di < dst.n && dstPos >= dst.len[di]) {
            dstPos -= dst.len[di++];
        }
        while (count > 0) {
            long chunk = Math.min(count, Math.min(src.len[si] - srcPos, dst.len[di] - dstPos));
            Bytes.copy(src.seg[si], src.off[si] + srcPos, dst.seg[di], dst.off[di] + dstPos, chunk);
            count -= chunk;
            srcPos += chunk;
            dstPos += chunk;
            if (srcPos == src.len[si]) {
                si++;
                srcPos = 0;
            }
            if (dstPos == dst.len[di]) {
                di++;
                dstPos = 0;
            }
        }
    }
}
