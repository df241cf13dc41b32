// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/**
 * {@link SockAddr#equals} compares words (it runs for every received RoCE datagram): it must agree with a byte-wise
 * comparison of the family's bytes, whichever byte differs.
 */
class SockAddrEqualsTest {
    private static byte[] bytes(SockAddr a) {
        int len = a.isIpv4() ? 16 : a.isIpv6() ? 28 : 0;
        return a.seg.asSlice(0, len).toArray(ValueLayout.JAVA_BYTE);
    }

    @Property(tries = 300)
    void agreesWithBytewiseComparisonIpv4(@ForAll int addr, @ForAll @IntRange(max = 0xFFFF) int port,
                                          @ForAll @IntRange(min = 0, max = 15) int flip, @ForAll boolean change) {
        SockAddr a = new SockAddr().setIpv4(addr, port);
        SockAddr b = new SockAddr().set(a);
        if (change) {
            poke(b.seg, flip);
        }
        assertEquals(Arrays.equals(bytes(a), bytes(b)) && a.length() == b.length(), a.equals(b));
        assertEquals(a.equals(b), b.equals(a));
    }

    @Property(tries = 300)
    void agreesWithBytewiseComparisonIpv6(@ForAll byte[] seed, @ForAll @IntRange(max = 0xFFFF) int port,
                                          @ForAll @IntRange(min = 0, max = 27) int flip, @ForAll boolean change) {
        byte[] ip = Arrays.copyOf(seed, 16);
        SockAddr a = new SockAddr().setIpv6(ip, 0, port);
        SockAddr b = new SockAddr().set(a);
        if (change) {
            poke(b.seg, flip);
        }
        assertEquals(Arrays.equals(bytes(a), bytes(b)) && a.length() == b.length(), a.equals(b));
        assertEquals(a.equals(b), b.equals(a));
    }

    @Test
    void familiesDifferAndEmptyAddressesAreEqual() {
        SockAddr v4 = new SockAddr().setIpv4(0x7F000001, 4791);
        SockAddr v6 = new SockAddr().setIpv6(new byte[16], 0, 4791);
        assertNotEquals(v4, v6);
        assertNotEquals(v6, v4);
        SockAddr e1 = new SockAddr();
        SockAddr e2 = new SockAddr();
        e1.seg.set(ValueLayout.JAVA_BYTE, 9, (byte) 1); // no family: the rest is not an address
        assertEquals(e1, e2);
    }

    /** Changes byte {@code i}, keeping the family (bytes 0-1) valid so that both stay addresses of one family. */
    private static void poke(MemorySegment s, int i) {
        if (i < 2) {
            i = 2 + i; // the family is the length: covered by familiesDiffer...
        }
        s.set(ValueLayout.JAVA_BYTE, i, (byte) (s.get(ValueLayout.JAVA_BYTE, i) ^ 0x5A));
    }
}
