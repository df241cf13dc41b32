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
    public void shouldSendOwnQkeyWhenRemoteQkeyHasHighBitSet() {
        Rig r = rig(QpConfig.ud());
        postRecv(r.p().remote().qp(), 9, r.rmr(), 0, GRH + 64);
        postRecv(r.p().remote().qp(), 10, r.rmr(), 256, GRH + 64);
        // IBA C10-15 (controlled Q_Key): remote_qkey with bit 31 set => the QP's own Q_Key is sent
        postSend(r.p().local().qp(), r.send(1, WrOpcode.SEND, 0, 8, 0x8000_0000 | 0x0BAD));
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.SUCCESS, 1);
        WorkCompletion wc = pollOne(r.p().remote().recvCq());
        assertWc(wc, WcStatus.SUCCESS, 9);

        // now the sender's own Q_Key differs from the receiver's: the same WR is dropped
        r.p().local().qp().modify(new QpAttributes().state(QpState.RTS).qkey(0x2222_2222));
        postSend(r.p().local().qp(), r.send(2, WrOpcode.SEND, 0, 8, 0x8000_0000 | 0x0BAD));
        assertWc(pollOne(r.p().local().sendCq()), WcStatus.SUCCESS, 2);
        assertNoCompletion(r.p().remote().recvCq());
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
    public void shouldRefuseRdmaOpcodesAtPostOnUd() {
        Rig r = rig(QpConfig.ud());
        assertPostSendRefused(r.p().local().qp(), r.send(1, WrOpcode.RDMA_WRITE, 0, 8, QpConfig.DEFAULT_QKEY)
                .remoteAddr(r.rmr().address()).rkey(r.rmr().rkey()), Errno.EINVAL);
        assertPostSendRefused(r.p().local().qp(), r.send(2, WrOpcode.RDMA_READ, 0, 8, QpConfig.DEFAULT_QKEY)
                .remoteAddr(r.rmr().address()).rkey(r.rmr().rkey()), Errno.EINVAL);
        assertNoCompletion(r.p().local().sendCq());
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
