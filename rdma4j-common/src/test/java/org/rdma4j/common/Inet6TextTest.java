// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.HexFormat;

import org.junit.jupiter.api.Test;

/** glibc's inet_ntop(AF_INET6) text, the one formatter behind Gids.toString, RoceLinks.text and the pingpongs. */
class Inet6TextTest {
    private static String ntop(String hex) {
        return Inet6Text.ntop(HexFormat.of().parseHex(hex));
    }

    @Test
    void compressesTheFirstLongestRunOfTwoOrMoreZeroGroups() {
        assertEquals("::", ntop("00000000000000000000000000000000"));
        assertEquals("::1", ntop("00000000000000000000000000000001"));
        assertEquals("1::", ntop("00010000000000000000000000000000"));
        assertEquals("fe80::1", ntop("fe800000000000000000000000000001"));
        assertEquals("fe80::200:ff:fe00:1", ntop("fe80000000000000020000fffe000001"));
        assertEquals("2001:db8::1:0:0:1", ntop("20010db8000000000001000000000001"));
        assertEquals("1::2:0:0:3:4", ntop("00010000000000020000000000030004"));
    }

    @Test
    void leavesASingleZeroGroupAsZero() {
        assertEquals("2001:db8:0:1:1:1:1:1", ntop("20010db8000000010001000100010001"));
    }

    @Test
    void writesIpv4MappedAndCompatibleAddressesWithADottedQuad() {
        assertEquals("::ffff:192.168.1.10", ntop("00000000000000000000ffffc0a8010a"));
        assertEquals("::10.0.0.1", ntop("0000000000000000000000000a000001"));
        // ffff in the wrong group: neither form, plain hex
        assertEquals("::ffff:0:0:a00:1", ntop("000000000000ffff000000000a000001"));
    }

    @Test
    void refusesAnythingButSixteenBytes() {
        assertThrows(IllegalArgumentException.class, () -> Inet6Text.ntop(new byte[4]));
    }
}
