// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import static org.junit.jupiter.api.Assertions.assertTrue;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.Size;

/**
 * Quick fuzzing of the parser in the normal test run (a few thousand inputs): random bytes and mutated
 * valid packets never make it throw, are always counted once, and when accepted re-encode to the same bytes.
 * {@link ParserFuzzSlowTest} runs the same oracle on a million inputs ({@code mvn -Pslow test}).
 */
class ParserFuzzTest {
    private final Fuzz fuzz = new Fuzz();

    @Property(tries = 3000)
    void randomBytesAreAcceptedOrCounted(@ForAll @Size(max = 96) byte[] bytes, @ForAll long ipSeed) {
        fuzz.randomBytes(bytes, TestPackets.randomIp(new java.util.Random(ipSeed)), "random bytes");
    }

    @Property(tries = 3000)
    void mutatedPacketsAreAcceptedOrCounted(@ForAll long seed) {
        fuzz.mutated(seed);
    }

    @Property(tries = 2000)
    void mutatedIpPacketsAreAcceptedOrCounted(@ForAll long seed) {
        fuzz.mutatedIp(seed);
    }

    @Property(tries = 1000)
    void randomIpBytesAreAcceptedOrCounted(@ForAll @Size(max = 120) byte[] bytes) {
        java.lang.foreign.MemorySegment s = java.lang.foreign.MemorySegment.ofArray(bytes);
        long before = fuzz.exact.accepted() + fuzz.exact.dropped();
        fuzz.exact.parseIpPacket(fuzz.pkt, s, 0, bytes.length);
        org.junit.jupiter.api.Assertions.assertEquals(before + 1, fuzz.exact.accepted() + fuzz.exact.dropped());
    }

    @Property(tries = 200)
    void unmutatedPacketsAreAlwaysAccepted(@ForAll long seed) {
        // the oracle's control: with no mutation at all, everything must come back OK
        java.util.Random r = new java.util.Random(seed);
        int op = TestPackets.OPCODES[r.nextInt(TestPackets.OPCODES.length)];
        PseudoHeader ip = TestPackets.randomIp(r);
        byte[] b = new byte[128];
        java.lang.foreign.MemorySegment s = java.lang.foreign.MemorySegment.ofArray(b);
        int len = TestPackets.randomPacket(new RocePacket(), s, op, r, ip, fuzz.icrc);
        RoceStatus st = fuzz.feed(fuzz.exact, s, 0, len, ip, "seed " + seed);
        assertTrue(st == RoceStatus.OK || st == RoceStatus.CNP, st::toString);
    }


    @org.junit.jupiter.api.Test
    void mutationsReachEveryVerdict() {
        // guards the fuzzer against going shallow: fixed seeds must produce every UDP-level status
        Fuzz f = new Fuzz();
        for (long seed = 0; seed < 10_000; seed++) {
            f.mutated(seed);
        }
        for (RoceStatus st : RoceStatus.values()) {
            if (st != RoceStatus.BAD_IP && st != RoceStatus.NOT_ROCE) {
                assertTrue(f.solve.count(st) > 0, st + " never reached: " + f.solve);
            }
        }
        assertTrue(f.solve.accepted() > 2000, f.solve::toString);
        for (long seed = 0; seed < 3_000; seed++) {
            f.mutatedIp(seed);
        }
        for (RoceStatus st : new RoceStatus[] {RoceStatus.OK, RoceStatus.CNP, RoceStatus.BAD_IP, RoceStatus.NOT_ROCE,
            RoceStatus.BAD_ICRC}) {
            assertTrue(f.exact.count(st) > 0, st + " never reached from IP packets: " + f.exact);
        }
    }
}
