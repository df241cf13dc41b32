// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.SharedReceiveQueue;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WorkCompletion;

/**
 * The ownership tree Context → {PD → {MR, QP, SRQ, AH}, CQ, channel}: a parent refuses to close with
 * EBUSY while children are open (ibv_dealloc_pd.3, ibv_destroy_cq.3, ibv_close_device), and the
 * fixture's leak check relies on exactly that.
 */
public abstract class AbstractOwnershipTest extends ConformanceTestBase {
    /** Constructor for subclasses. */
    protected AbstractOwnershipTest() {
    }


    /** Should fail context close with EBUSY when a PD is leaked. */
    @Test
    public void shouldFailContextCloseWithEbusyWhenAPdIsLeaked() {
        // A context of its own, so the fixture's teardown is not involved.
        Context ctx = fabric.device(0).open();
        ProtectionDomain leaked = ctx.allocPd();
        try {
            assertVerbsError(Errno.EBUSY, ctx::close);
        } finally {
            leaked.close();
        }
        ctx.close();
    }

    /** Should fail context close with EBUSY when a CQ or channel is open. */
    @Test
    public void shouldFailContextCloseWithEbusyWhenACqOrChannelIsOpen() {
        Context ctx = fabric.device(1).open();
        CompletionChannel ch = ctx.createCompChannel();
        assertVerbsError(Errno.EBUSY, ctx::close);
        CompletionQueue cq = ctx.createCq(8, null, 0);
        ch.close();
        assertVerbsError(Errno.EBUSY, ctx::close);
        cq.close();
        ctx.close();
    }

    /**
     * Should fail PD close with EBUSY while MR is registered.
     *
     * @throws Exception when the device fails the test unexpectedly
     */
    @Test
    public void shouldFailPdCloseWithEbusyWhileMrIsRegistered() throws Exception {
        ProtectionDomain pd = track(ctxA.allocPd());
        MemoryRegion mr = reg(pd, alloc(128), AccessFlag.LOCAL_WRITE);
        assertVerbsError(Errno.EBUSY, pd::close);
        release(mr);
        release(pd);
    }

    /**
     * Should fail PD close with EBUSY while QP SRQ or AH exists.
     *
     * @throws Exception when the device fails the test unexpectedly
     */
    @Test
    public void shouldFailPdCloseWithEbusyWhileQpSrqOrAhExists() throws Exception {
        ProtectionDomain pd = track(ctxA.allocPd());
        CompletionQueue cq = track(ctxA.createCq(16, null, 0));
        QueuePair qp = track(pd.createQp(new QpInitAttributes().type(QpType.RC).sendCq(cq).recvCq(cq)));
        assertVerbsError(Errno.EBUSY, pd::close);
        release(qp);
        SharedReceiveQueue srq = track(pd.createSrq(16, 1));
        assertVerbsError(Errno.EBUSY, pd::close);
        release(srq);
        if (!iwarp()) { // iWARP has no address handles (siw_create_ah does not exist: EOPNOTSUPP)
            AddressHandle ah = track(pd.createAh(Players.av(ctxB.queryGid(1, 0))));
            assertVerbsError(Errno.EBUSY, pd::close);
            release(ah);
        }
        release(pd);
    }

    /**
     * Should fail CQ close with EBUSY while QP uses it.
     *
     * @throws Exception when the device fails the test unexpectedly
     */
    @Test
    public void shouldFailCqCloseWithEbusyWhileQpUsesIt() throws Exception {
        ProtectionDomain pd = track(ctxA.allocPd());
        CompletionQueue sendCq = track(ctxA.createCq(16, null, 0));
        CompletionQueue recvCq = track(ctxA.createCq(16, null, 0));
        QueuePair qp = track(pd.createQp(new QpInitAttributes().type(QpType.RC).sendCq(sendCq).recvCq(recvCq)));
        assertVerbsError(Errno.EBUSY, sendCq::close);
        assertVerbsError(Errno.EBUSY, recvCq::close);
        release(qp);
        release(recvCq);
        release(sendCq);
    }

    /**
     * Should fail channel close with EBUSY while CQ uses it.
     *
     * @throws Exception when the device fails the test unexpectedly
     */
    @Test
    public void shouldFailChannelCloseWithEbusyWhileCqUsesIt() throws Exception {
        CompletionChannel ch = track(ctxA.createCompChannel());
        CompletionQueue cq = track(ctxA.createCq(16, ch, 0));
        assertSame(ch, cq.channel(), "cq.channel()");
        assertVerbsError(Errno.EBUSY, ch::close);
        release(cq);
        release(ch);
    }

    /**
     * Should fail SRQ close with EBUSY while QP is attached.
     *
     * @throws Exception when the device fails the test unexpectedly
     */
    @Test
    public void shouldFailSrqCloseWithEbusyWhileQpIsAttached() throws Exception {
        ProtectionDomain pd = track(ctxA.allocPd());
        CompletionQueue cq = track(ctxA.createCq(16, null, 0));
        SharedReceiveQueue srq = track(pd.createSrq(16, 1));
        QueuePair qp = track(pd.createQp(new QpInitAttributes().type(QpType.RC).sendCq(cq).recvCq(cq).srq(srq)));
        assertVerbsError(Errno.EBUSY, srq::close);
        release(qp);
        release(srq);
    }

