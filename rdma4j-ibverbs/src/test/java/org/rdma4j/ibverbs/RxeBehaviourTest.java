// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.ConformanceTestBase;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.testkit.QpConfig;
import org.rdma4j.testkit.QpPair;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * What kernel rxe does, through libibverbs, where the conformance suite (written against the soft device)
 * expects otherwise: the evidence for docs/ibverbs.md, kept as tests so a kernel or rdma-core change shows.
 * Runs only on an rxe device ({@code -Drdma4j.ibverbs.test.device=rxe0} in the VM).
 */
class RxeBehaviourTest extends ConformanceTestBase {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        Assumptions.assumeTrue(IbvTestFabric.device().name().startsWith("rxe"), "needs an rxe device");
        return IbvTestFabric.create(clock);
    }

    @Override
    protected Duration quietWindow() {
        return IbvTestFabric.QUIET;
    }

    @BeforeEach
    void describe() {
        // nothing: the fabric is made in the base class
    }

    /** rdma-core's rxe validate_send_wr checks only num_sge, atomic length >= 8 and alignment, inline size. */
    private WorkCompletion acceptedThenFailed(QpPair p, SendWorkRequest wr) {
        postSend(p.local().qp(), wr);
        return pollOne(p.local().sendCq());
    }

    @Test
    void readOnUcIsAcceptedAtPostAndCompletesWithLocQpOpErr() {
        QpPair p = players().uc(QpConfig.uc());
        MemoryRegion l = regAll(p.local().pd(), 64);
        MemoryRegion r = regAll(p.remote().pd(), 64);
        WorkCompletion wc = acceptedThenFailed(p, rdmaWr(1, WrOpcode.RDMA_READ, l, r, 8));
        assertEquals(WcStatus.LOC_QP_OP_ERR, wc.status(), wc.toString());
    }

    @Test
    void atomicOfSixteenBytesIsAcceptedAtPost() {
        QpPair p = players().rc(QpConfig.rc());
        MemoryRegion l = regAll(p.local().pd(), 64);
        MemoryRegion r = regAll(p.remote().pd(), 64);
        SendWorkRequest wr = sendWr(1, WrOpcode.ATOMIC_FETCH_AND_ADD, l, 0, 16).remoteAddr(r.address()).rkey(r.rkey())
                .compareAdd(1);
        WorkCompletion wc = acceptedThenFailed(p, wr);
        assertTrue(wc.status() != null, wc.toString());
    }

    @Test
    void aBadLkeyCompletesWithLocQpOpErr() {
        QpPair p = players().rc(QpConfig.rc());
        MemoryRegion l = regAll(p.local().pd(), 64);
        MemoryRegion r = regAll(p.remote().pd(), 64);
        SendWorkRequest wr = rdmaWr(1, WrOpcode.RDMA_WRITE, l, r, 8);
        wr.sge(0).lkey(l.lkey() ^ 0x100);
        // rxe_req.c: finish_packet -> copy_data -> lookup_mr fails with -EINVAL -> IB_WC_LOC_QP_OP_ERR
        assertEquals(WcStatus.LOC_QP_OP_ERR, acceptedThenFailed(p, wr).status());
    }
}
