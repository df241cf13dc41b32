// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools.impair;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.junit.jupiter.api.Test;

/** The impairer's decisions (netem's order and semantics) and its netem-style parameters. */
class ImpairerTest {
    private static NetemSpec spec(String s) {
        return NetemSpec.parse(s.isEmpty() ? List.of() : Arrays.asList(s.split(" ")));
    }

    @Test
    void parsesNetemWords() {
        NetemSpec s = spec("loss random 5% duplicate 2 corrupt 0.5% delay 1ms reorder 25% gap 3");
        assertEquals(0.05, s.loss(), 1e-12);
        assertEquals(0.02, s.duplicate(), 1e-12);
        assertEquals(0.005, s.corrupt(), 1e-12);
        assertEquals(1_000_000, s.delayNs());
        assertEquals(0.25, s.reorder(), 1e-12);
        assertEquals(3, s.gap());
        assertEquals("loss 5% duplicate 2% corrupt 0.5% delay 1ms reorder 25% gap 3", s.toString());
        assertEquals(1, spec("delay 10ms reorder 5%").gap(), "tc sets gap 1 when reorder comes without one");
        assertEquals(500_000, spec("delay 500us").delayNs());
        assertEquals(250_000, spec("delay 250").delayNs(), "a bare time is microseconds, as tc reads it");
        assertTrue(spec("").isNone());
        assertEquals("none", NetemSpec.NONE.toString());
    }

    @Test
    void refusesWhatItDoesNotImplement() {
        for (String bad : new String[] {"loss 5% 25%", "delay 10ms 2ms", "reorder 5%", "rate 1mbit", "loss 120%",
            "loss", "delay soon", "gap -1", "loss state 1 2"}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> spec(bad), bad);
            assertFalse(e.getMessage().isEmpty());
        }
    }

    @Test
    void sameSeedSameFates() {
        NetemSpec s = spec("loss 10% duplicate 5% corrupt 5% delay 1ms reorder 10%");
        assertEquals(fates(s, 7), fates(s, 7));
        assertFalse(fates(s, 7).equals(fates(s, 8)));
    }

    private static List<Impairer.Decision> fates(NetemSpec s, long seed) {
        Impairer imp = new Impairer(s, seed);
        List<Impairer.Decision> l = new ArrayList<>();
        for (int i = 0; i < 1000; i++) {
            l.add(imp.decide(1000, false, i));
        }
        return l;
    }

    @Test
    void ratesMatchTheParameters() {
        Impairer imp = new Impairer(spec("loss 5% duplicate 2% corrupt 1% delay 1ms reorder 5%"), 3);
        int n = 200_000;
        for (int i = 0; i < n; i++) {
            imp.decide(1024, false, 0);
        }
        Impairer.Counts c = imp.counts();
        // Duplication is decided before loss, and a packet both duplicated and lost goes once (netem).
        assertEquals(0.05 * (1 - 0.02), (double) c.lost / n, 0.003);
        assertEquals(0.02 * (1 - 0.05), (double) c.duplicated / n, 0.002);
        long passed = n - c.lost;
        assertEquals(0.01, (double) c.corrupted / passed, 0.002);
        assertEquals(0.05, (double) c.reordered / passed, 0.003);
        assertEquals(passed, c.delayed + c.reordered);
    }

    @Test
    void copiesAreImpairedButNotDuplicatedAgain() {
        Impairer imp = new Impairer(spec("duplicate 100%"), 1);
        assertTrue(imp.decide(100, false, 0).duplicate());
        assertFalse(imp.decide(100, true, 0).duplicate(), "netem: the clone goes with duplication off");
        Impairer lossy = new Impairer(spec("loss 100%"), 1);
        assertEquals(Impairer.Fate.DROP, lossy.decide(100, true, 0).fate(), "but it can be lost");
    }

    @Test
    void duplicatedAndLostGoesOnce() {
        Impairer imp = new Impairer(spec("loss 100% duplicate 100%"), 1);
        Impairer.Decision d = imp.decide(100, false, 0);
        assertEquals(Impairer.Fate.PASS, d.fate());
        assertFalse(d.duplicate());
    }

    @Test
    void delayHoldsAndReorderSendsAtOnce() {
        Impairer imp = new Impairer(spec("delay 2ms reorder 100%"), 1);
        Impairer.Decision d = imp.decide(100, false, 1000);
        assertTrue(d.reordered());
        assertEquals(1000, d.dueNs());
        Impairer held = new Impairer(spec("delay 2ms"), 1);
        Impairer.Decision h = held.decide(100, false, 1000);
        assertFalse(h.reordered());
        assertEquals(1000 + 2_000_000, h.dueNs());
        // gap 3: two packets are delayed between two that may go at once
        Impairer gapped = new Impairer(spec("delay 2ms reorder 100% gap 3"), 1);
        List<Boolean> at = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            at.add(gapped.decide(100, false, 0).reordered());
        }
        assertEquals(List.of(false, false, true, false, false, true), at);
    }

    @Test
    void corruptionFlipsOneBitInsideThePacket() {
        Impairer imp = new Impairer(spec("corrupt 100%"), 5);
        for (int i = 0; i < 100; i++) {
            Impairer.Decision d = imp.decide(60, false, 0);
            assertTrue(d.corruptAt() >= 0 && d.corruptAt() < 60);
            assertTrue(d.corruptBit() >= 0 && d.corruptBit() < 8);
        }
    }
}
