// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.libc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class UseCountTest {
    @Test
    void closeRefusesNewCallsAndWaitsForTheOnesInside() {
        UseCount u = new UseCount();
        assertTrue(u.tryEnter());
        assertTrue(u.tryEnter());
        assertEquals(2, u.inProgress());
        assertTrue(u.beginClose());
        assertFalse(u.beginClose(), "only one closer");
        assertTrue(u.isClosed());
        assertFalse(u.tryEnter(), "no new calls");
        assertEquals(2, u.inProgress(), "a refused entry leaves no trace");
        assertFalse(u.awaitIdle(1_000_000L), "two still inside");
        u.exit();
        u.exit();
        assertTrue(u.awaitIdle(1_000_000L));
        assertEquals(0, u.inProgress());
    }

    @Test
    void reopenAfterAFailedDestroy() {
        UseCount u = new UseCount();
        assertTrue(u.beginClose());
        u.reopen();
        assertFalse(u.isClosed());
        assertTrue(u.tryEnter());
        u.exit();
        assertTrue(u.beginClose());
    }
}
