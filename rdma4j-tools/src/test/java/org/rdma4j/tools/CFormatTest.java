// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.DoubleRange;
import org.junit.jupiter.api.Test;

class CFormatTest {
    @Test
    void alternateHexOfZeroHasNoPrefix() {
        assertEquals("0000", CFormat.altHex(0, 4));
        assertEquals("000000", CFormat.altHex(0, 6));
    }

    @Test
    void alternateHexCountsThePrefixInTheWidth() {
        assertEquals("0x11", CFormat.altHex(0x11, 4));
        assertEquals("0x0011", CFormat.altHex(0x11, 6));
        assertEquals("0x7d2e1a", CFormat.altHex(0x7d2e1a, 6));
        assertEquals("0x00160e", CFormat.altHex(0x160e, 8));
        assertEquals("0x007ffff7dda000", CFormat.altHex(0x7ffff7dda000L, 16));
        assertEquals("0x12345", CFormat.altHex(0x12345, 4));
    }

    @Test
    void fixedRoundsTheExactBinaryValueLikeGlibc() {
        assertEquals("1.00", CFormat.fixed(1.005, 2)); // 1.00499999999999989...
        assertEquals("0.12", CFormat.fixed(0.125, 2)); // exact tie -> even
        assertEquals("0.38", CFormat.fixed(0.375, 2)); // exact tie -> even
        assertEquals("2.67", CFormat.fixed(2.675, 2));
        assertEquals("0.017630", CFormat.fixed(0.01763, 6));
        assertEquals("-0.00", CFormat.fixed(-0.001, 2));
        assertEquals("0.00", CFormat.fixed(0.0, 2));
    }

    @Test
    void leftJustified() {
        assertEquals("65536  ", CFormat.left("65536", 7));
        assertEquals("8388608", CFormat.left("8388608", 7));
        assertEquals("12345.67", CFormat.leftFixed(12345.671, 7, 2));
    }

    @Property
    void fixedAgreesWithJavaAwayFromTies(@ForAll @DoubleRange(min = 0, max = 1e7) double v) {
        String c = CFormat.fixed(v, 2);
        // parse back: within half a unit of the last place
        double back = Double.parseDouble(c);
        assertEquals(v, back, 0.005 + 1e-9);
    }
}
