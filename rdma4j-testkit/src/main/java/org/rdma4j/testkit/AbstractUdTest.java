// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Set;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcFlags;
import org.rdma4j.verbs.WcOpcode;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/** Unreliable datagram: GRH area, Q_Keys, MTU limit and address handles (verbs-dma.md 4.8). */
public abstract class AbstractUdTest extends ConformanceTestBase {
    /** Constructor for subclasses. */
    protected AbstractUdTest() {
    }

    private static final int GRH = 40;
    private static final int BUF = 8192;

    private record Rig(QpPair p, AddressHandle ah, MemoryRegion lmr, MemoryRegion rmr) {
        SendWorkRequest send(long wrId, WrOpcode op, long off, int len, int qkey) {
            return sendWr(wrId, op, lmr, off, len).ah(ah).remoteQpn(p.remote().qpNum()).remoteQkey(qkey);
        }
    }

    private Rig rig(QpConfig cfg) {
        QpPair p = players().ud(cfg);
        return new Rig(p, players().ah(p.local(), p.remote()), regAll(p.local().pd(), BUF),
                regAll(p.remote().pd(), BUF));
    }

    /** Should place grh area before payload when UD send is received. */
    @Test
    public void shouldPlaceGrhAreaBeforePayloadWhenUdSendIsReceived() {
        Rig r = rig(QpConfig.ud());
        byte[] data = pattern(100, 1);
        write(r.lmr().segment(), 0, data);
        postRecv(r.p().remote().qp(), 9, r.rmr(), 0, GRH + 512);
        postSend(r.p().local().qp(), r.send(1, WrOpcode.SEND, 0, 100, QpConfig.DEFAULT_QKEY));
        WorkCompletion s = pollOne(r.p().local().sendCq());
        assertWc(s, WcStatus.SUCCESS, 1);
        assertEquals(WcOpcode.SEND, s.opcode());
        WorkCompletion wc = pollOne(r.p().remote().recvCq());
        assertWc(wc, WcStatus.SUCCESS, 9);
        assertEquals(WcOpcode.RECV, wc.opcode());
        // ibv_post_recv.3 / rxe execute(): the first 40 bytes hold the GRH, byte_len includes them
        assertEquals(GRH + 100, wc.byteLen(), "byte_len = 40 + payload");
        assertTrue((wc.wcFlags() & WcFlags.GRH) != 0, "GRH flag: " + wc);
        assertEquals(r.p().local().qpNum(), wc.srcQp(), "src_qp");
        assertEquals(r.p().remote().qpNum(), wc.qpNum(), "qp_num");
        assertBytes(data, r.rmr().segment(), GRH, "payload after the GRH area");
    }

