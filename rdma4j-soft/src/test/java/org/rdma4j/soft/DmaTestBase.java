// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.List;

import org.rdma4j.common.ManualClock;
import org.rdma4j.dma.DmaChecker;
import org.rdma4j.dma.DmaConfig;
import org.rdma4j.dma.DmaReport;
import org.rdma4j.testkit.ConformanceTestBase;
import org.rdma4j.testkit.Endpoint;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.verbs.Dma;
import org.rdma4j.verbs.DmaDirection;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WrOpcode;

/**
 * Fixture of the DMA tests: the conformance base on a soft fabric whose devices use {@link #dmaConfig()},
 * plus ULP-style helpers (map, check, post with the local DMA L_Key) and checker assertions.
 */
abstract class DmaTestBase extends ConformanceTestBase {
    /** @return how both devices reach memory (checker on) */
    abstract DmaConfig dmaConfig();

    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftTestFabric(clock, false, dmaConfig());
    }

    SoftDevice soft(int i) {
        return ((SoftTestFabric) fabric).softDevice(i);
    }

    DmaChecker checker(int i) {
        return soft(i).dma().checker();
    }

    /** Maps and checks, as a correct ULP does. */
    static long mapChecked(Dma dma, MemorySegment buf, DmaDirection dir) {
        long a = dma.map(buf, dir);
        assertFalse(dma.mappingError(a), () -> "map of " + buf.byteSize() + " bytes " + dir + " failed");
        return a;
    }

    /** A signaled one-SGE request naming DMA-mapped memory with the local DMA L_Key. */
    static SendWorkRequest dmaSend(long wrId, WrOpcode op, Endpoint e, long addr, int len, MemorySegment buf) {
        SendWorkRequest wr = new SendWorkRequest().wrId(wrId).opcode(op).sendFlags(SendFlags.SIGNALED);
        wr.sge(0).dma(addr, len, e.pd().localDmaLkey(), buf);
        return wr.numSge(1);
    }

    /** A one-SGE receive naming DMA-mapped memory. */
    static RecvWorkRequest dmaRecv(long wrId, Endpoint e, long addr, int len, MemorySegment buf) {
        RecvWorkRequest wr = new RecvWorkRequest().wrId(wrId);
        wr.sge(0).dma(addr, len, e.pd().localDmaLkey(), buf);
        return wr.numSge(1);
    }

    /**
     * Asserts that device i's checker reported exactly these kinds (in any order, each at least once,
     * nothing else), then forgets the reports so the teardown check passes.
     */
    void expectReports(int device, DmaReport.Kind... kinds) {
        List<DmaReport> got = checker(device).reports();
        for (DmaReport.Kind k : kinds) {
            assertTrue(got.stream().anyMatch(r -> r.kind() == k), () -> "expected a " + k + " report, got " + got);
        }
        for (DmaReport r : got) {
            assertTrue(List.of(kinds).contains(r.kind()), () -> "unexpected report " + r);
            assertTrue(r.misusedAt() != null, "every report carries the misuse stack");
        }
        checker(device).clearReports();
    }

    /** @return the first report of that kind on device i (asserting there is one) */
    DmaReport report(int device, DmaReport.Kind kind) {
        return checker(device).reports().stream().filter(r -> r.kind() == kind).findFirst()
                .orElseThrow(() -> new AssertionError("no " + kind + " report; got " + checker(device).reports()));
    }

    /** Asserts device i's checker is silent. */
    void expectNoReports(int device) {
        assertEquals(List.of(), checker(device).reports(), "DMA checker of device " + device);
    }
}
