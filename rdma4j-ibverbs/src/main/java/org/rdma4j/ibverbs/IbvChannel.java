// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayDeque;

import org.rdma4j.libc.Errors;
import org.rdma4j.libc.Libc;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.VerbsException;

/**
 * A completion channel ({@code struct ibv_comp_channel}): its descriptor is made non-blocking, a wait is
 * poll(2) with the caller's timeout, then {@code ibv_get_cq_event}. Thread-safe.
 */
final class IbvChannel extends IbvObject implements CompletionChannel {
    private static final long FD = IbvLayouts.offset(IbvLayouts.COMP_CHANNEL, "fd");

    final IbvContext ctx;
    final int fd;
    /** Events read while a CQ was being destroyed that belong to other CQs. */
    private final ArrayDeque<IbvCq> backlog = new ArrayDeque<>();
    private final Object lock = new Object();
    private final Arena arena = Arena.ofShared();
    private final MemorySegment st = Ibv.newCallState(arena);
    private final MemorySegment cqOut = arena.allocate(ValueLayout.ADDRESS);
    /** Made readable by close, to end the polls of threads waiting in getCqEvent. */
    private final int wakeFd;
    private final MemorySegment ctxOut = arena.allocate(ValueLayout.ADDRESS);

    private IbvChannel(IbvContext ctx, MemorySegment ptr) {
        super(ptr);
        this.ctx = ctx;
        this.fd = ptr.get(ValueLayout.JAVA_INT, FD);
        MemorySegment lst = Libc.newCallState(arena);
        this.wakeFd = Libc.eventfd(lst, 0, Libc.EFD_NONBLOCK | Libc.EFD_CLOEXEC);
        if (wakeFd < 0) {
            throw IbvErrors.failed("eventfd", Libc.errno(lst), "completion channel of " + ctx.device.name());
        }
    }

    static IbvChannel create(IbvContext ctx) {
        MemorySegment p;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            p = (MemorySegment) Ibv.CREATE_COMP_CHANNEL.invokeExact(st, ctx.ptr);
            if (p.equals(MemorySegment.NULL)) {
                throw IbvErrors.failed("ibv_create_comp_channel", Ibv.errno(st), ctx.device.name());
            }
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
        IbvChannel ch = new IbvChannel(ctx, p.reinterpret(IbvLayouts.COMP_CHANNEL.byteSize()));
        try {
            IbvContext.setNonBlocking(ch.fd, "a completion channel of " + ctx.device.name());
        } catch (RuntimeException e) {
            ch.destroy();
            throw e;
        }
        return ch;
    }

    @Override
    String describe() {
        return "completion channel (fd " + fd + ") on " + ctx.device.name();
    }

    @Override
    public CompletionQueue getCqEvent(Duration timeout) {
        enter("ibv_get_cq_event");
        try {
            synchronized (lock) {
                IbvCq b = backlog.poll();
                if (b != null) {
                    return b;
                }
            }
            long ms = timeout.isNegative() ? 0 : Math.min(Integer.MAX_VALUE, (timeout.toNanos() + 999_999) / 1_000_000);
            long deadline = System.nanoTime() + timeout.toNanos();
            while (true) {
                synchronized (lock) {
                    IbvCq cq = readOne();
                    if (cq != null) {
                        return cq;
                    }
                }
                if (ms == 0) {
                    return null;
                }
                long left = (deadline - System.nanoTime() + 999_999) / 1_000_000;
                if (left <= 0) {
                    return null;
                }
                try (Arena a = Arena.ofConfined()) { // a blocking wait: one allocation is nothing next to it
                    MemorySegment pst = Libc.newCallState(a);
                    MemorySegment fds = a.allocate(2 * Libc.POLLFD_SIZE, 8);
                    fds.set(ValueLayout.JAVA_INT, 0, fd);
                    fds.set(ValueLayout.JAVA_SHORT, 4, Libc.POLLIN);
                    fds.set(ValueLayout.JAVA_INT, Libc.POLLFD_SIZE, wakeFd);
                    fds.set(ValueLayout.JAVA_SHORT, Libc.POLLFD_SIZE + 4, Libc.POLLIN);
                    int r = Libc.poll(pst, fds, 2, (int) Math.min(left, Integer.MAX_VALUE));
                    if (r < 0 && Libc.errno(pst) != Errors.EINTR) {
                        throw IbvErrors.failed("poll(completion channel)", Libc.errno(pst), describe());
                    }
                }
                if (isClosed()) {
                    throw new VerbsException(org.rdma4j.verbs.Errno.EINVAL, "ibv_get_cq_event: " + describe()
                            + " was closed while waiting");
                }
            }
        } finally {
            exit();
        }
    }

    /** Caller holds {@link #lock}. @return the CQ of the next event, or null when none is queued */
    private IbvCq readOne() {
        while (true) {
            int rc;
            try {
                rc = (int) Ibv.GET_CQ_EVENT.invokeExact(st, ptr, cqOut, ctxOut);
            } catch (Throwable t) {
                throw Ibv.rethrow(t);
            }
            if (rc != 0) {
                int e = Ibv.errno(st);
                if (e == Errors.EAGAIN || e == Errors.EINTR) {
                    return null;
                }
                throw IbvErrors.failed("ibv_get_cq_event", e, describe());
            }
            long addr = cqOut.get(ValueLayout.ADDRESS, 0).address();
            IbvCq cq = ctx.cqs.get(addr);
            if (cq == null || cq.isClosed()) {
                // a CQ being destroyed: its events are acknowledged by its close
                if (cq != null) {
                    cq.ackNative(1);
                }
                continue;
            }
            cq.eventDelivered();
            return cq;
        }
    }

    /**
     * Before a CQ of this channel is destroyed: reads every queued event (ibv_destroy_cq waits until all the
     * events the kernel reported for the CQ are acknowledged) and keeps those of other CQs for later.
     *
     * @param dying the CQ being destroyed (already marked closed)
     */
    void drainFor(IbvCq dying) {
        synchronized (lock) {
            while (true) {
                int rc;
                try {
                    rc = (int) Ibv.GET_CQ_EVENT.invokeExact(st, ptr, cqOut, ctxOut);
                } catch (Throwable t) {
                    throw Ibv.rethrow(t);
                }
                if (rc != 0) {
                    return;
                }
                IbvCq cq = ctx.cqs.get(cqOut.get(ValueLayout.ADDRESS, 0).address());
                if (cq == dying || cq == null || cq.isClosed()) {
                    if (cq != null) {
                        cq.ackNative(1);
                    }
                } else {
                    cq.eventDelivered();
                    backlog.add(cq);
                }
            }
        }
    }

    @Override
    void wakeWaiters() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment one = a.allocate(ValueLayout.JAVA_LONG);
            one.set(ValueLayout.JAVA_LONG, 0, 1L);
            Libc.write(Libc.newCallState(a), wakeFd, one, 8);
        }
    }

    @Override
    public void close() {
        if (!beginDestroy("ibv_destroy_comp_channel")) {
            return;
        }
        destroy();
        ctx.children.remove(this);
    }

    private void destroy() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment cst = Ibv.newCallState(a);
            int rc = (int) Ibv.DESTROY_COMP_CHANNEL.invokeExact(cst, ptr);
            if (rc != 0) {
                destroyFailed();
                throw IbvErrors.failed("ibv_destroy_comp_channel", Ibv.err(rc, cst), describe());
            }
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
        try (Arena a = Arena.ofConfined()) {
            Libc.close(Libc.newCallState(a), wakeFd);
        }
        arena.close();
    }
}
