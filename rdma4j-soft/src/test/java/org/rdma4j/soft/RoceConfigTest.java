// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.VerbsException;

class RoceConfigTest {
    @Test
    void activeMtuFollowsRxeSetMtu() {
        // rxe_set_mtu: the largest IB MTU within netdev MTU - 80
        assertEquals(Mtu.MTU_1024, RoceConfig.ibMtuFor(1500));
        assertEquals(Mtu.MTU_4096, RoceConfig.ibMtuFor(9000));
        assertEquals(Mtu.MTU_2048, RoceConfig.ibMtuFor(4175));
        assertEquals(Mtu.MTU_4096, RoceConfig.ibMtuFor(4176));
        assertEquals(Mtu.MTU_256, RoceConfig.ibMtuFor(300));
        assertEquals(Mtu.MTU_4096, RoceConfig.ibMtuFor(65536));
    }

    @Test
    void parsesAddressesAndPort() {
        RoceConfig c = RoceConfig.parse("10.99.0.1,fd99::1@14791");
        assertEquals(2, c.addresses().size());
        assertEquals(14791, c.udpPort());
        assertEquals(4791, RoceConfig.parse("127.0.0.1").udpPort());
        assertEquals(Mtu.MTU_4096, RoceConfig.parse("127.0.0.2").resolveMtu(), "127/8 lives on lo (MTU 65536)");
    }

    @Test
    void refusesWhatCannotWork() {
        assertThrows(VerbsException.class, () -> RoceConfig.parse("0.0.0.0"));
        assertThrows(VerbsException.class, () -> RoceConfig.parse("127.0.0.1,127.0.0.2"));
        assertThrows(VerbsException.class, () -> RoceConfig.parse("example.org"));
        assertThrows(VerbsException.class, () -> RoceConfig.parse("127.0.0.1@70000"));
        assertThrows(VerbsException.class, () -> RoceConfig.parse(""));
    }

    @Test
    void refusalsSayWhatIsWrong() {
        var e = assertThrows(VerbsException.class, () -> RoceConfig.parse("127.0.0.1,127.0.0.2"));
        assertTrue(e.getMessage().contains("at most one IPv4 and one IPv6 address"), e.getMessage());
        e = assertThrows(VerbsException.class, () -> RoceConfig.parse("example.org"));
        assertTrue(e.getMessage().contains("'example.org' is not an IP address"), e.getMessage());
    }

    @Test
    void roceGuidIsEui64OfAddressDerivedMac() {
        long g = SoftDevice.guidFor(org.rdma4j.verbs.Gid.ofInetAddress(java.net.InetAddress.ofLiteral("10.99.0.1")));
        assertEquals(0x0000_0aff_fe63_0001L, g);
    }
}
