// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Big-endian (network order) field access on a memory segment at any alignment. Every multi-byte
 * field of IP, UDP and the IB transport headers is big-endian (IBA 9.2: "most significant byte first");
 * the only little-endian value on a RoCEv2 wire is the ICRC trailer (see {@link Icrc}).
 */
final class Be {
    static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    static final ValueLayout.OfLong I64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    static final ValueLayout.OfInt I32_LE = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private Be() {
    }

    static int u8(MemorySegment s, long o) {
        return s.get(ValueLayout.JAVA_BYTE, o) & 0xFF;
    }

    static void u8(MemorySegment s, long o, int v) {
        s.set(ValueLayout.JAVA_BYTE, o, (byte) v);
    }

    static int u16(MemorySegment s, long o) {
        return s.get(U16, o) & 0xFFFF;
    }

    static void u16(MemorySegment s, long o, int v) {
        s.set(U16, o, (short) v);
    }

    static int u24(MemorySegment s, long o) {
        return (u8(s, o) << 16) | u16(s, o + 1);
    }

    static void u24(MemorySegment s, long o, int v) {
        u8(s, o, v >>> 16);
        u16(s, o + 1, v);
    }

    static int i32(MemorySegment s, long o) {
        return s.get(I32, o);
    }

    static void i32(MemorySegment s, long o, int v) {
        s.set(I32, o, v);
    }

    static long i64(MemorySegment s, long o) {
        return s.get(I64, o);
    }

    static void i64(MemorySegment s, long o, long v) {
        s.set(I64, o, v);
    }

    /** Replaces the bits of {@code mask} in byte {@code o} with those of {@code v} (already shifted). */
    static void bits(MemorySegment s, long o, int mask, int v) {
        u8(s, o, (u8(s, o) & ~mask) | (v & mask));
    }
}
