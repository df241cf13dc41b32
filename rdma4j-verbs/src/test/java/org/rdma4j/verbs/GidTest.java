// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

class GidTest {
    @Test
    void shouldPrintAsIbvDevinfoDoes() {
        Gid g = new Gid(0xFE80_0000_0000_0000L, 0x0200_00FF_FE00_0101L);
        assertEquals("fe80:0000:0000:0000:0200:00ff:fe00:0101", g.toString());
    }

    @Test
    void shouldMapIpv4AddressesAsRoceV2Does() throws Exception {
        Gid g = Gid.ofInetAddress(InetAddress.getByName("192.168.1.10"));
        assertEquals("0000:0000:0000:0000:0000:ffff:c0a8:010a", g.toString());
        assertTrue(g.isIpv4Mapped());
        assertEquals(InetAddress.getByName("192.168.1.10"), g.toInetAddress());
        assertFalse(Gid.ofInetAddress(InetAddress.getByName("fd00::1")).isIpv4Mapped());
    }

    @Test
    void shouldRejectWrongLength() {
        VerbsException e = assertThrows(VerbsException.class, () -> Gid.of(new byte[15]));
        assertEquals(Errno.EINVAL, e.errno());
    }

    @Property(tries = 300)
    void shouldRoundTripBytes(@ForAll @Size(16) byte[] bytes) {
        assertArrayEquals(bytes, Gid.of(bytes).toBytes());
    }
}
