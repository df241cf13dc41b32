// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

class IdleStrategiesTest {
    @Test
    void shouldParseEveryStrategyWithItsParameters() {
        assertInstanceOf(BusySpinIdleStrategy.class, IdleStrategies.parse("spin"));
        assertInstanceOf(YieldingIdleStrategy.class, IdleStrategies.parse(" Yield "));
        assertEquals("park:50us:1ms", IdleStrategies.parse("park").alias());
        assertEquals("park:10us:2ms", IdleStrategies.parse("park:10us:2ms").alias());
        assertEquals("backoff:1000:100:50us:1ms", IdleStrategies.parse("backoff").alias());
        assertEquals("backoff:5:6:700ns:1s", IdleStrategies.parse("backoff:5:6:700:1s").alias());
        assertTrue(IdleStrategies.parse("park").parks());
        assertFalse(IdleStrategies.parse("spin").parks());
    }

    @Test
    void shouldRejectWhatItDoesNotKnowSayingWhatItAccepts() {
        for (String bad : new String[] {"", "sleep", "park:-1us", "park:5ms:1ms", "spin:1", "backoff:a", "park:1us:2us:3"}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> IdleStrategies.parse(bad), bad);
            assertTrue(e.getMessage().contains("expected spin, yield, park"), e.getMessage());
        }
    }

    @Test
    void shouldBackOffFromSpinsToYieldsToDoublingParksAndResetOnWork() {
        List<Long> parks = new ArrayList<>();
        BackoffIdleStrategy b = new BackoffIdleStrategy(2, 1, 100, 350, parks::add);
        for (int i = 0; i < 7; i++) {
            b.idle(0);
        }
        // 2 spins, 1 yield, then 100, 200, 350, 350
        assertEquals(List.of(100L, 200L, 350L, 350L), parks);
        b.idle(1);
        parks.clear();
        for (int i = 0; i < 4; i++) {
            b.idle(0);
        }
        assertEquals(List.of(100L), parks, "work resets the backoff");
    }

    @Test
    void shouldParkNoLongerThanAskedButKeepBackingOff() {
        List<Long> parks = new ArrayList<>();
        ParkingIdleStrategy p = new ParkingIdleStrategy(100, 1_000, parks::add);
        p.idleAtMost(30);
        p.idleAtMost(Long.MAX_VALUE);
        p.idleAtMost(Long.MAX_VALUE);
        assertEquals(List.of(30L, 200L, 400L), parks);
    }
}
