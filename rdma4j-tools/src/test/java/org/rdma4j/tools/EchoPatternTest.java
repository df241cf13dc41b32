// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

class EchoPatternTest {
    @Property(tries = 200)
    void aFilledMessageMatchesAndAnyChangedByteIsFoundWhereItIs(@ForAll long seed, @ForAll @IntRange(max = 1 << 20) int msg,
            @ForAll @IntRange(min = 1, max = 5000) int len, @ForAll @IntRange(max = 7) int off,
            @ForAll @IntRange(min = 0, max = 4999) int flipAt) {
        int at = flipAt % len;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment seg = arena.allocate(len + 16);
            seg.fill((byte) 0x5a);
            EchoPattern.fill(seg, off, len, seed, msg);
            assertEquals(-1, EchoPattern.mismatch(seg, off, len, seed, msg));
            assertEquals((byte) 0x5a, seg.get(ValueLayout.JAVA_BYTE, off + len), "wrote past the message");
            for (int i = 0; i < len; i++) {
                assertEquals(EchoPattern.expected(seed, msg, i), seg.get(ValueLayout.JAVA_BYTE, off + i));
            }
            byte b = seg.get(ValueLayout.JAVA_BYTE, off + at);
            seg.set(ValueLayout.JAVA_BYTE, off + at, (byte) (b ^ 0x10));
            assertEquals(at, EchoPattern.mismatch(seg, off, len, seed, msg));
        }
    }

    @Test
    void consecutiveMessagesDifferInEveryWord() {
        // An echo that still holds a packet of the message before must not pass.
        try (Arena arena = Arena.ofConfined()) {
            int len = 4096;
            MemorySegment a = arena.allocate(len);
            MemorySegment b = arena.allocate(len);
            for (long msg = 0; msg < 50; msg++) {
                EchoPattern.fill(a, 0, len, 42, msg);
                EchoPattern.fill(b, 0, len, 42, msg + 1);
                for (int w = 0; w < len; w += 8) {
                    assertNotEquals(a.get(ValueLayout.JAVA_LONG_UNALIGNED, w), b.get(ValueLayout.JAVA_LONG_UNALIGNED, w),
                            "message " + msg + " word " + w / 8);
                }
                assertEquals(0, EchoPattern.mismatch(b, 0, len, 42, msg) / 8);
            }
        }
    }

    @Test
    void aPacketMovedWithinTheMessageIsFound() {
        // A 1024-byte packet placed at the wrong offset of the same message.
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment seg = arena.allocate(4096);
            EchoPattern.fill(seg, 0, 4096, 7, 3);
            MemorySegment.copy(seg, 0, seg, 2048, 1024);
            assertEquals(2048, EchoPattern.mismatch(seg, 0, 4096, 7, 3) & ~7L);
        }
    }
}
