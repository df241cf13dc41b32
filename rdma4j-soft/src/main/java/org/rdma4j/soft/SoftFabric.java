// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

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
 * <p>Threading (docs/engine.md): there is no lock shared by the fabric's QPs or devices. Each QP's protocol
 * work is serialised by its own executor ({@link QpExecutor}) and runs on whichever thread holds it: the
 * thread that posts, a peer's thread delivering a packet, a thread polling an empty CQ, the RoCE receive
 * agents, or the fabric's {@code rdma4j-soft-engine} agent for retransmit and RNR timers. With a
 * {@link ManualClock} there is no timer thread: timers fire inside {@link ManualClock#advance}.
 */
public final class SoftFabric implements AutoCloseable {
    private static final VarHandle ACK_HEAD;

    static {
        try {
            ACK_HEAD = MethodHandles.lookup().findVarHandle(SoftFabric.class, "ackHead", SoftQp.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final NanoClock clock;
    final TimerService timers;
    /** The link devices use unless given another (see {@link #setLink}). */
    final InProcessLink inProcess = new InProcessLink(this);
    /** The link new devices get. */
    private volatile Link defaultLink = inProcess;
    private final boolean segmentAtMtu;
    private final Map<Gid, SoftDevice> byGid = new ConcurrentHashMap<>();
    private final List<SoftDevice> devices = new CopyOnWriteArrayList<>();

    /** Publishes every device's counters (SoftDevice.publishCounters): the engine agent's work. */
    void publishCounters() {
        for (SoftDevice d : devices) {
            d.publishCounters();
        }
    }
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
        return addRoceDevice(name, config, DmaConfig.fromProperties(DMA_PROPERTY, System::getProperty));
    }

    /**
     * Adds a RoCEv2 device ({@link #addRoceDevice(String, RoceConfig)}) that reaches memory as {@code dma}
     * says, not as the system properties do.
     *
     * @param name   device name, unique on the fabric (e.g. rxe0)
     * @param config addresses, UDP port, MTU
     * @param dma    virtual, IOMMU or bounce, checker on or off
     * @return the device
     * @throws VerbsException with EADDRNOTAVAIL if a socket cannot be bound
     */
    public SoftDevice addRoceDevice(String name, RoceConfig config, DmaConfig dma) {
        SoftDevice d = addDevice(name, dma);
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
        byGid.remove(d.gid(0), d); // the in-process GID (a device bound on its first QP has none listed)
        d.attachRoce(link, config.resolveMtu());
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

    /** {@return the device owning a GID on this fabric, or null} */
    SoftDevice deviceFor(Gid gid) {
        return gid == null ? null : byGid.get(gid);
    }

    int maxPayload(int pathMtuBytes) {
        return segmentAtMtu ? pathMtuBytes : Integer.MAX_VALUE;
    }

    /**
     * Gives every device of the fabric the same link (a decorator of {@link #inProcess}, say), and
     * makes it the link of devices added later.
     *
     * @param link the link; null restores the in-process link
     */
    void setLink(Link link) {
        defaultLink = link == null ? inProcess : link;
        for (SoftDevice d : devices) {
            d.link = defaultLink;
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

    // ------------------------------------------------------------------ deferred ACKs (AckCoalescer NEXT_VERBS_CALL)

    /**
     * QPs whose responder holds an ACK for the receiving thread's next verbs call, newest first, linked through
     * {@link SoftQp#ackNext} (a QP is listed at most once: {@link SoftQp#ackListed}). Kept per fabric, not per
     * device, so that any verbs call on any of the fabric's devices sends them: a thread that drives several
     * devices must not leave one device's ACKs waiting while it polls another.
     */
    @SuppressWarnings("unused") // through ACK_HEAD
    private volatile SoftQp ackHead;

    /**
     * Lists a QP whose responder holds a NEXT_VERBS_CALL ACK. Called by the QP's owner.
     *
     * @param qp the QP, not listed yet (its {@code ackListed} flag was just set)
     */
    void ackDeferred(SoftQp qp) {
        SoftQp head;
        do {
            head = (SoftQp) ACK_HEAD.getVolatile(this);
            qp.ackNext = head;
        } while (!ACK_HEAD.compareAndSet(this, head, qp));
    }

    /** @return whether a QP may hold a deferred ACK (a hint, read without any lock) */
    boolean acksPending() {
        return (SoftQp) ACK_HEAD.getVolatile(this) != null;
    }

    /**
     * Sends every deferred ACK: each listed QP's executor is taken in turn (waiting for it), so the caller must
     * own none: verbs entry points, the receive agents, the engine agent.
     */
    void flushAcks() {
        SoftQp q = (SoftQp) ACK_HEAD.getAndSet(this, null);
        if (q == null) {
            return;
        }
        Burst b = Burst.enter();
        try {
            while (q != null) {
                SoftQp next = q.ackNext;
                q.ackNext = null;
                AckFlush.flushDeferredAck(q);
                q = next;
            }
        } finally {
            b.exit(); // the ACKs leave in one system call per link
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
