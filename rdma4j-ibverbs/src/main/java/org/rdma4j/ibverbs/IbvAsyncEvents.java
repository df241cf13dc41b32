// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.rdma4j.libc.Errors;
import org.rdma4j.libc.Libc;
import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.AsyncEventType;

/**
 * The context's asynchronous events, read by one agent thread ({@code rdma4j-ibv-async-<dev>}) from the
 * non-blocking async descriptor into a queue that {@link #take} serves.
 *
 * <p>Why a thread: {@code ibv_destroy_qp}, {@code ibv_destroy_cq} and {@code ibv_destroy_srq} block until
 * every async event the kernel has queued for the object has been acknowledged (rdma-core
 * {@code ibv_cmd_destroy_qp} waits for {@code events_completed == events_reported}), and an event queued
 * but not yet read can only be acknowledged by someone who reads it. A program that destroys a QP while
 * an event for it sits unread, with nobody reading, would hang for ever. The agent reads continuously and
 * acknowledges at once every event of an object being destroyed ({@link #release}), so a destroy never
 * waits on the application. Events of live objects wait in the queue until the application takes and
 * acknowledges them, as in C.
 */
final class IbvAsyncEvents implements Runnable {
    private static final System.Logger LOG = System.getLogger("org.rdma4j.ibverbs");
    private static final long EVENT_TYPE = IbvLayouts.offset(IbvLayouts.ASYNC_EVENT, "event_type");
    /** ibv_event_type → the verbs API's type (the two enums order SRQ_ERR and SRQ_LIMIT_REACHED differently). */
    static final AsyncEventType[] TYPES = {
            AsyncEventType.CQ_ERR, AsyncEventType.QP_FATAL, AsyncEventType.QP_REQ_ERR, AsyncEventType.QP_ACCESS_ERR,
            AsyncEventType.COMM_EST, AsyncEventType.SQ_DRAINED, AsyncEventType.PATH_MIG, AsyncEventType.PATH_MIG_ERR,
            AsyncEventType.DEVICE_FATAL, AsyncEventType.PORT_ACTIVE, AsyncEventType.PORT_ERR,
            AsyncEventType.LID_CHANGE, AsyncEventType.PKEY_CHANGE, AsyncEventType.SM_CHANGE, AsyncEventType.SRQ_ERR,
            AsyncEventType.SRQ_LIMIT_REACHED, AsyncEventType.QP_LAST_WQE_REACHED, AsyncEventType.CLIENT_REREGISTER,
            AsyncEventType.GID_CHANGE};

    /** Handed to threads waiting in {@link #take} when the context closes. */
    static final AsyncEvent CLOSED = new AsyncEvent(AsyncEventType.DEVICE_FATAL, null, null, null, 0);

    private final IbvContext ctx;
    private final LinkedBlockingQueue<AsyncEvent> queue = new LinkedBlockingQueue<>();
    /** Events handed out or queued but not acknowledged, with the native struct to acknowledge them. */
    private final Map<AsyncEvent, Native> unacked = new IdentityHashMap<>();
    private final Object lock = new Object();
    private final Arena arena = Arena.ofShared();
    private final MemorySegment pollFds = arena.allocate(2 * Libc.POLLFD_SIZE, 8);
    private final MemorySegment event = arena.allocate(IbvLayouts.ASYNC_EVENT);
    private final MemorySegment ackEvent = arena.allocate(IbvLayouts.ASYNC_EVENT);
    private final MemorySegment st = Ibv.newCallState(arena);
    private final MemorySegment ackSt = Ibv.newCallState(arena);
    private final int wakeFd;
    private final Thread thread;
    private volatile boolean stopping;

    /** An unacknowledged event as libibverbs returned it. */
    private record Native(long element, int type, IbvObject object) {
    }

    IbvAsyncEvents(IbvContext ctx) {
        this.ctx = ctx;
        IbvContext.setNonBlocking(ctx.asyncFd, "the async event descriptor of " + ctx.device.name());
        MemorySegment lst = Libc.newCallState(arena);
        wakeFd = Libc.eventfd(lst, 0, Libc.EFD_NONBLOCK | Libc.EFD_CLOEXEC);
        if (wakeFd < 0) {
            arena.close();
            throw IbvErrors.failed("eventfd", Libc.errno(lst), "async event agent of " + ctx.device.name());
        }
        thread = Thread.ofPlatform().daemon().name("rdma4j-ibv-async-" + ctx.device.name()).unstarted(this);
    }

    void start() {
        thread.start();
    }

    @Override
    public void run() {
        pollFds.set(ValueLayout.JAVA_INT, 0, ctx.asyncFd);
        pollFds.set(ValueLayout.JAVA_SHORT, 4, Libc.POLLIN);
        pollFds.set(ValueLayout.JAVA_INT, Libc.POLLFD_SIZE, wakeFd);
        pollFds.set(ValueLayout.JAVA_SHORT, Libc.POLLFD_SIZE + 4, Libc.POLLIN);
        while (!stopping) {
            try {
                pollFds.set(ValueLayout.JAVA_SHORT, 6, (short) 0);
                pollFds.set(ValueLayout.JAVA_SHORT, Libc.POLLFD_SIZE + 6, (short) 0);
                int n = Libc.poll(st, pollFds, 2, 1000);
                if (n < 0 && Libc.errno(st) != Errors.EINTR) {
                    LOG.log(System.Logger.Level.ERROR, "async events of {0}: poll failed: {1}; events are no longer read",
                            ctx.device.name(), Errors.describe(Libc.errno(st)));
                    return;
                }
                drain();
            } catch (Throwable t) {
                // never die silently: log and go on (a burst of failures is bounded by the poll timeout)
                LOG.log(System.Logger.Level.ERROR, "async event agent of " + ctx.device.name() + " failed", t);
            }
        }
    }

