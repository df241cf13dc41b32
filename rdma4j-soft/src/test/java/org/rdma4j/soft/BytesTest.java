// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;

class BytesTest {
    /** Bytes.copy must behave exactly like MemorySegment.copy, overlapping ranges included. */
    @Property(tries = 2000)
    void shouldCopyLikeMemorySegmentCopy(@ForAll @IntRange(min = 0, max = 40) int len,
                                         @ForAll @IntRange(min = 0, max = 40) int srcOff,
                                         @ForAll @IntRange(min = 0, max = 40) int dstOff,
                                         @ForAll boolean sameSegment) {
        byte[] init = new byte[96];
        for (int i = 0; i < init.length; i++) {
            init[i] = (byte) (i * 7 + 1);
        }
        MemorySegment a = MemorySegment.ofArray(init.clone());
        MemorySegment b = sameSegment ? a : MemorySegment.ofArray(new byte[96]);
        MemorySegment ea = MemorySegment.ofArray(init.clone());
        MemorySegment eb = sameSegment ? ea : MemorySegment.ofArray(new byte[96]);
        Bytes.copy(a, srcOff, b, dstOff, len);
        MemorySegment.copy(ea, srcOff, eb, dstOff, len);
        assertArrayEquals(eb.toArray(ValueLayout.JAVA_BYTE), b.toArray(ValueLayout.JAVA_BYTE),
                "len=" + len + " src=" + srcOff + " dst=" + dstOff + " same=" + sameSegment);
    }
}
