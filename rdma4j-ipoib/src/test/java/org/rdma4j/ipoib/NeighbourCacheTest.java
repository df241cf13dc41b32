// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
import org.rdma4j.verbs.Gid;

/** Neighbour table: resolution, queueing, retries, failure and aging, all on a manual clock. */
class NeighbourCacheTest {
    private static final long S = 1_000_000_000L;
    private final ManualClock clock = new ManualClock();
    private final List<String> events = new ArrayList<>();
    private final NeighbourCache.Listener<String> listener = new NeighbourCache.Listener<>() {
        @Override
        public void retry(NeighbourCache.Entry<String> e) {
            events.add("retry " + e.ip() + " #" + e.requests());
        }

        @Override
        public void probe(NeighbourCache.Entry<String> e) {
            events.add("probe " + e.ip() + " #" + e.requests());
        }

        @Override
        public void removed(NeighbourCache.Entry<String> e) {
            events.add("removed " + e.ip() + " " + e.state() + " pending=" + e.pendingCount());
        }
    };

    private NeighbourCache<String> cache() {
        return new NeighbourCache<>(clock, 60 * S, S, 3, 3, 4);
    }

    private static HardwareAddress hw(int qpn) {
        return new HardwareAddress(0, qpn, new Gid(0xFE80_0000_0000_0000L, qpn));
    }

    @Test
    void resolvesQueuesAndDrainsInOrder() {
        NeighbourCache<String> c = cache();
        NeighbourCache.Entry<String> e = c.startResolving(7);
        assertEquals(NeighbourCache.State.INCOMPLETE, e.state());
        assertEquals(1, e.requests());
        assertTrue(c.enqueue(e, 10));
        assertTrue(c.enqueue(e, 11));
        assertTrue(c.enqueue(e, 12));
        assertFalse(c.enqueue(e, 13), "at most 3 packets wait per neighbour");
        assertSame(e, c.confirm(7, hw(0x20)));
        assertNull(c.install(e, "ah1"));
        assertEquals(NeighbourCache.State.REACHABLE, c.get(7).state());
        List<Integer> drained = new ArrayList<>();
        c.drain(e, drained::add);
        assertEquals(List.of(10, 11, 12), drained);
        assertEquals(0, e.pendingCount());
    }

    @Test
    void retriesEverySecondThenFailsWithItsQueue() {
        NeighbourCache<String> c = cache();
        NeighbourCache.Entry<String> e = c.startResolving(9);
        c.enqueue(e, 1);
        clock.advance(S - 1);
        c.age(listener);
        assertEquals(List.of(), events, "no retry before the interval");
        clock.advance(1);
        c.age(listener);
        clock.advance(S);
        c.age(listener);
        assertEquals(List.of("retry 9 #2", "retry 9 #3"), events);
        clock.advance(S);
        c.age(listener);
        assertEquals("removed 9 INCOMPLETE pending=1", events.getLast(), "three unanswered requests fail");
        assertNull(c.get(9));
        assertEquals(0, c.size());
    }

    @Test
    void reachableEntryExpiresUnlessConfirmed() {
        NeighbourCache<String> c = cache();
        NeighbourCache.Entry<String> e = c.confirm(5, hw(1));
        c.install(e, "ah");
        clock.advance(59 * S);
        c.confirm(5, hw(1)); // an ARP packet from it refreshes the entry
        clock.advance(59 * S);
        c.age(listener);
        assertEquals(List.of(), events);
        clock.advance(S);
        c.age(listener);
        assertEquals(List.of("removed 5 REACHABLE pending=0"), events);
        assertNull(c.get(5));
    }

    @Test
    void entryInUseIsProbedByUnicastAndStaysUsable() {
        NeighbourCache<String> c = cache();
        NeighbourCache.Entry<String> e = c.confirm(5, hw(1));
        c.install(e, "ah");
        c.used(e);
        clock.advance(60 * S);
        c.age(listener);
        assertEquals(List.of("probe 5 #1"), events, "used since confirmation: probe instead of forgetting");
        assertEquals(NeighbourCache.State.PROBE, e.state());
        assertEquals("ah", e.ah(), "still usable while probed");
        assertSame(e, c.confirm(5, hw(1))); // the unicast reply
        assertEquals(NeighbourCache.State.REACHABLE, e.state());
        assertEquals("ah", e.ah(), "same address: the handle is kept");
        clock.advance(60 * S);
        c.age(listener);
        assertEquals("removed 5 REACHABLE pending=0", events.getLast(), "unused for a whole period: forgotten");
    }

    @Test
    void unansweredProbesRemoveTheEntry() {
        NeighbourCache<String> c = cache();
        NeighbourCache.Entry<String> e = c.confirm(5, hw(1));
        c.install(e, "ah");
        c.used(e);
        clock.advance(60 * S);
        c.age(listener);
        for (int i = 0; i < 3; i++) {
            clock.advance(S);
            c.age(listener);
        }
        assertEquals(List.of("probe 5 #1", "probe 5 #2", "probe 5 #3", "removed 5 PROBE pending=0"), events);
        assertNull(c.get(5));
    }

    @Test
    void changedAddressIsVisibleAndNewHandleReplacesOld() {
        NeighbourCache<String> c = cache();
        NeighbourCache.Entry<String> e = c.confirm(5, hw(1));
        c.install(e, "old");
        c.confirm(5, hw(2)); // the peer restarted with a new QP
        assertEquals(hw(2), c.get(5).hardware());
        assertEquals("old", c.install(e, "new"));
        assertEquals("new", c.get(5).ah());
    }

    @Test
    void fullTableRefusesNewEntries() {
        NeighbourCache<String> c = cache();
        for (int i = 1; i <= 4; i++) {
            c.startResolving(i);
        }
        assertNull(c.startResolving(5));
        assertNull(c.confirm(5, hw(5)));
        assertEquals(4, c.size());
    }

    /** The open-addressing table against a HashMap under random inserts and expiries. */
    @Property(tries = 100)
    void tableAgreesWithAMap(@ForAll long seed) {
        Random r = new Random(seed);
        NeighbourCache<String> c = new NeighbourCache<>(clock, 10, 1_000_000, 1, 0, 64);
        Map<Integer, Long> model = new HashMap<>();
        for (int step = 0; step < 400; step++) {
            int ip = 1 + r.nextInt(100);
            if (r.nextInt(3) > 0) {
                if (c.get(ip) != null || model.size() < 64) {
                    c.install(c.confirm(ip, hw(ip)), "ah" + ip);
                    model.put(ip, clock.nanoTime());
                }
            } else {
                clock.advance(1 + r.nextInt(6));
                long now = clock.nanoTime();
                c.age(new NeighbourCache.Listener<>() {
                    @Override
                    public void retry(NeighbourCache.Entry<String> e) {
                    }

                    @Override
                    public void probe(NeighbourCache.Entry<String> e) {
                    }

                    @Override
                    public void removed(NeighbourCache.Entry<String> e) {
                    }
                });
                model.values().removeIf(t -> now - t >= 10);
            }
            assertEquals(model.size(), c.size(), "seed " + seed + " step " + step);
            for (int k = 1; k <= 100; k++) {
                assertEquals(model.containsKey(k), c.get(k) != null, "seed " + seed + " ip " + k);
            }
        }
    }
}
