// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import org.rdma4j.common.ManualClock;
import org.rdma4j.dma.DmaChecker;
import org.rdma4j.dma.DmaConfig;
import org.rdma4j.dma.DmaMode;
import org.rdma4j.dma.DmaReport;

/**
 * The conformance fixture for the soft device: one {@link SoftFabric} with two devices on a manual
 * clock, reaching memory in a given {@link DmaMode} with the DMA checker on (turn it off with
 * {@code -Drdma4j.soft.test.checker=false}). Closing fails the test if the checker reported anything.
 */
final class SoftTestFabric extends SoftDevicesFixture {
    private final SoftFabric fabric;

    SoftTestFabric(ManualClock clock) {
        this(clock, false);
    }

    /**
     * @param clock        drives the protocol timers
     * @param segmentAtMtu cut messages into path-MTU packets, exercising FIRST/MIDDLE/LAST handling
     */
    SoftTestFabric(ManualClock clock, boolean segmentAtMtu) {
        this(clock, segmentAtMtu, DmaMode.VIRTUAL);
    }

    /**
     * @param clock        drives the protocol timers
     * @param segmentAtMtu cut messages into path-MTU packets
     * @param mode         how both devices reach memory
     */
    SoftTestFabric(ManualClock clock, boolean segmentAtMtu, DmaMode mode) {
        this(clock, segmentAtMtu, config(mode));
    }

    /**
     * @param clock        drives the protocol timers
     * @param segmentAtMtu cut messages into path-MTU packets
     * @param dma          how both devices reach memory
     */
    SoftTestFabric(ManualClock clock, boolean segmentAtMtu, DmaConfig dma) {
        SoftFabric f = new SoftFabric(clock, segmentAtMtu);
        super(clock, f.addDevice("soft0", dma), f.addDevice("soft1", dma));
        this.fabric = f;
    }

    /** @return the test configuration of a mode: the checker on unless -Drdma4j.soft.test.checker=false */
    static DmaConfig config(DmaMode mode) {
        return DmaConfig.virtual().withMode(mode)
                .withChecker(Boolean.parseBoolean(System.getProperty("rdma4j.soft.test.checker", "true")));
    }

    /**
     * The modes the conformance classes run in: {@code -Drdma4j.soft.test.dma=virtual,iommu,bounce}
     * (the default: all three).
     *
     * @return the modes
     */
    static List<DmaMode> modes() {
        List<DmaMode> modes = new ArrayList<>();
        for (String s : System.getProperty("rdma4j.soft.test.dma", "virtual,iommu,bounce").split(",")) {
            if (!s.isBlank()) {
                modes.add(DmaMode.valueOf(s.trim().toUpperCase(Locale.ROOT)));
            }
        }
        return modes;
    }

    /** @return the fabric */
    SoftFabric fabric() {
        return fabric;
    }

    @Override
    public void close() {
        fabric.close();
        List<DmaReport> reports = new ArrayList<>();
        for (SoftDevice d : softDevices()) {
            DmaChecker c = d.dma().checker();
            if (c != null) {
                reports.addAll(c.reports());
            }
        }
        if (!reports.isEmpty()) {
            AssertionError e = new AssertionError("the DMA checker reported " + reports.size() + " misuse(s); first: "
                    + reports.getFirst());
            throw e;
        }
    }
}
