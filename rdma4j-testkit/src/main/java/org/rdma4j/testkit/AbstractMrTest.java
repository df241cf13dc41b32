// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.Set;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcOpcode;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/** ibv_reg_mr access rules, keys and what happens to a deregistered region (verbs-dma.md 4.1, 4.2). */
public abstract class AbstractMrTest extends ConformanceTestBase {
    /** Constructor for subclasses. */
    protected AbstractMrTest() {
    }


    /** Should reject remote write without local write. */
    @Test
    public void shouldRejectRemoteWriteWithoutLocalWrite() {
        ProtectionDomain pd = track(ctxA.allocPd());
        // ibv_reg_mr.3: "If IBV_ACCESS_REMOTE_WRITE or IBV_ACCESS_REMOTE_ATOMIC is set, then
        // IBV_ACCESS_LOCAL_WRITE must be set too." Kernel ib_check_mr_access: -EINVAL.
        assertVerbsError(Errno.EINVAL, () -> track(pd.regMr(alloc(4096), AccessFlag.of(AccessFlag.REMOTE_WRITE))));
        assertVerbsError(Errno.EINVAL, () -> track(pd.regMr(alloc(4096),
                AccessFlag.of(AccessFlag.REMOTE_WRITE, AccessFlag.REMOTE_READ))));
    }

    /** Should reject remote atomic without local write. */
    @Test
    public void shouldRejectRemoteAtomicWithoutLocalWrite() {
        ProtectionDomain pd = track(ctxA.allocPd());
        assertVerbsError(Errno.EINVAL, () -> track(pd.regMr(alloc(4096), AccessFlag.of(AccessFlag.REMOTE_ATOMIC))));
    }

    /** Should reject heap segment. */
    @Test
    public void shouldRejectHeapSegment() {
        ProtectionDomain pd = track(ctxA.allocPd());
        MemorySegment heap = MemorySegment.ofArray(new byte[4096]);
        assertVerbsError(Errno.EINVAL, () -> track(pd.regMr(heap, AccessFlag.of(AccessFlag.LOCAL_WRITE))));
    }

    /** Should reject zero-length segment. */
    @Test
    public void shouldRejectZeroLengthSegment() {
        ProtectionDomain pd = track(ctxA.allocPd());
        // The API documents EINVAL for an empty segment (ProtectionDomain.regMr).
        assertVerbsError(Errno.EINVAL, () -> track(pd.regMr(alloc(64).asSlice(0, 0),
                AccessFlag.of(AccessFlag.LOCAL_WRITE))));
    }

