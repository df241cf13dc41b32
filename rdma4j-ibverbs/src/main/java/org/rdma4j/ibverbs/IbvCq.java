// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.atomic.AtomicInteger;

import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WorkCompletion;

/**
 * A completion queue ({@code struct ibv_cq}). Polling goes through the context's {@code ops.poll_cq} into a
 * native array of {@code ibv_wc} owned by the CQ and reused on every poll (nothing is allocated per poll),
 * then into the caller's {@link WorkCompletion}s. Thread-safe: polls are serialised on the CQ.
 */
final class IbvCq extends IbvObject implements CompletionQueue {
    private static final long CONTEXT = IbvLayouts.offset(IbvLayouts.CQ, "context");
    private static final long CQE = IbvLayouts.offset(IbvLayouts.CQ, "cqe");
    /** ibv_wc entries polled per downcall. */
    static final int BATCH = 32;

    final IbvContext ctx;
    private final IbvChannel channel;
    private final MemorySegment pollFn;
    private final MemorySegment notifyFn;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment wcs = arena.allocate(IbvLayouts.WC.byteSize() * BATCH, 8);
    private final Object pollLock = new Object();
    private final AtomicInteger unackedEvents = new AtomicInteger();
    private volatile int capacity;

    private IbvCq(IbvContext ctx, MemorySegment ptr, IbvChannel channel) {
        super(ptr);
        this.ctx = ctx;
        this.channel = channel;
        this.pollFn = ctx.pollCqFn;
        this.notifyFn = ctx.reqNotifyCqFn;
        this.capacity = ptr.get(ValueLayout.JAVA_INT, CQE);
    }

    static IbvCq create(IbvContext ctx, int cqe, IbvChannel channel, int compVector) {
        if (cqe < 1) {
            throw new VerbsException(Errno.EINVAL, "ibv_create_cq: cqe=" + cqe + " (expected >= 1)");
        }
        if (channel != null) {
            channel.enter("ibv_create_cq");
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment ch = channel == null ? MemorySegment.NULL : channel.ptr;
            MemorySegment p = (MemorySegment) Ibv.CREATE_CQ.invokeExact(st, ctx.ptr, cqe, MemorySegment.NULL, ch,
                    compVector);
            if (p.equals(MemorySegment.NULL)) {
                throw IbvErrors.failed("ibv_create_cq", Ibv.errno(st), "cqe " + cqe + ", comp_vector " + compVector
                        + " on " + ctx.device.name());
            }
            p = p.reinterpret(IbvLayouts.CQ.byteSize());
            if (p.get(ValueLayout.ADDRESS, CONTEXT).address() != ctx.ptr.address()) {
                throw new VerbsException(Errno.EOPNOTSUPP, "libibverbs' struct ibv_cq differs from the layout this"
                        + " provider was written for (ibv_cq.context is not the context)");
            }
            IbvCq cq = new IbvCq(ctx, p, channel);
            ctx.cqs.put(p.address(), cq);
            if (channel != null) {
                channel.users.incrementAndGet();
            }
            return cq;
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        } finally {
            if (channel != null) {
                channel.exit();
            }
        }
    }

    @Override
    String describe() {
        return "CQ of " + capacity + " on " + ctx.device.name();
    }

    @Override
    public int capacity() {
        return capacity;
    }

    @Override
    public CompletionChannel channel() {
        return channel;
    }

