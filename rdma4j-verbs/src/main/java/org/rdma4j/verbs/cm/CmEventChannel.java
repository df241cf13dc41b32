// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.cm;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.spi.CmEventInfo;

/**
 * An event channel ({@code struct rdma_event_channel}): the queue the events of its CM IDs arrive on,
 * in the order each ID's events happened. Take them blocking ({@link #getEvent()},
 * {@link #getEvent(Duration)}) or not ({@link #pollEvent()}); acknowledge each
 * ({@link CmEvent#ack()}). Closing fails with EBUSY while CM IDs use the channel. Thread-safe: several
 * threads may wait on one channel; each event goes to one of them.
 */
public final class CmEventChannel implements AutoCloseable {
    private final RdmaCm cm;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition arrived = lock.newCondition();
    private final ArrayDeque<CmEvent> queue = new ArrayDeque<>();
    private final Set<CmId> ids = ConcurrentHashMap.newKeySet();
    private boolean closed;

    CmEventChannel(RdmaCm cm) {
        this.cm = cm;
    }

    /** {@return a channel on {@link RdmaCm#system()} (rdma_create_event_channel)} */
    public static CmEventChannel create() {
        return RdmaCm.system().createEventChannel();
    }

    /** {@return the provider set this channel's IDs use} */
    public RdmaCm cm() {
        return cm;
    }

    /**
     * rdma_create_id with the port space's QP type.
     *
     * @param portSpace TCP (RC), UDP (UD) or IB (RC)
     * @return a new, unbound CM ID reporting to this channel
     */
    public CmId createId(PortSpace portSpace) {
        return createId(portSpace, portSpace.defaultQpType());
    }

    /**
     * rdma_create_id.
     *
     * @param portSpace the port space
     * @param qpType    the QP type of its connections: RC or UC in TCP, UD in UDP, any in IB
     * @return a new, unbound CM ID reporting to this channel
     * @throws VerbsException EINVAL for a QP type the port space does not carry; EINVAL when closed
     */
    public CmId createId(PortSpace portSpace, QpType qpType) {
        boolean ok = switch (portSpace) {
            case TCP -> qpType == QpType.RC || qpType == QpType.UC;
            case UDP, IPOIB -> qpType == QpType.UD;
            case IB -> true;
        };
        if (!ok) {
            throw new VerbsException(Errno.EINVAL, "rdma_create_id: port space " + portSpace + " carries "
                    + (portSpace == PortSpace.TCP ? "RC or UC" : "UD") + " QPs, not " + qpType
                    + " (use PortSpace.IB for any type)");
        }
        CmId id = new CmId(this, portSpace, qpType, null);
        register(id);
        return id;
    }

    void register(CmId id) {
        lock.lock();
        try {
            if (closed) {
                throw new VerbsException(Errno.EINVAL, "the event channel is closed");
            }
            ids.add(id);
        } finally {
            lock.unlock();
        }
    }

    void unregister(CmId id) {
        ids.remove(id);
    }

    /** Queues an event; returns false when the channel is closed (the event is dropped). */
    boolean enqueue(CmEvent e) {
        lock.lock();
        try {
            if (closed) {
                return false;
            }
            queue.addLast(e);
            arrived.signal();
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** Queues an event built from a provider's report for {@code id}. */
    boolean enqueue(CmId id, CmId listenId, CmEventInfo info) {
        return enqueue(new CmEvent(id, listenId, info));
    }

    /**
     * Removes the queued, not yet taken events of an ID (it is closing or migrating).
     *
     * @param id    the ID
     * @param alsoRequestsTo also remove CONNECT_REQUESTs whose listener is {@code id}
     * @return the removed events, in order
     */
    List<CmEvent> drain(CmId id, boolean alsoRequestsTo) {
        List<CmEvent> out = new ArrayList<>();
        lock.lock();
        try {
            for (Iterator<CmEvent> it = queue.iterator(); it.hasNext(); ) {
                CmEvent e = it.next();
                if (e.id() == id || (alsoRequestsTo && e.listenId() == id)) {
                    out.add(e);
                    it.remove();
                }
            }
        } finally {
            lock.unlock();
        }
        return out;
    }

    /** Appends events moved from another channel (rdma_migrate_id). */
    void adopt(List<CmEvent> events) {
        lock.lock();
        try {
            queue.addAll(events);
            if (!events.isEmpty()) {
                arrived.signalAll();
            }
        } finally {
            lock.unlock();
        }
    }

    /** {@return how many CONNECT_REQUESTs of a listener are queued, not yet taken} */
    int queuedRequests(CmId listener) {
        lock.lock();
        try {
            int n = 0;
            for (CmEvent e : queue) {
                if (e.type() == CmEventType.CONNECT_REQUEST && e.listenId() == listener) {
                    n++;
                }
            }
            return n;
        } finally {
            lock.unlock();
        }
    }

    /**
     * rdma_get_cm_event: waits for the next event.
     *
     * @return the event; acknowledge it
     * @throws VerbsException EINVAL if the channel is closed (or closes while waiting); EINTR-like: an
     *                        interrupted wait returns null with the thread's interrupt status set
     */
    public CmEvent getEvent() {
        return take(Long.MAX_VALUE);
    }

    /**
     * rdma_get_cm_event with a bound on the wait (a poll(2) on the channel's fd, then the read).
     *
     * @param timeout how long to wait; zero does not wait
     * @return the event, or null if none arrived in time (or the thread was interrupted)
     * @throws VerbsException EINVAL if the channel is closed
     */
    public CmEvent getEvent(Duration timeout) {
        long ns = timeout.isNegative() ? 0 : saturatedNanos(timeout);
        return take(ns);
    }

    /**
     * The non-blocking rdma_get_cm_event (the channel's fd made O_NONBLOCK: EAGAIN when empty).
     *
     * @return the next event, or null if none is queued
     * @throws VerbsException EINVAL if the channel is closed
     */
    public CmEvent pollEvent() {
        return take(0);
    }

    private CmEvent take(long timeoutNs) {
        CmEvent e;
        lock.lock();
        try {
            long left = timeoutNs;
            while (true) {
                if (closed) {
                    throw new VerbsException(Errno.EINVAL, "rdma_get_cm_event: the event channel is closed");
                }
                e = queue.pollFirst();
                if (e != null) {
                    break;
                }
                if (left <= 0) {
                    return null;
                }
                try {
                    if (timeoutNs == Long.MAX_VALUE) {
                        arrived.await();
                    } else {
                        left = arrived.awaitNanos(left);
                    }
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    return null;
                }
            }
        } finally {
            lock.unlock();
        }
        e.taken(e.owner());
        return e;
    }

    private static long saturatedNanos(Duration d) {
        try {
            return d.toNanos();
        } catch (ArithmeticException overflow) {
            return Long.MAX_VALUE - 1;
        }
    }

    /** {@return how many CM IDs use this channel} */
    public int idCount() {
        return ids.size();
    }

    /**
     * rdma_destroy_event_channel. Queued events not taken are discarded. Idempotent.
     *
     * @throws VerbsException EBUSY while CM IDs use the channel: close them (or migrate them) first
     */
    @Override
    public void close() {
        lock.lock();
        try {
            if (closed) {
                return;
            }
            int n = ids.size();
            if (n > 0) {
                throw new VerbsException(Errno.EBUSY, "rdma_destroy_event_channel: " + n
                        + " CM ID(s) still report to this channel; close or migrate them first");
            }
            closed = true;
            queue.clear();
            arrived.signalAll();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public String toString() {
        return "rdma_event_channel{ids=" + ids.size() + '}';
    }
}
