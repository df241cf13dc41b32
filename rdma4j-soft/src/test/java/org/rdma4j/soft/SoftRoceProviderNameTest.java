// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.net.InetAddress;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;

/** A device reports provider "rxe" once it is bound to IP addresses, "soft" while it is in-process only. */
class SoftRoceProviderNameTest {
    @Test
    void roceDevicesAreRxeInProcessOnesSoft() throws Exception {
        try (SoftFabric fabric = new SoftFabric(new ManualClock())) {
            SoftDevice local = fabric.addDevice("soft0");
            SoftDevice roce = fabric.addRoceDevice("rxe0", new RoceConfig(List.of(InetAddress.getByName("127.0.0.1")),
                    SoftRoceTestFabric.freeUdpPort(), null));
            assertEquals("soft", local.providerName());
            assertEquals("rxe", roce.providerName());
        }
    }
}
