// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.util.Random;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Tag;

/**
 * The parser fuzz run of at least a million inputs ({@code mvn -o -Pslow test -pl rdma4j-wire}): 1000 tries of
 * 1000 inputs each: half random byte strings, a quarter mutated valid UDP payloads, a quarter
 * mutated whole IP packets, each derived from the try's seed and
 * its index (both printed on failure, with jqwik's own seed).
 */
@Tag("slow")
class ParserFuzzSlowTest {
    private static final int PER_TRY = 1000;

    private final Fuzz fuzz = new Fuzz();

    @Property(tries = 1000)
    void aMillionInputsAreAcceptedOrCounted(@ForAll long seed) {
        Random r = new Random(seed);
        for (int i = 0; i < PER_TRY; i++) {
            long s = r.nextLong();
            if (i % 4 == 0) {
                fuzz.mutatedIp(s);
            } else if ((i & 1) == 0) {
                fuzz.mutated(s);
            } else {
                Random b = new Random(s);
                byte[] bytes = new byte[b.nextInt(97)];
                b.nextBytes(bytes);
                if (bytes.length > 1 && b.nextBoolean()) {
                    bytes[1] &= (byte) 0xF0; // TVer 0, so more inputs reach the opcode and length checks
                }
                fuzz.randomBytes(bytes, TestPackets.randomIp(b), "random bytes, seed " + s + "L");
            }
        }
        if (fuzz.solvedWrongId > 0) {
            // not a failure: the IPv4 ID solver accepts a corrupted packet with probability 2^-16 (Icrc doc)
            System.out.println("ParserFuzzSlowTest: " + fuzz.solvedWrongId + " corrupted IPv4 packet(s) passed the ICRC under"
                    + " another ID so far, of " + fuzz.solve.count(RoceStatus.BAD_ICRC) + " caught");
        }
    }
}
