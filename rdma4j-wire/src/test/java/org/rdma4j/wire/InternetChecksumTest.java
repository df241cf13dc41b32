// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

class InternetChecksumTest {
    @Test
    void rfc1071Example() {
        // RFC 1071 section 3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (folded), so the checksum is 220d
        MemorySegment s = MemorySegment.ofArray(new byte[] {0x00, 0x01, (byte) 0xf2, 0x03, (byte) 0xf4, (byte) 0xf5,
                (byte) 0xf6, (byte) 0xf7});
        assertEquals(0x220d, InternetChecksum.compute(s, 0, 8));
        // an odd byte is the high half of a word padded with zero
        assertEquals(InternetChecksum.fold(0x0001 + 0xf203 + 0xf400), InternetChecksum.compute(s, 0, 5));
        assertEquals(0xFFFF, InternetChecksum.compute(s, 0, 0));
    }

    @Property
    void aBlockHoldingItsChecksumSumsToZero(@ForAll @Size(min = 2, max = 300) byte[] bytes) {
        MemorySegment s = MemorySegment.ofArray(bytes.clone());
        s.set(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN), 0, (short) 0);
        int c = InternetChecksum.compute(s, 0, bytes.length);
        s.set(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN), 0, (short) c);
        assertEquals(0, InternetChecksum.compute(s, 0, bytes.length));
    }

    @Property
    void piecesOfEvenLengthAddUp(@ForAll @Size(max = 300) byte[] bytes, @ForAll @IntRange(max = 150) int words) {
        MemorySegment s = MemorySegment.ofArray(bytes);
        int split = Math.min(2 * words, bytes.length & ~1);
        assertEquals(InternetChecksum.compute(s, 0, bytes.length), InternetChecksum.fold(
                InternetChecksum.sum(s, 0, split) + InternetChecksum.sum(s, split, bytes.length - split)));
    }
}
