// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.WcOpcode;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * Unreliable connected transport: SEND and RDMA WRITE work, nothing is acknowledged, so the sender
 * completes SUCCESS as soon as the message left, and a responder without a receive drops the
 * message silently (rxe_resp.c check_resource: UC/UD drop, no RNR NAK).
 */
public abstract class AbstractUcTest extends ConformanceTestBase {
    /** Constructor for subclasses. */
    protected AbstractUcTest() {
    }

    private static final int BUF = 4096;

    private record Rig(QpPair p, MemoryRegion lmr, MemoryRegion rmr) {
    }

    private Rig rig(QpConfig cfg) {
        QpPair p = players().uc(cfg);
        return new Rig(p, regAll(p.local().pd(), BUF), regAll(p.remote().pd(), BUF));
    }

    /** Should deliver send with immediate over UC. */
    @Test
    public void shouldDeliverSendWithImmOverUc() {
        Rig r = rig(QpConfig.uc());
        byte[] data = pattern(300, 1);
        write(r.lmr().segment(), 0, data);
        postRecv(r.p().remote().qp(), 9, r.rmr(), 0, 512);
        postSend(r.p().local().qp(), sendWr(1, WrOpcode.SEND_WITH_IMM, r.lmr(), 0, 300).immData(77));
        WorkCompletion s = pollOne(r.p().local().sendCq());
        assertWc(s, WcStatus.SUCCESS, 1);
        assertEquals(WcOpcode.SEND, s.opcode());
        WorkCompletion wc = pollOne(r.p().remote().recvCq());
        assertWc(wc, WcStatus.SUCCESS, 9);
        assertEquals(WcOpcode.RECV, wc.opcode());
        assertEquals(300, wc.byteLen());
        assertTrue(wc.hasImm(), "WITH_IMM flag");
        assertEquals(77, wc.immData());
        assertBytes(data, r.rmr().segment(), 0, "UC SEND payload");
    }

