// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * The one idle policy of the tools' waits (issue 16 item 12): a short spin, then a yield on every empty
 * poll, so that a waiting side never holds a core for long while the side it waits for needs it. The
 * pingpongs used to yield once per 1,024 empty polls, a millisecond or more of spinning.
 */
class BusyPollTest {
    @Test
    void spinsBrieflyThenYieldsOnEveryPoll() {
        assertEquals(64, BusyPoll.SPINS_BEFORE_YIELD, "the default, unless -Drdma4j.tools.spins says otherwise");
        int spins = 0;
        for (int i = 0; i < BusyPoll.SPINS_BEFORE_YIELD; i++) {
            assertFalse(BusyPoll.yields(spins), "poll " + spins);
            spins = BusyPoll.idle(spins);
        }
        for (int i = 0; i < 10_000; i++) {
            assertTrue(BusyPoll.yields(spins), "poll " + spins + ": no stretch of spinning after the first ones");
            spins = BusyPoll.idle(spins);
        }
        assertFalse(BusyPoll.yields(0), "a wait that saw progress starts with a spin again");
    }
}
