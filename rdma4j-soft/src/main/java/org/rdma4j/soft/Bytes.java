// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/** Data movement between segments, with a fast path for the small payloads of inline sends. */
final class Bytes {
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;
    private static final ValueLayout.OfByte BYTE = ValueLayout.JAVA_BYTE;

    private Bytes() {
    }

    /**
     * {@return the smallest power of two not below n (ring sizes; rxe rounds its depths the same way)}
     *
     * @param n a count, at least 1
     */
    static int ceilPow2(int n) {
        return n <= 1 ? 1 : Integer.highestOneBit(n - 1) << 1;
    }

    /**
     * Copies {@code len} bytes; same contract as {@link MemorySegment#copy(MemorySegment, long,
     * MemorySegment, long, long)}, overlapping ranges included. Up to 16 bytes are moved with scalar
     * loads and stores (all loads before any store), which costs a few nanoseconds where the bulk copy
     * pays about ten for its checks.
     */
    static void copy(MemorySegment src, long srcOff, MemorySegment dst, long dstOff, long len) {
        if (len > 16) {
            MemorySegment.copy(src, srcOff, dst, dstOff, len);
        } else if (len >= 8) {
            long a = src.get(LONG, srcOff);
            long b = src.get(LONG, srcOff + len - 8);
            dst.set(LONG, dstOff, a);
            dst.set(LONG, dstOff + len - 8, b);
        } else if (len >= 4) {
            int a = src.get(INT, srcOff);
            int b = src.get(INT, srcOff + len - 4);
            dst.set(INT, dstOff, a);
            dst.set(INT, dstOff + len - 4, b);
        } else if (len > 0) {
            byte a = src.get(BYTE, srcOff);
            byte b = src.get(BYTE, srcOff + (len >> 1));
            byte c = src.get(BYTE, srcOff + len - 1);
            dst.set(BYTE, dstOff, a);
            dst.set(BYTE, dstOff + (len >> 1), b);
            dst.set(BYTE, dstOff + len - 1, c);
        }
    }
}