    /** Should describe the registered memory. */
    @Test
    public void shouldDescribeTheRegisteredMemory() {
        ProtectionDomain pd = track(ctxA.allocPd());
        MemorySegment seg = alloc(8192).asSlice(128, 4096);
        Set<AccessFlag> access = EnumSet.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_READ);
        MemoryRegion mr = track(pd.regMr(seg, access));
        assertSame(pd, mr.pd(), "pd");
        assertEquals(seg.address(), mr.address(), "address");
        assertEquals(4096, mr.length(), "length");
        assertEquals(access, mr.access(), "access");
        assertEquals(seg.address(), mr.segment().address(), "segment address");
        // local read is always allowed: registering with no flag at all is valid
        track(pd.regMr(alloc(64), EnumSet.noneOf(AccessFlag.class)));
    }

    /** Should give different keys when same memory is registered twice. */
    @Test
    public void shouldGiveDifferentKeysWhenSameMemoryIsRegisteredTwice() {
        ProtectionDomain pd = track(ctxA.allocPd());
        MemorySegment seg = alloc(4096);
        MemoryRegion first = track(pd.regMr(seg, AccessFlag.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE)));
        MemoryRegion second = track(pd.regMr(seg, AccessFlag.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE)));
        assertNotEquals(first.lkey(), second.lkey(), "lkeys of two registrations");
        assertNotEquals(first.rkey(), second.rkey(), "rkeys of two registrations");
    }

    /** Should randomise low eight key bits when registering. */
    @Test
    public void shouldRandomiseLowEightKeyBitsWhenRegistering() {
        // verbs-dma.md 4.2 / rxe rxe_mr_init: key = index << 8 | random 8-bit variant. Sixteen
        // registrations all with the same variant happen with probability 256^-15.
        ProtectionDomain pd = track(ctxA.allocPd());
        Set<Integer> variants = new HashSet<>();
        Set<Integer> indexes = new HashSet<>();
        for (int i = 0; i < 16; i++) {
            MemoryRegion mr = track(pd.regMr(alloc(64), AccessFlag.of(AccessFlag.LOCAL_WRITE)));
            variants.add(mr.lkey() & 0xFF);
            indexes.add(mr.lkey() >>> 8);
        }
        if (!iwarp()) { // siw's STag key is always 0 (siw_mem.c: stag = id << 8), rxe's random
            assertTrue(variants.size() > 1, "low 8 bits of 16 lkeys are all " + variants);
        }
        assertEquals(16, indexes.size(), "16 live MRs share a key index: " + indexes);
    }

    /**
     * Should fail with LOC_PROT_ERR when sending from deregistered MR.
     *
     * @throws Exception when the device fails the test unexpectedly
     */
    @NotOnIwarp("siw_query_qp reports no qp_state (siw_verbs.c): the requester state after the local error cannot be read back")
    @Test
    public void shouldFailWithLocQpOpErrWhenSendingFromDeregisteredMr() throws Exception {
        QpPair p = players().rc(QpConfig.rc());
        MemoryRegion src = regAll(p.local().pd(), 256);
        MemoryRegion dst = regAll(p.remote().pd(), 256);
        postRecv(p.remote().qp(), 7, dst, 0, 256);
        int staleLkey = src.lkey();
        long addr = src.address();
        release(src);

        postSend(p.local().qp(), new SendWorkRequest().wrId(1).opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                .singleSge(addr, 64, staleLkey));

        // the L_Key names no MR any more: rxe lookup_mr fails, copy_data -EINVAL => LOC_QP_OP_ERR (seen in the
        // VM with kernel 6.1: interop/rxe-probes, lkey-send-bad-lkey)
        assertWc(pollOne(p.local().sendCq()), WcStatus.LOC_QP_OP_ERR, 1);
        assertEquals(QpState.ERR, p.local().qp().state(), "requester after a local key error");
        // nothing was sent: the responder's receive stays posted
        assertNoCompletion(p.remote().recvCq());
    }

    /**
     * Should fail with REM_ACCESS_ERR when writing to deregistered MR.
     *
     * @throws Exception when the device fails the test unexpectedly
     */
    @NotOnIwarp("an RDMA WRITE is not acknowledged: the requester completes it once TCP has it and the responder answers a bad STag with a TERMINATE, not a remote error status (seen in the VM on siw0)")
    @Test
    public void shouldFailWithRemAccessErrWhenWritingToDeregisteredMr() throws Exception {
        QpPair p = players().rc(QpConfig.rc());
        MemoryRegion src = regAll(p.local().pd(), 256);
        MemoryRegion dst = regAll(p.remote().pd(), 256);
        long remoteAddr = dst.address();
        int staleRkey = dst.rkey();
        release(dst);

        postSend(p.local().qp(), sendWr(1, WrOpcode.RDMA_WRITE, src, 0, 64).remoteAddr(remoteAddr).rkey(staleRkey));

        assertWc(pollOne(p.local().sendCq()), WcStatus.REM_ACCESS_ERR, 1);
        assertEquals(QpState.ERR, p.local().qp().state(), "requester after REM_ACCESS_ERR");
    }

    /** Should fail with LOC_PROT_ERR when lkey belongs to another PD. */
    @Test
    public void shouldFailWithLocQpOpErrWhenLkeyBelongsToAnotherPd() {
        QpPair p = players().rc(QpConfig.rc());
        ProtectionDomain otherPd = track(ctxA.allocPd());
        MemoryRegion foreign = regAll(otherPd, 256);

        // rxe lookup_mr: mr->pd must equal the QP's PD, else no MR is found and copy_data fails with -EINVAL:
        // LOC_QP_OP_ERR (seen in the VM with kernel 6.1: interop/rxe-probes, lkey-send-mr-of-other-pd)
        postSend(p.local().qp(), sendWr(1, WrOpcode.SEND, foreign, 0, 64));

        assertWc(pollOne(p.local().sendCq()), WcStatus.LOC_QP_OP_ERR, 1);
    }

    /** Should fail with REM_ACCESS_ERR when reading MR without remote read. */
    @NotOnIwarp("siw 6.1 serves an RDMA READ from an MR without REMOTE_READ: siw_qp_tx.c checks the READ RESPONSE source with siw_check_sgl_tx(qp->pd, wqe, 0), permissions 0 (a kernel bug; seen in the VM: the READ completes SUCCESS)")
    @Test
    public void shouldFailWithRemAccessErrWhenReadingMrWithoutRemoteRead() {
        QpPair p = players().rc(QpConfig.rc());
        MemoryRegion sink = regAll(p.local().pd(), 256);
        MemoryRegion noRead = reg(p.remote().pd(), alloc(256), AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE);

        postSend(p.local().qp(), rdmaWr(1, WrOpcode.RDMA_READ, sink, noRead, 64));

        assertWc(pollOne(p.local().sendCq()), WcStatus.REM_ACCESS_ERR, 1);
    }

    /**
     * Should allow access through a second registration after the first is deregistered.
     *
     * @throws Exception when the device fails the test unexpectedly
     */
    @Test
    public void shouldAllowAccessThroughASecondRegistrationAfterTheFirstIsDeregistered() throws Exception {
        QpPair p = players().rc(QpConfig.rc());
        MemorySegment mem = alloc(256);
        MemoryRegion first = reg(p.remote().pd(), mem, AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE);
        MemoryRegion second = reg(p.remote().pd(), mem, AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE);
        release(first);
        MemoryRegion src = regAll(p.local().pd(), 256);
        byte[] data = pattern(64, 3);
        write(src.segment(), 0, data);

        postSend(p.local().qp(), rdmaWr(1, WrOpcode.RDMA_WRITE, src, second, 64));

        WorkCompletion wc = pollOne(p.local().sendCq());
        assertWc(wc, WcStatus.SUCCESS, 1);
        assertEquals(WcOpcode.RDMA_WRITE, wc.opcode());
        assertBytes(data, mem, 0, "written through the surviving registration");
    }
}