    /** Reads every queued event (the descriptor is non-blocking: EAGAIN ends it). */
    private void drain() throws Throwable {
        while (!stopping) {
            int rc = (int) Ibv.GET_ASYNC_EVENT.invokeExact(st, ctx.ptr, event);
            if (rc != 0) {
                int e = Ibv.errno(st);
                if (e != Errors.EAGAIN && e != Errors.EINTR) {
                    LOG.log(System.Logger.Level.WARNING, "ibv_get_async_event({0}) failed: {1}", ctx.device.name(),
                            Errors.describe(e));
                }
                return;
            }
            deliver(event.get(ValueLayout.JAVA_LONG, 0), event.get(ValueLayout.JAVA_INT, EVENT_TYPE));
        }
    }

    private void deliver(long element, int type) {
        AsyncEventType t = type >= 0 && type < TYPES.length ? TYPES[type] : null;
        IbvObject obj = null;
        AsyncEvent ev = null;
        if (t != null) {
            switch (t) {
                case CQ_ERR -> {
                    IbvCq cq = ctx.cqs.get(element);
                    obj = cq;
                    ev = cq == null ? null : new AsyncEvent(t, null, cq, null, 0);
                }
                case SRQ_ERR, SRQ_LIMIT_REACHED -> {
                    IbvSrq srq = ctx.srqs.get(element);
                    if (srq != null && t == AsyncEventType.SRQ_LIMIT_REACHED) {
                        srq.limitReached();
                    }
                    obj = srq;
                    ev = srq == null ? null : new AsyncEvent(t, null, null, srq, 0);
                }
                case DEVICE_FATAL -> ev = new AsyncEvent(t, null, null, null, 0);
                case PORT_ACTIVE, PORT_ERR, LID_CHANGE, PKEY_CHANGE, SM_CHANGE, CLIENT_REREGISTER, GID_CHANGE ->
                        ev = new AsyncEvent(t, null, null, null, (int) element);
                default -> {
                    IbvQp qp = ctx.qps.get(element);
                    obj = qp;
                    ev = qp == null ? null : new AsyncEvent(t, qp, null, null, 0);
                }
            }
        }
        synchronized (lock) {
            if (ev == null || (obj != null && obj.isClosed())) {
                // an unknown type (IBV_EVENT_WQ_FATAL), an object we do not know, or one being destroyed:
                // acknowledge at once so that no destroy waits for it
                ack(element, type);
                if (ev == null) {
                    LOG.log(System.Logger.Level.DEBUG, "async event type {0} on {1} acknowledged unseen", type,
                            ctx.device.name());
                }
                return;
            }
            unacked.put(ev, new Native(element, type, obj));
        }
        queue.add(ev);
    }

    /** Caller holds {@link #lock}. */
    private void ack(long element, int type) {
        ackEvent.set(ValueLayout.JAVA_LONG, 0, element);
        ackEvent.set(ValueLayout.JAVA_INT, EVENT_TYPE, type);
        try {
            Ibv.ACK_ASYNC_EVENT.invokeExact(ackSt, ackEvent);
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    /**
     * {@return the next event, or null}
     *
     * @param timeout how long to wait; zero polls
     */
    AsyncEvent take(Duration timeout) {
        try {
            AsyncEvent ev = timeout.isZero() || timeout.isNegative() ? queue.poll()
                    : queue.poll(timeout.toNanos(), TimeUnit.NANOSECONDS);
            if (ev == CLOSED) {
                queue.add(CLOSED); // for the next waiter
            }
            return ev;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    /**
     * Acknowledges an event taken with {@link #take} (twice, or one of another context: ignored).
     *
     * @param ev the event
     */
    void ack(AsyncEvent ev) {
        synchronized (lock) {
            Native n = unacked.remove(ev);
            if (n != null) {
                queue.remove(ev);
                ack(n.element, n.type);
            }
        }
    }

    /**
     * Acknowledges every event of an object about to be destroyed (already marked closed, so the agent
     * acknowledges later ones at once) and drops them from the queue.
     *
     * @param obj a QP, CQ or SRQ
     */
    void release(IbvObject obj) {
        synchronized (lock) {
            List<AsyncEvent> mine = new ArrayList<>();
            for (Map.Entry<AsyncEvent, Native> e : unacked.entrySet()) {
                if (e.getValue().object == obj) {
                    mine.add(e.getKey());
                }
            }
            for (AsyncEvent ev : mine) {
                Native n = unacked.remove(ev);
                queue.remove(ev);
                ack(n.element, n.type);
            }
        }
    }

    /** Ends every wait in {@link #take}: the context is closing. */
    void wakeTakers() {
        queue.add(CLOSED);
    }

    /** Stops the agent and acknowledges what is left (before ibv_close_device). */
    void stop() {
        stopping = true;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment one = a.allocate(ValueLayout.JAVA_LONG);
            one.set(ValueLayout.JAVA_LONG, 0, 1L);
            Libc.write(Libc.newCallState(a), wakeFd, one, 8);
        }
        try {
            thread.join(10_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (thread.isAlive()) {
            LOG.log(System.Logger.Level.WARNING, "async event agent of {0} did not stop", ctx.device.name());
            return; // keep its memory: it may still be inside a call
        }
        synchronized (lock) {
            for (Native n : unacked.values()) {
                ack(n.element, n.type);
            }
            unacked.clear();
            queue.clear();
        }
        try (Arena a = Arena.ofConfined()) {
            Libc.close(Libc.newCallState(a), wakeFd);
        }
        arena.close();
    }
}
