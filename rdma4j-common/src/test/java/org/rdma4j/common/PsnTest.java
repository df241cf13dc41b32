// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

class PsnTest {
    @Test
    void shouldWrapAt24Bits() {
        assertEquals(0, Psn.add(0xFF_FFFF, 1));
        assertEquals(5, Psn.add(0xFF_FFFE, 7));
        assertTrue(Psn.compare(0, 0xFF_FFFF) > 0, "0 comes after 0xffffff");
        assertTrue(Psn.compare(0xFF_FFFF, 0) < 0);
        assertEquals(0, Psn.compare(0x123456, 0x123456));
    }

    @Property(tries = 500)
    void shouldOrderAnyPsnAgainstItsSuccessorsWithinHalfTheSpace(@ForAll @IntRange(min = 0, max = 0xFF_FFFF) int psn,
                                                                @ForAll @IntRange(min = 1, max = 0x7F_FFFF) int ahead) {
        int later = Psn.add(psn, ahead);
        assertTrue(Psn.compare(later, psn) > 0, "later=" + later + " psn=" + psn);
        assertTrue(Psn.compare(psn, later) < 0);
        assertEquals(ahead, Psn.compare(later, psn));
    }
}
