// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.dma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;

import org.junit.jupiter.api.Test;

/** Configuration by properties: modes, sizes with suffixes, flags, and clear errors. */
class DmaConfigTest {
    @Test
    void readsEveryProperty() {
        Map<String, String> p = Map.of("d", "bounce", "d.bouncePool", "64k", "d.iommuWindow", "1m", "d.addressBits", "32",
                "d.forceBounce", "true", "d.bounceRegistrations", "on", "d.checker", "true");
        DmaConfig c = DmaConfig.fromProperties("d", p::get);
        assertEquals(new DmaConfig(DmaMode.BOUNCE, 1 << 20, 64 << 10, 32, true, true, true), c);
        assertEquals(DmaConfig.virtual(), DmaConfig.fromProperties("d", k -> null));
        assertEquals(DmaMode.IOMMU, DmaConfig.fromProperties("d", Map.of("d", "IOMMU")::get).mode());
    }

    @Test
    void badValuesNameTheProperty() {
        var e = assertThrows(IllegalArgumentException.class, () -> DmaConfig.fromProperties("d", Map.of("d", "mmu")::get));
        assertTrue(e.getMessage().contains("d=mmu") && e.getMessage().contains("iommu"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> DmaConfig.fromProperties("d", Map.of("d.iommuWindow", "5000")::get));
        assertTrue(e.getMessage().contains("4096"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> DmaConfig.fromProperties("d", Map.of("d.checker", "yes please")::get));
        assertTrue(e.getMessage().contains("d.checker"), e.getMessage());
    }
}
