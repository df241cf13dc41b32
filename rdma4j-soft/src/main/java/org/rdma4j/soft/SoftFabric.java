// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.locks.ReentrantLock;

import org.rdma4j.common.ManualClock;
import org.rdma4j.common.NanoClock;
import org.rdma4j.dma.DmaConfig;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.VerbsException;

/**
 * An in-process network: the software devices added to it reach each other by GID, as hosts on
 * one subnet. Packets pass between devices as objects that refer to the sender's memory, so an RDMA
 * WRITE is a single copy.
 *
 * <p>Threading: protocol processing of every device on the fabric runs under one engine lock, on the
 * thread that posts (requester, then the peer's responder, then the completer, in one call), or on the
 * fabric's timer agent ({@code rdma4j-soft-timer}) for retransmit and RNR timers. Polling a CQ and
 * posting a receive do not take the engine lock. With a {@link ManualClock} there is no timer thread:
 * timers fire inside {@link ManualClock#advance}.
 */
public final class SoftFabric implements AutoCloseable {
    final ReentrantLock engine = new ReentrantLock();
    final NanoClock clock;
    final TimerService timers;
    /** The link devices use unless given another (see {@link #setLink}). */
    final InProcessLink inProcess = new InProcessLink(this);
    /** The link new devices get. Engine lock for writes. */
    private volatile Link defaultLink = inProcess;
    private final boolean segmentAtMtu;
    private final Map<Gid, SoftDevice> byGid = new ConcurrentHashMap<>();
    private final List<SoftDevice> devices = new CopyOnWriteArrayList<>();
    private volatile boolean closed;

    /** A fabric on the system clock that passes whole messages (no MTU segmentation). */
    public SoftFabric() {
        this(NanoClock.SYSTEM, false);
    }

    /**
     * Creates an empty fabric whose messages travel whole (one packet each).
     *
     * @param clock time source for protocol timers; a {@link ManualClock} makes them test-driven
     */
    public SoftFabric(NanoClock clock) {
        this(clock, false);
    }

    /**
     * Creates an empty fabric.
     *
     * @param clock time source for protocol timers
     * @param segmentAtMtu cut RC/UC messages into path-MTU packets as a wire would (FIRST/MIDDLE/LAST), exercising
     *     the same protocol paths as RoCE; off, a message is one packet
     */
    public SoftFabric(NanoClock clock, boolean segmentAtMtu) {
        this.clock = clock;
        this.segmentAtMtu = segmentAtMtu;
        this.timers = new TimerService(this);
    }

    /**
     * Adds a device that reaches memory as the system properties {@code rdma4j.soft.dma*} say
     * ({@link DmaConfig#fromProperties}); virtual without a checker when they are not set.
     *
     * @param name device name, unique on the fabric
     * @return the device
     */
    public SoftDevice addDevice(String name) {
        return addDevice(name, DmaConfig.fromProperties(DMA_PROPERTY, System::getProperty));
    }

    /** The system property prefix of the devices' DMA configuration. */
    public static final String DMA_PROPERTY = "rdma4j.soft.dma";

    /**
     * Adds a device.
     *
     * @param name device name, unique on the fabric
     * @param dma  how the device reaches memory: virtual (a CPU-copy device), IOMMU or bounce, checker on or off
     * @return the device
     */
    public SoftDevice addDevice(String name, DmaConfig dma) {
        checkOpen();
        for (SoftDevice d : devices) {
            if (d.name().equals(name)) {
                throw new VerbsException(Errno.EINVAL, "device " + name + " already exists on this fabric");
            }
        }
        SoftDevice d = new SoftDevice(this, name, devices.size(), dma);
        devices.add(d);
        byGid.put(d.gid(0), d);
        return d;
    }