    @Override
    public int poll(WorkCompletion[] out, int max) {
        int want = Math.min(max, out.length);
        if (want <= 0) {
            return 0;
        }
        try {
            int total = 0;
            // the lock is the poller's use of the CQ: close refuses new calls, then takes it before the native
            // destroy, so a poller inside runs to its end and a later one is refused here
            synchronized (pollLock) {
                if (uses.isClosed()) {
                    throw closed();
                }
                while (total < want) {
                    int n = Math.min(BATCH, want - total);
                    int got = (int) Ibv.POLL_CQ.invokeExact(pollFn, ptr, n, wcs);
                    if (got < 0) {
                        throw new VerbsException(Errno.EIO, "ibv_poll_cq on " + describe() + " failed (" + got + ")");
                    }
                    for (int i = 0; i < got; i++) {
                        WrCodec.readWc(wcs, i * IbvLayouts.WC.byteSize(), out[total + i]);
                    }
                    total += got;
                    if (got < n) {
                        break;
                    }
                }
            }
            return total;
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    private VerbsException closed() {
        return new VerbsException(Errno.EINVAL, "ibv_poll_cq: " + describe() + " is closed (destroyed)");
    }

    @Override
    public boolean poll(WorkCompletion wc) {
        try {
            synchronized (pollLock) { // the poller's use of the CQ, as in poll(WorkCompletion[], int)
                if (uses.isClosed()) {
                    throw closed();
                }
                int got = (int) Ibv.POLL_CQ.invokeExact(pollFn, ptr, 1, wcs);
                if (got < 0) {
                    throw new VerbsException(Errno.EIO, "ibv_poll_cq on " + describe() + " failed (" + got + ")");
                }
                if (got == 0) {
                    return false;
                }
                WrCodec.readWc(wcs, 0, wc);
                return true;
            }
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    @Override
    public void reqNotify(boolean solicitedOnly) {
        enter("ibv_req_notify_cq");
        try {
            int rc = (int) Ibv.REQ_NOTIFY_CQ.invokeExact(notifyFn, ptr, solicitedOnly ? 1 : 0);
            if (rc != 0) {
                throw IbvErrors.failed("ibv_req_notify_cq", Math.abs(rc), describe());
            }
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        } finally {
            exit();
        }
    }

    /** One more event of this CQ was taken from its channel. */
    void eventDelivered() {
        unackedEvents.incrementAndGet();
    }

    @Override
    public void ackEvents(int count) {
        if (count <= 0 || !uses.tryEnter()) {
            return; // a destroyed CQ acknowledged its events when it was destroyed
        }
        try {
            int n = Math.min(count, unackedEvents.get());
            if (n > 0) {
                unackedEvents.addAndGet(-n);
                ackNative(n);
            }
        } finally {
            uses.exit();
        }
    }

    void ackNative(int n) {
        try (Arena a = Arena.ofConfined()) {
            Ibv.ACK_CQ_EVENTS.invokeExact(Ibv.newCallState(a), ptr, n);
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    @Override
    public void resize(int cqe) {
        if (cqe < 1) {
            throw new VerbsException(Errno.EINVAL, "ibv_resize_cq: cqe=" + cqe + " (expected >= 1)");
        }
        enter("ibv_resize_cq");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            int rc;
            synchronized (pollLock) { // providers reallocate the queue: no poll may run meanwhile
                rc = (int) Ibv.RESIZE_CQ.invokeExact(st, ptr, cqe);
            }
            if (rc != 0) {
                throw IbvErrors.failed("ibv_resize_cq", Ibv.err(rc, st), describe() + " to " + cqe);
            }
            capacity = ptr.get(ValueLayout.JAVA_INT, CQE);
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        } finally {
            exit();
        }
    }

    @Override
    public void close() {
        if (!beginDestroy("ibv_destroy_cq")) {
            return;
        }
        // ibv_destroy_cq waits until every completion event the kernel reported for the CQ is acknowledged
        // (comp_events_completed) and every async event too: acknowledge them rather than wait for ever
        if (channel != null) {
            channel.drainFor(this);
        }
        int n = unackedEvents.getAndSet(0);
        if (n > 0) {
            ackNative(n);
        }
        ctx.events.release(this);
        // pollers hold pollLock while inside the native CQ and its scratch ibv_wc array (their use of it)
        synchronized (pollLock) {
            try (Arena a = Arena.ofConfined()) {
                MemorySegment st = Ibv.newCallState(a);
                int rc = (int) Ibv.DESTROY_CQ.invokeExact(st, ptr);
                if (rc != 0) {
                    destroyFailed();
                    throw IbvErrors.failed("ibv_destroy_cq", Ibv.err(rc, st), describe());
                }
            } catch (VerbsException e) {
                throw e;
            } catch (Throwable t) {
                throw Ibv.rethrow(t);
            }
        }
        ctx.cqs.remove(ptr.address());
        ctx.children.remove(this);
        if (channel != null) {
            channel.users.decrementAndGet();
        }
        arena.close();
    }
}
