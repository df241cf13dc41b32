// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

class ManualClockTest {
    @Test
    void shouldMoveOnlyWhenAdvancedAndTellListenersSynchronously() {
        ManualClock c = new ManualClock(100);
        List<Long> seen = new ArrayList<>();
        ManualClock.Listener l = seen::add;
        c.addListener(l);
        assertEquals(100, c.nanoTime());
        c.advance(50);
        assertEquals(150, c.nanoTime());
        assertEquals(List.of(150L), seen, "listener runs inside advance()");
        c.removeListener(l);
        c.advance(1);
        assertEquals(List.of(150L), seen);
        assertThrows(IllegalArgumentException.class, () -> c.advance(-1));
    }
}