    /** Should free everything when closed in reverse order. */
    @Test
    public void shouldFreeEverythingWhenClosedInReverseOrder() {
        Context ctx = fabric.device(0).open();
        CompletionChannel ch = ctx.createCompChannel();
        CompletionQueue cq = ctx.createCq(16, ch, 0);
        ProtectionDomain pd = ctx.allocPd();
        MemoryRegion mr = pd.regMr(alloc(256), AccessFlag.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE));
        SharedReceiveQueue srq = pd.createSrq(16, 1);
        QueuePair qp = pd.createQp(new QpInitAttributes().type(QpType.RC).sendCq(cq).recvCq(cq).srq(srq));
        // iWARP: RC only and no address handles, so a second RC QP stands in for the UD one
        QueuePair ud = pd.createQp(new QpInitAttributes().type(iwarp() ? QpType.RC : QpType.UD).sendCq(cq).recvCq(cq));
        AddressHandle ah = iwarp() ? null : pd.createAh(Players.av(ctxB.queryGid(1, 0)));
        Gid gid = ctx.queryGid(1, 0);
        assertEquals(ctxA.queryGid(1, 0), gid, "same device");

        if (ah != null) {
            ah.close();
        }
        ud.close();
        qp.close();
        srq.close();
        mr.close();
        pd.close();
        cq.close();
        ch.close();
        ctx.close();
    }

    /**
     * Should ignore or clearly reject double close.
     *
     * @throws Exception when the device fails the test unexpectedly
     */
    @Test
    public void shouldIgnoreOrClearlyRejectDoubleClose() throws Exception {
        ProtectionDomain pd = track(ctxA.allocPd());
        MemoryRegion mr = reg(pd, alloc(64), AccessFlag.LOCAL_WRITE);
        release(mr);
        closeAgain(mr);
        CompletionQueue cq = track(ctxA.createCq(4, null, 0));
        release(cq);
        closeAgain(cq);
        release(pd);
        closeAgain(pd);
        // A second close must not corrupt the parent: the context still closes cleanly in teardown,
        // and new objects still work.
        track(ctxA.allocPd());
    }

    /**
     * Should refuse poll on closed CQ as req notify does.
     *
     * @throws Exception when the device fails the test unexpectedly
     */
    @Test
    public void shouldRefusePollOnClosedCqAsReqNotifyDoes() throws Exception {
        CompletionChannel ch = track(ctxA.createCompChannel());
        CompletionQueue cq = track(ctxA.createCq(4, ch, 0));
        release(cq);
        // verbs would touch a destroyed CQ; rdma4j fails both the same way instead of answering "empty"
        VerbsException p1 = assertVerbsError(Errno.EINVAL, () -> cq.poll(new WorkCompletion()));
        assertTrue(p1.getMessage().contains("closed"), p1.getMessage());
        assertVerbsError(Errno.EINVAL, () -> cq.poll(new WorkCompletion[] {new WorkCompletion()}, 1));
        assertVerbsError(Errno.EINVAL, () -> cq.reqNotify(false));
    }

    /**
     * Should wake thread waiting for CQ event when its CQ and channel are closed.
     *
     * @throws Exception when the device fails the test unexpectedly
     */
    @Test
    public void shouldWakeThreadWaitingForCqEventWhenItsCqAndChannelAreClosed() throws Exception {
        CompletionChannel ch = track(ctxA.createCompChannel());
        CompletionQueue cq = track(ctxA.createCq(4, ch, 0));
        cq.reqNotify(false);
        CompletableFuture<Throwable> waiter = new CompletableFuture<>();
        Thread t = Thread.ofPlatform().name("getCqEvent-waiter").start(() -> {
            try {
                waiter.complete(new AssertionError("getCqEvent returned " + ch.getCqEvent(Duration.ofMinutes(5))));
            } catch (Throwable e) {
                waiter.complete(e);
            }
        });
        awaitBlocked(t); // the assertions below hold whether or not it blocked already
        release(cq);
        release(ch);
        Throwable woken = waiter.get(POLL_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        assertTrue(woken instanceof VerbsException ve && ve.errno() == Errno.EINVAL,
                "the waiter ends with a VerbsException (EINVAL), got " + woken);
        t.join(POLL_TIMEOUT.toMillis());
        assertTrue(!t.isAlive(), "waiter thread ended");
    }

    /**
     * Should wake thread waiting for async event when context is closed.
     *
     * @throws Exception when the device fails the test unexpectedly
     */
    @Test
    public void shouldWakeThreadWaitingForAsyncEventWhenContextIsClosed() throws Exception {
        Context ctx = fabric.device(0).open();
        CompletableFuture<Throwable> waiter = new CompletableFuture<>();
        Thread t = Thread.ofPlatform().name("getAsyncEvent-waiter").start(() -> {
            try {
                waiter.complete(new AssertionError("getAsyncEvent returned " + ctx.getAsyncEvent(Duration.ofMinutes(5))));
            } catch (Throwable e) {
                waiter.complete(e);
            }
        });
        awaitBlocked(t);
        ctx.close();
        Throwable woken = waiter.get(POLL_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        assertTrue(woken instanceof VerbsException ve && ve.errno() == Errno.EINVAL,
                "the waiter ends with a VerbsException (EINVAL), got " + woken);
        t.join(POLL_TIMEOUT.toMillis());
    }

    /** Waits (bounded) until {@code t} is parked or blocked; a remote wait may show as running, then it just returns. */
    private void awaitBlocked(Thread t) {
        long deadline = System.nanoTime() + quietWindow().toNanos();
        while (System.nanoTime() - deadline < 0 && t.getState() != Thread.State.TIMED_WAITING
                && t.getState() != Thread.State.WAITING) {
            Thread.onSpinWait();
        }
    }

    private static void closeAgain(AutoCloseable c) {
        try {
            c.close();
        } catch (VerbsException e) {
            // a clear error is acceptable (rdma-core returns EINVAL/ENOENT-style errors); it must name the errno
            if (e.errno() == null) {
                fail("double close threw a VerbsException without errno: " + e);
            }
        } catch (Exception e) {
            fail("double close of " + c + " threw " + e + " (expected nothing or a VerbsException)", e);
        }
    }
}