    /** Should carry immediate data over UD. */
    @Test
    public void shouldCarryImmediateDataOverUd() {
        Rig r = rig(QpConfig.ud());
        postRecv(r.p().remote().qp(), 9, r.rmr(), 0, GRH + 64);
        postSend(r.p().local().qp(), r.send(1, WrOpcode.SEND_WITH_IMM, 0, 16, QpConfig.DEFAULT_QKEY)
                .immData(0xDEAD_BEEF));
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.SUCCESS, 1);
        WorkCompletion wc = pollOne(r.p().remote().recvCq());
        assertWc(wc, WcStatus.SUCCESS, 9);
        assertTrue(wc.hasImm(), "WITH_IMM flag");
        assertEquals(0xDEAD_BEEF, wc.immData());
        assertEquals(GRH + 16, wc.byteLen());
    }

    /** Should drop silently when Q_Key mismatches. */
    @Test
    public void shouldDropSilentlyWhenQkeyMismatches() {
        Rig r = rig(QpConfig.ud());
        postRecv(r.p().remote().qp(), 9, r.rmr(), 0, GRH + 512);
        postSend(r.p().local().qp(), r.send(1, WrOpcode.SEND, 0, 100, QpConfig.DEFAULT_QKEY + 1));
        // rxe_recv.c check_keys: DETH Q_Key != QP's qkey => drop; the sender cannot know
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.SUCCESS, 1);
        assertNoCompletion(r.p().remote().recvCq());
        postSend(r.p().local().qp(), r.send(2, WrOpcode.SEND, 0, 30, QpConfig.DEFAULT_QKEY));
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.SUCCESS, 2);
        WorkCompletion wc = pollOne(r.p().remote().recvCq());
        assertWc(wc, WcStatus.SUCCESS, 9);
        assertEquals(GRH + 30, wc.byteLen(), "the receive got the matching message");
    }

    /** Should send own Q_Key when remote Q_Key has high bit set. */
    @Test
    public void shouldSendRemoteQkeyUnchangedWhenItsHighBitIsSet() {
        Rig r = rig(QpConfig.ud());
        postRecv(r.p().remote().qp(), 9, r.rmr(), 0, GRH + 64);
        // rxe init_req_packet puts the WR's remote_qkey in the DETH as it is; it does not apply IBA C10-15
        // (a Q_Key with bit 31 set stands for the sending QP's own Q_Key, as HCAs that implement controlled
        // Q_Keys do). So a receiver whose Q_Key differs drops it (rxe check_keys; seen in the VM with kernel
        // 6.1: interop/rxe-probes, case qkey: 0x80000000 and 0x91111111 to a QP whose Q_Key is 0x11111111
        // were not delivered and counted in qkey_viol_cntr)
        postSend(r.p().local().qp(), r.send(1, WrOpcode.SEND, 0, 8, 0x8000_0000 | QpConfig.DEFAULT_QKEY));
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.SUCCESS, 1);
        assertNoCompletion(r.p().remote().recvCq());
        postSend(r.p().local().qp(), r.send(2, WrOpcode.SEND, 0, 8, 0x8000_0000));
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.SUCCESS, 2);
        assertNoCompletion(r.p().remote().recvCq());

        // a receiver whose own Q_Key has bit 31 set takes exactly that Q_Key
        r.p().remote().qp().modify(new QpAttributes().state(QpState.RTS).qkey(0x8000_0000 | QpConfig.DEFAULT_QKEY));
        postSend(r.p().local().qp(), r.send(3, WrOpcode.SEND, 0, 8, 0x8000_0000 | QpConfig.DEFAULT_QKEY));
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.SUCCESS, 3);
        assertWc(pollOne(r.p().remote().recvCq()), WcStatus.SUCCESS, 9);
    }

    /** Should fail with LOC_QP_OP_ERR when message exceeds receive buffer. */
    @Test
    public void shouldFailWithLocQpOpErrWhenMessageExceedsReceiveBuffer() {
        Rig r = rig(QpConfig.ud());
        postRecv(r.p().remote().qp(), 9, r.rmr(), 0, GRH + 16);
        postRecv(r.p().remote().qp(), 10, r.rmr(), 256, GRH + 256);
        postSend(r.p().local().qp(), r.send(1, WrOpcode.SEND, 0, 64, QpConfig.DEFAULT_QKEY));
        // rxe 6.1 execute: the GRH area and the payload go through copy_data, which fails with -EINVAL when
        // they exceed the buffer: a malformed WQE (class A), LOC_QP_OP_ERR and the UD QP to ERR (seen in the
        // VM: interop/rxe-probes, sendlong-UD). Later kernels drop the message instead (rxe_resp_check_length).
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.SUCCESS, 1);
        assertWc(pollOne(r.p().remote().recvCq()), WcStatus.LOC_QP_OP_ERR, 9);
        assertWc(pollOne(r.p().remote().recvCq()), WcStatus.WR_FLUSH_ERR, 10);
        assertEquals(QpState.ERR, r.p().remote().qp().state(), "receiver");
    }

    /** Should complete with success but send nothing when message exceeds MTU. */
    @Test
    public void shouldCompleteWithSuccessButSendNothingWhenMessageExceedsMtu() {
        Rig r = rig(QpConfig.ud());
        int mtu = ctxA.queryPort(1).activeMtu().bytes();
        postRecv(r.p().remote().qp(), 9, r.rmr(), 0, GRH + mtu + 64);
        postSend(r.p().local().qp(), r.send(1, WrOpcode.SEND, 0, mtu + 1, QpConfig.DEFAULT_QKEY));
        // IBA C10-93.1.1: "the CI shall not emit any packets for this message. Further, the CI shall
        // not generate an error" (rxe_req.c "fake a success")
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.SUCCESS, 1);
        assertNoCompletion(r.p().remote().recvCq());
        assertEquals(QpState.RTS, r.p().local().qp().state());
        postSend(r.p().local().qp(), r.send(2, WrOpcode.SEND, 0, mtu, QpConfig.DEFAULT_QKEY));
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.SUCCESS, 2);
        WorkCompletion wc = pollOne(r.p().remote().recvCq());
        assertWc(wc, WcStatus.SUCCESS, 9);
        assertEquals(GRH + mtu, wc.byteLen(), "a message of exactly one MTU is delivered");
    }

    /** Should refuse at post when AH belongs to another PD. */
    @Test
    public void shouldRefuseAtPostWhenAhBelongsToAnotherPd() {
        Rig r = rig(QpConfig.ud());
        ProtectionDomain other = track(ctxA.allocPd());
        AddressHandle foreign = track(other.createAh(Players.av(r.p().remote().gid())));
        postRecv(r.p().remote().qp(), 9, r.rmr(), 0, GRH + 64);
        // verbs-dma.md 4.8: the AH's PD must be the QP's PD; rdma4j refuses at post time
        assertPostSendRefused(r.p().local().qp(), r.send(1, WrOpcode.SEND, 0, 8, QpConfig.DEFAULT_QKEY)
                .ah(foreign), Errno.EINVAL);
        assertNoCompletion(r.p().local().sendCq());
        assertNoCompletion(r.p().remote().recvCq());
    }

    /** Should refuse rdma opcodes at post on UD. */
    @Test
    public void shouldFailRdmaOpcodesOnUdWithLocQpOpErrAfterPost() {
        Rig r = rig(QpConfig.ud());
        // rdma-core's rxe provider accepts them; the kernel's requester finds no UD opcode (next_opcode < 0):
        // LOC_QP_OP_ERR, the QP to ERR, later WRs flushed (seen in the VM with kernel 6.1: interop/rxe-probes,
        // postchk-write-on-UD)
        postSend(r.p().local().qp(), r.send(1, WrOpcode.RDMA_WRITE, 0, 8, QpConfig.DEFAULT_QKEY)
                .remoteAddr(r.rmr().address()).rkey(r.rmr().rkey()));
        postSend(r.p().local().qp(), r.send(2, WrOpcode.RDMA_READ, 0, 8, QpConfig.DEFAULT_QKEY)
                .remoteAddr(r.rmr().address()).rkey(r.rmr().rkey()));
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.LOC_QP_OP_ERR, 1);
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.WR_FLUSH_ERR, 2);
        assertEquals(QpState.ERR, r.p().local().qp().state());
    }

    /** Should reach both peers from one QP with two address handles. */
    @Test
    public void shouldReachBothPeersFromOneQpWithTwoAddressHandles() {
        // one UD QP on device 0 talks to a UD QP on device 1 and to another UD QP on device 0 itself
        Rig r = rig(QpConfig.ud());
        Endpoint loop = players().endpoint(ctxA, QpConfig.ud().sqPsn(0x9000));
        loop.qp().modify(Players.initAttrs(loop.config(), Set.of()));
        loop.qp().modify(Players.rtrAttrs(loop.config(), null, 0, 0, Set.of()));
        MemoryRegion loopMr = regAll(loop.pd(), 256);
        AddressHandle toSelf = players().ah(r.p().local(), loop);
        postRecv(loop.qp(), 5, loopMr, 0, GRH + 64);
        postRecv(r.p().remote().qp(), 9, r.rmr(), 0, GRH + 64);
        postSend(r.p().local().qp(), r.send(1, WrOpcode.SEND, 0, 10, QpConfig.DEFAULT_QKEY));
        postSend(r.p().local().qp(), sendWr(2, WrOpcode.SEND, r.lmr(), 0, 20).ah(toSelf).remoteQpn(loop.qpNum())
                .remoteQkey(QpConfig.DEFAULT_QKEY));
        assertWc(pollOne(r.p().remote().recvCq()), WcStatus.SUCCESS, 9);
        WorkCompletion wc = pollOne(loop.recvCq());
        assertWc(wc, WcStatus.SUCCESS, 5);
        assertEquals(GRH + 20, wc.byteLen());
        assertEquals(r.p().local().qpNum(), wc.srcQp(), "src_qp");
        assertEquals(2, pollUntil(r.p().local().sendCq(), 2).size());
    }
}