    /**
     * Adds a device that speaks RoCEv2 on UDP: bound to the given addresses (its GID table), it
     * reaches devices of other processes and hosts (rdma4j or Linux rdma_rxe) as well as those of this
     * fabric.
     *
     * @param name   device name, unique on the fabric (e.g. rxe0)
     * @param config addresses, UDP port, MTU
     * @return the device
     * @throws VerbsException with EADDRNOTAVAIL if a socket cannot be bound
     */
    public SoftDevice addRoceDevice(String name, RoceConfig config) {
        SoftDevice d = addDevice(name);
        try {
            bindRoce(d, config);
        } catch (VerbsException e) {
            devices.remove(d);
            byGid.remove(d.gid(0), d);
            throw e;
        }
        return d;
    }

    /**
     * Adds a RoCEv2 device that binds its addresses when its first QP is created, not now: what the
     * provider does with the configured devices, so that a process binds only the devices it uses and two
     * processes of one host can each use one of them (as two programs use two rxe devices). Until then
     * the device answers queries (its GIDs, GUID and MTU come from the configuration) and nothing of this
     * fabric routes to it.
     *
     * @param name   device name, unique on the fabric
     * @param config addresses, UDP port, MTU
     * @return the device
     */
    public SoftDevice addRoceDeviceBoundOnFirstQp(String name, RoceConfig config) {
        SoftDevice d = addDevice(name);
        byGid.remove(d.gid(0));
        d.configureRoce(config);
        return d;
    }

    /**
     * Binds a device's sockets and makes it a RoCE device of this fabric.
     *
     * @throws VerbsException EADDRINUSE or EADDRNOTAVAIL when a socket cannot be bound
     */
    void bindRoce(SoftDevice d, RoceConfig config) {
        RoceLink link = new RoceLink(d, inProcess, config);
        lockEngine();
        try {
            byGid.remove(d.gid(0), d); // the in-process GID (a device bound on its first QP has none listed)
            d.attachRoce(link, config.resolveMtu());
        } finally {
            unlockEngine();
        }
        for (int i = 0; i < d.gidTableLength(); i++) {
            byGid.put(d.gid(i), d);
        }
        link.start();
    }

    /** {@return the devices, in the order they were added} */
    public List<SoftDevice> devices() {
        return List.copyOf(devices);
    }

    /** {@return the live device list, not copied (multicast fan-out on the engine's path; do not modify)} */
    List<SoftDevice> deviceList() {
        return devices;
    }

    /** {@return whether messages are cut at the path MTU} */
    public boolean segmentsAtMtu() {
        return segmentAtMtu;
    }

    /** {@return the clock driving the protocol timers} */
    public NanoClock clock() {
        return clock;
    }

    /**
     * Takes the engine lock, spinning briefly before parking: the lock is held for well under a
     * microsecond per post, while parking and waking a thread costs several (measured: a ping-pong's
     * echo thread parked on every few hundred round trips for 3 µs each with a plain lock()).
     */
    void lockEngine() {
        if (engine.tryLock()) {
            return;
        }
        for (int i = 0; i < ENGINE_SPINS; i++) {
            Thread.onSpinWait();
            if (!engine.isLocked() && engine.tryLock()) {
                return;
            }
        }
        engine.lock();
    }

    private static final int ENGINE_SPINS = 4_000;

    /**
     * Links holding packets of the current burst (engine lock): a RoCE link batches the packets the engine
     * emits while it holds the lock (segments of one or more messages, READ responses, ACKs) into one
     * system call, and {@link #unlockEngine} sends them before the lock is released, so no packet waits
     * past the burst that made it.
     */
    private final java.util.ArrayList<RoceLink> pendingTx = new java.util.ArrayList<>(2);

    /** Engine lock held: {@code link} queued packets that must leave before the outermost unlock. */
    void pendingTransmit(RoceLink link) {
        if (!pendingTx.contains(link)) {
            pendingTx.add(link);
        }
    }

    /**
     * Releases the engine lock taken by {@link #lockEngine}; the outermost release first sends what the
     * links batched during the burst (the flush point of {@link RoceLink}'s send batching).
     */
    void unlockEngine() {
        try {
            if ((!pendingTx.isEmpty() || !pendingAcks.isEmpty()) && engine.getHoldCount() == 1) {
                flushPending();
            }
        } finally {
            engine.unlock(); // whatever the flush threw: a lock left held would stop the whole fabric
        }
    }