    /** Should deliver multi-packet send over UC. */
    @Test
    public void shouldDeliverMultiPacketSendOverUc() {
        Rig r = rig(QpConfig.uc().pathMtu(Mtu.MTU_256));
        byte[] data = pattern(2000, 2);
        write(r.lmr().segment(), 0, data);
        postRecv(r.p().remote().qp(), 9, r.rmr(), 0, BUF);
        postSend(r.p().local().qp(), sendWr(1, WrOpcode.SEND, r.lmr(), 0, 2000));
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.SUCCESS, 1);
        WorkCompletion wc = pollOne(r.p().remote().recvCq());
        assertWc(wc, WcStatus.SUCCESS, 9);
        assertEquals(2000, wc.byteLen());
        assertBytes(data, r.rmr().segment(), 0, "UC multi-packet SEND payload");
    }

    /** Should write and write with immediate over UC. */
    @Test
    public void shouldWriteAndWriteWithImmOverUc() {
        Rig r = rig(QpConfig.uc());
        byte[] data = pattern(1000, 3);
        write(r.lmr().segment(), 0, data);
        postRecv(r.p().remote().qp(), 9, r.rmr(), 3000, 64);
        postSend(r.p().local().qp(), rdmaWr(1, WrOpcode.RDMA_WRITE, r.lmr(), r.rmr(), 1000));
        WorkCompletion s = pollOne(r.p().local().sendCq());
        assertWc(s, WcStatus.SUCCESS, 1);
        assertEquals(WcOpcode.RDMA_WRITE, s.opcode());
        postSend(r.p().local().qp(), rdmaWr(2, WrOpcode.RDMA_WRITE_WITH_IMM, r.lmr(), r.rmr(), 8).immData(5));
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.SUCCESS, 2);
        WorkCompletion wc = pollOne(r.p().remote().recvCq());
        assertWc(wc, WcStatus.SUCCESS, 9);
        assertEquals(WcOpcode.RECV_RDMA_WITH_IMM, wc.opcode());
        assertEquals(5, wc.immData());
        assertBytes(data, r.rmr().segment(), 0, "UC WRITE payload");
    }

    /** Should drop silently when no receive is posted and deliver the next message. */
    @Test
    public void shouldDropSilentlyWhenNoReceiveIsPostedAndDeliverTheNextMessage() {
        Rig r = rig(QpConfig.uc());
        write(r.lmr().segment(), 0, pattern(100, 4));
        byte[] second = pattern(60, 5);
        write(r.lmr().segment(), 1024, second);
        postSend(r.p().local().qp(), sendWr(1, WrOpcode.SEND, r.lmr(), 0, 100));
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.SUCCESS, 1);
        assertNoCompletion(r.p().remote().recvCq());
        assertEquals(QpState.RTS, r.p().remote().qp().state(), "UC responder after a drop");

        postRecv(r.p().remote().qp(), 9, r.rmr(), 0, 512);
        postSend(r.p().local().qp(), sendWr(2, WrOpcode.SEND, r.lmr(), 1024, 60));
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.SUCCESS, 2);
        WorkCompletion wc = pollOne(r.p().remote().recvCq());
        assertWc(wc, WcStatus.SUCCESS, 9);
        assertEquals(60, wc.byteLen(), "the receive got the second message, not the dropped one");
        assertBytes(second, r.rmr().segment(), 0, "second message");
    }

    /** Should drop write silently when responder QP lacks remote write. */
    @Test
    public void shouldDropWriteSilentlyWhenResponderQpLacksRemoteWrite() {
        QpPair p = players().connected(QpConfig.uc(), QpConfig.uc().accessFlags(AccessFlag.of()).sqPsn(0x4000));
        MemoryRegion lmr = regAll(p.local().pd(), 256);
        MemoryRegion rmr = regAll(p.remote().pd(), 256);
        write(lmr.segment(), 0, pattern(64, 6));
        postSend(p.local().qp(), rdmaWr(1, WrOpcode.RDMA_WRITE, lmr, rmr, 64));
        // rxe_resp.c check_op_valid: UC write not enabled => silent drop (verbs-dma.md 4.1)
        assertWc(pollOne(p.local().sendCq()), WcStatus.SUCCESS, 1);
        assertNoCompletion(p.remote().recvCq());
        assertBytes(new byte[64], rmr.segment(), 0, "nothing written");
        assertEquals(QpState.RTS, p.remote().qp().state());
    }

    /** Should refuse read and atomics at post on UC. */
    @Test
    public void shouldFailReadAndAtomicsOnUcWithLocQpOpErrAfterPost() {
        Rig r = rig(QpConfig.uc());
        // rdma-core's rxe provider accepts an RDMA READ or an atomic on a UC QP (validate_send_wr checks no
        // opcode); the kernel's requester finds no UC opcode for it (rxe_req.c next_opcode < 0): the WR
        // completes with LOC_QP_OP_ERR, the QP goes to ERR and later WRs are flushed (seen in the VM with
        // kernel 6.1: interop/rxe-probes, postchk-read-on-UC, postchk-atomic-on-UC)
        postSend(r.p().local().qp(), rdmaWr(1, WrOpcode.RDMA_READ, r.lmr(), r.rmr(), 8));
        postSend(r.p().local().qp(), sendWr(2, WrOpcode.ATOMIC_FETCH_AND_ADD, r.lmr(), 0, 8)
                .remoteAddr(r.rmr().address()).rkey(r.rmr().rkey()));
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.LOC_QP_OP_ERR, 1);
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.WR_FLUSH_ERR, 2);
        assertEquals(QpState.ERR, r.p().local().qp().state(), "requester");
        assertEquals(QpState.RTS, r.p().remote().qp().state(), "responder: nothing was sent");
    }

    /** Should fail with LOC_QP_OP_ERR when send exceeds receive buffer over UC. */
    @Test
    public void shouldFailWithLocQpOpErrWhenSendExceedsReceiveBufferOverUc() {
        Rig r = rig(QpConfig.uc());
        postRecv(r.p().remote().qp(), 9, r.rmr(), 0, 16);
        postSend(r.p().local().qp(), sendWr(1, WrOpcode.SEND, r.lmr(), 0, 64));
        // UC has no acknowledgements: the sender completes SUCCESS. At the responder rxe's copy_data fails
        // with -EINVAL (length > resid): a malformed WQE (class A), LOC_QP_OP_ERR and the QP to ERR (seen
        // in the VM with kernel 6.1: interop/rxe-probes, sendlong-UC)
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.SUCCESS, 1);
        assertWc(pollOne(r.p().remote().recvCq()), WcStatus.LOC_QP_OP_ERR, 9);
        assertEquals(QpState.ERR, r.p().remote().qp().state(), "responder");
        assertEquals(QpState.RTS, r.p().local().qp().state(), "requester");
    }
}
