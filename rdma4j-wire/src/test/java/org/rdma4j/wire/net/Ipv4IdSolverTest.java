// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.SplittableRandom;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

class Ipv4IdSolverTest {
    /** roce-wire.md V2 (scapy roce.uts UC SEND_ONLY): IPv4 ID 0x0478, ICRC 78f353f3 on the wire. */
    private static final String V2 = "45010040047840004011b4d5c0a80007c0a80007c00012b7002caca22460ffff000000d300cf17"
            + "104630818be28935d90e9a95505401be885e50000078f353f3";
    /** roce-wire.md V3: RC SEND_ONLY with ID 0. */
    private static final String V3 = "45000034000040004011b74ac0a8010ac0a80114df9412b7002000000430ffff000000128012345668"
            + "656c6c6f0000009984416e";

    @Test
    void recoversTheIdOfAPublishedVector() {
        byte[] p = TestPackets.hex(V2);
        assertEquals(TestPackets.wireIcrc(p), TestPackets.icrc(p, 20), "test ICRC helper agrees with the vector");
        int udpLen = TestPackets.getShort(p, 24);
        p[4] = 0;
        p[5] = 0;
        assertEquals(0x0478, Ipv4IdSolver.solve(TestPackets.icrc(p, 20), TestPackets.wireIcrc(p), udpLen));
    }

    @Test
    void idZeroIsZero() {
        byte[] p = TestPackets.hex(V3);
        assertEquals(0, Ipv4IdSolver.solve(TestPackets.icrc(p, 20), TestPackets.wireIcrc(p), TestPackets.getShort(p, 24)));
    }

    @Property(tries = 300)
    void recoversAnyId(@ForAll @IntRange(max = 0xFFFF) int id, @ForAll @IntRange(max = 4096) int payloadLen,
            @ForAll long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        byte[] payload = new byte[payloadLen];
        r.nextBytes(payload);
        byte[] p = TestPackets.ipv4Udp(r.nextInt(), r.nextInt(), 0xC000 | r.nextInt(0x4000), 4791, id,
                TestPackets.udSendOnly(r.nextInt(1 << 24), r.nextInt(1 << 24), r.nextInt(), r.nextInt(1 << 24), payload));
        TestPackets.sealIcrc(p, 20);
        int wire = TestPackets.wireIcrc(p);
        p[4] = 0;
        p[5] = 0;
        assertEquals(id, Ipv4IdSolver.solve(TestPackets.icrc(p, 20), wire, TestPackets.getShort(p, 24)));
    }

    /** Whatever ID the solver returns for a corrupted packet really makes its ICRC valid (never a wrong "yes"). */
    @Property(tries = 300)
    void anAnswerIsAlwaysAValidId(@ForAll @IntRange(max = 0xFFFF) int id, @ForAll @IntRange(max = 512) int payloadLen,
            @ForAll long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        byte[] payload = new byte[payloadLen];
        r.nextBytes(payload);
        byte[] p = TestPackets.ipv4Udp(0x0A000001, 0x0A000002, 0xC001, 4791, id,
                TestPackets.udSendOnly(0x11, 1, 0x11111111, 0x22, payload));
        TestPackets.sealIcrc(p, 20);
        int wire = TestPackets.wireIcrc(p);
        int at = 28 + r.nextInt(p.length - 28 - 4); // somewhere in BTH .. pad
        p[at] ^= (byte) (1 << r.nextInt(8));
        p[4] = 0;
        p[5] = 0;
        int got = Ipv4IdSolver.solve(TestPackets.icrc(p, 20), wire, TestPackets.getShort(p, 24));
        if (got >= 0) {
            TestPackets.putShort(p, 4, got);
            assertEquals(wire, TestPackets.icrc(p, 20), "returned ID " + got + " does not validate the ICRC");
        }
    }

    /**
     * A random 4-byte error burst passes only with probability 2^-16: 16 of the ICRC's 32 bits are
     * left for checking. (For a burst of up to 32 bits the error residue is uniform, which is what
     * makes 2^-16 exact; shorter errors depend on their distance from the ID: with 1-byte errors, one
     * distance, 115 bytes after the ID field, let a few byte values through.)
     */
    @Test
    void corruptionIsDetectedAlmostAlways() {
        SplittableRandom r = new SplittableRandom(42);
        int passed = 0;
        int trials = 20_000;
        for (int t = 0; t < trials; t++) {
            byte[] payload = new byte[4 + r.nextInt(256)];
            r.nextBytes(payload);
            byte[] p = TestPackets.ipv4Udp(0x0A630002, 0x0A630001, 0xD872, 4791, r.nextInt(0x10000),
                    TestPackets.udSendOnly(0x11, t, 0x11111111, 0x22, payload));
            TestPackets.sealIcrc(p, 20);
            int wire = TestPackets.wireIcrc(p);
            // after BTH byte 4 (masked out of the ICRC, so not a corruption) and before the ICRC
            int at = 33 + r.nextInt(p.length - 4 - 4 - 33 + 1);
            int burst = r.nextInt();
            while (burst == 0) {
                burst = r.nextInt();
            }
            TestPackets.putInt(p, at, TestPackets.getInt(p, at) ^ burst);
            p[4] = 0;
            p[5] = 0;
            if (Ipv4IdSolver.solve(TestPackets.icrc(p, 20), wire, TestPackets.getShort(p, 24)) >= 0) {
                passed++;
            }
        }
        // Expected 20000 / 65536 = 0.3 (P(more than 4) < 1e-4); a solver that accepted anything would pass all.
        assertTrue(passed <= 4, passed + " of " + trials + " corrupted packets passed");
    }
}