    /** Responders holding a coalesced ACK for the current burst (engine lock). */
    private final java.util.ArrayList<Responder> pendingAcks = new java.util.ArrayList<>(4);

    /** Engine lock held: {@code r} holds an ACK to send before the outermost unlock. */
    void deferAck(Responder r) {
        pendingAcks.add(r); // at most once per burst: the responder registers when its first ACK is deferred
    }

    private void flushPending() {
        for (int i = 0; i < pendingAcks.size(); i++) {
            Responder r = pendingAcks.get(i);
            try {
                r.flushAck(); // queues on the links; sent below
            } catch (Throwable t) {
                EngineErrors.qpWorkFailed(r.qp(), "deferred ACK", t);
            }
        }
        pendingAcks.clear();
        while (!pendingTx.isEmpty()) {
            pendingTx.remove(pendingTx.size() - 1).flush(); // a flush only makes system calls: it adds nothing
        }
    }

    /** {@return the device owning a GID on this fabric, or null} */
    SoftDevice deviceFor(Gid gid) {
        return gid == null ? null : byGid.get(gid);
    }

    int maxPayload(int pathMtuBytes) {
        return segmentAtMtu ? pathMtuBytes : Integer.MAX_VALUE;
    }

    /**
     * Hands a packet to the sending device's link, which delivers it to the device that owns its
     * destination GID. Engine lock held; the packet is valid only during the call ({@link Link}).
     */
    void transmit(SoftDevice from, Packet p) {
        from.count(SoftCounter.SENT_PKTS);
        from.link.send(from, p);
    }

    /**
     * Gives every device of the fabric the same link (a decorator of {@link #inProcess}, say), and
     * makes it the link of devices added later.
     *
     * @param link the link; null restores the in-process link
     */
    void setLink(Link link) {
        lockEngine();
        try {
            defaultLink = link == null ? inProcess : link;
            for (SoftDevice d : devices) {
                d.link = defaultLink;
            }
        } finally {
            unlockEngine();
        }
    }

    Link defaultLink() {
        return defaultLink;
    }

    void checkOpen() {
        if (closed) {
            throw new VerbsException(Errno.EINVAL, "fabric is closed");
        }
    }

    // ------------------------------------------------------------------ deferred ACKs (Responder.ackRequested)

    /**
     * QPs whose responder holds a deferred ACK: engine lock. Kept per fabric, not per device, so that any
     * verbs call on any of the fabric's devices sends them: a thread that drives several devices must not
     * leave one device's ACKs waiting while it polls another.
     */
    private final java.util.ArrayList<SoftQp> ackQps = new java.util.ArrayList<>();
    /** Whether {@link #ackQps} may be non-empty: read without the lock, as a hint. */
    private volatile boolean acksPending;

    /** Records that {@code qp}'s responder holds a deferred ACK (engine lock). */
    void ackDeferred(SoftQp qp) {
        if (!qp.ackListed) {
            qp.ackListed = true;
            ackQps.add(qp);
        }
        acksPending = true;
    }

    /** Sends every deferred ACK (engine lock). */
    void flushAcks() {
        if (!acksPending) {
            return;
        }
        for (int i = 0; i < ackQps.size(); i++) {
            SoftQp qp = ackQps.get(i);
            qp.ackListed = false;
            try {
                qp.responder.flushAck();
            } catch (Throwable t) {
                EngineErrors.qpWorkFailed(qp, "deferred ACK", t);
            }
        }
        ackQps.clear();
        acksPending = false;
    }

    /** Sends every deferred ACK, taking the engine lock only if there may be one. */
    void flushAcksIfPending() {
        if (acksPending) {
            lockEngine();
            try {
                flushAcks();
            } finally {
                unlockEngine(); // sends what flushAcks queued on the links
            }
        }
    }

    /** Stops the timer agent. Devices stay usable for closing their objects. */
    @Override
    public void close() {
        closed = true;
        timers.close();
        Set<Link> links = Collections.newSetFromMap(new IdentityHashMap<>());
        for (SoftDevice d : devices) {
            links.add(d.link);
        }
        links.forEach(Link::close);
    }
}
