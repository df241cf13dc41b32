// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

import org.rdma4j.common.NanoClock;
import org.rdma4j.common.agent.IdleStrategies;
import org.rdma4j.common.agent.IdleStrategy;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.cm.CmAddress;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.spi.CmEventSink;
import org.rdma4j.verbs.spi.CmIdSpi;
import org.rdma4j.verbs.spi.CmProvider;
import org.rdma4j.verbs.spi.GsiAccess;

/**
 * The user-space connection manager over a set of devices that give it their QP1 ({@link GsiAccess}): one
 * {@link MadPort} per device port, the {@link MadLayer}, the {@link IbCm} and rdma_cm's port tables, all
 * under one lock, with timers on an injectable clock. As a {@link CmProvider} it serves the CM API
 * ({@link org.rdma4j.verbs.cm.RdmaCm#of}); {@link UserCmProvider} is the ServiceLoader instance over every
 * such device of the process.
 *
 * <p>Received MADs are processed by a receive agent per port ({@code rdma4j-cm-<device>}) blocking on the
 * port's completion channel, or, for a CM made {@linkplain Builder#driven(boolean) driven}, by whoever
 * calls {@link #progress()} (tests that want every step on their own thread and their manual clock).
 */
public final class UserCm implements CmProvider, AutoCloseable {
    private static final System.Logger LOG = System.getLogger("org.rdma4j.cm");
    /**
     * How long a receive agent keeps polling QP1's CQ after the last completion it took, before it arms the CQ
     * and blocks on the channel ({@code -Drdma4j.cm.agentPollUs}, microseconds; 0: block at once). A MAD exchange is a train: REQ, REP, RTU, then DREQ, DREP, each a few hundred microseconds after
     * the last. An agent still polling takes the next MAD from the socket itself (a CQ poll of the soft RoCE
     * device receives on the polling thread), instead of a RoCE receive agent woken by the datagram completing it
     * on QP1's CQ and then waking this agent, blocked on the channel: one thread hand-over less per MAD
     * (docs/benchmarks.md, "Connection management").
     */
    static final long AGENT_POLL_NS = Math.max(0, Long.getLong("rdma4j.cm.agentPollUs", 1000)) * 1000;
    /** How the agent idles between those polls ({@code -Drdma4j.cm.agentIdle}): spins, then yields the CPU. */
    static final String AGENT_IDLE = System.getProperty("rdma4j.cm.agentIdle", "backoff:100:1000000000:50us:50us");

    final ReentrantLock lock = new ReentrantLock();
    final CmTimers timers;
    final MadLayer mad;
    final IbCm ibcm;
    private final List<MadPort> ports;
    private final long[] counters = new long[CmCounter.values().length];
    private final Random random;
    private final boolean driven;
    private final List<Thread> agents = new ArrayList<>();
    private volatile boolean closed;
    /** rdma_cm's port tables ({@code struct rdma_bind_list} per port space and port). */
    private final Map<PortSpace, Map<Integer, BindList>> binds = new HashMap<>();
    /** AF_IB bindings, by service ID. */
    private final Map<Long, BindList> ibBinds = new HashMap<>();
    final Set<UserCmId> ids = ConcurrentHashMap.newKeySet();
    final MadTap tap;

    /** The IDs bound to one port of one port space ({@code struct rdma_bind_list}). */
    static final class BindList {
        final PortSpace ps;
        final int port;
        final long serviceId;
        final List<UserCmId> owners = new ArrayList<>();
        /** The IB CM listener of each MAD port for this service ID (shared by the list's listeners). */
        final Map<MadPort, IbCmId> ibListens = new HashMap<>();

        BindList(PortSpace ps, int port, long serviceId) {
            this.ps = ps;
            this.port = port;
            this.serviceId = serviceId;
        }
    }

    /** How to build a {@link UserCm}. */
    public static final class Builder {
        private final List<Device> devices = new ArrayList<>();
        private NanoClock clock = NanoClock.SYSTEM;
        private boolean driven;
        private long seed = System.nanoTime() ^ Thread.currentThread().threadId();
        private MadTap tap = MadTap.PASS;

        private Builder() {
        }

        /**
         * Adds devices (each must implement {@link GsiAccess}); port 1 of each is served.
         *
         * @param ds the devices
         * @return this
         */
        public Builder devices(List<? extends Device> ds) {
            devices.addAll(ds);
            return this;
        }

        /**
         * Adds a device.
         *
         * @param d the device (must implement {@link GsiAccess})
         * @return this
         */
        public Builder device(Device d) {
            devices.add(d);
            return this;
        }

        /**
         * Sets the clock of every CM timer (MAD retransmissions, TIMEWAIT).
         *
         * @param c the clock; a {@link org.rdma4j.common.ManualClock} makes the timers test-driven
         * @return this
         */
        public Builder clock(NanoClock c) {
            clock = Objects.requireNonNull(c);
            return this;
        }

        /**
         * Chooses who processes received MADs.
         *
         * @param d true: no receive agents, the owner calls {@link #progress()}; false (default): one agent
         *          thread per port
         * @return this
         */
        public Builder driven(boolean d) {
            driven = d;
            return this;
        }

        /**
         * Seeds the random choices (communication IDs, PSNs, ephemeral ports), for reproducible tests.
         *
         * @param s the seed
         * @return this
         */
        public Builder seed(long s) {
            seed = s;
            return this;
        }

        /** Puts a tap between the CM and QP1 (tests: watch, lose, duplicate, delay MADs). */
        Builder tap(MadTap t) {
            tap = Objects.requireNonNull(t);
            return this;
        }

        /**
         * Opens the devices and their QP1s and starts the CM; the QP1 of a device that
         * {@linkplain GsiAccess#bindsOnFirstUse() binds on first use} opens when a CM ID first binds, listens
         * or resolves to it (so a RoCE device another process serves is not taken by merely starting the CM).
         *
         * @return the CM
         * @throws VerbsException EINVAL for a device without {@link GsiAccess}; what opening QP1 throws
         */
        public UserCm build() {
            return new UserCm(this);
        }
    }

    /** {@return a builder} */
    public static Builder builder() {
        return new Builder();
    }

    private UserCm(Builder b) {
        this.random = new Random(b.seed);
        this.driven = b.driven;
        this.tap = b.tap;
        this.timers = new CmTimers(b.clock, lock);
        this.mad = new MadLayer(this);
        this.ibcm = new IbCm(this, mad);
        List<MadPort> ps = new ArrayList<>();
        try {
            for (Device d : b.devices) {
                if (!(d instanceof GsiAccess)) {
                    throw new VerbsException(Errno.EINVAL, "device " + d.name() + " (" + d.providerName() + ") has no QP1 for"
                            + " a user-space CM: its kernel or library runs the CM (use its own CM provider)");
                }
                MadPort p = new MadPort(this, d, 1);
                ps.add(p);
                if (!((GsiAccess) d).bindsOnFirstUse()) {
                    start(p);
                }
            }
        } catch (RuntimeException e) {
            lock.lock();
            try {
                ps.forEach(MadPort::close);
            } finally {
                lock.unlock();
            }
            timers.close();
            throw e;
        }
        this.ports = List.copyOf(ps);
    }

    /**
     * Starts a port's QP1 (CM lock held), and its receive agent unless the CM is driven: when an ID first
     * binds, listens or resolves to the port. Idempotent.
     *
     * @throws VerbsException what creating QP1 throws, with the device named
     */
    void start(MadPort p) {
        if (p.started()) {
            return;
        }
        if (closed) {
            throw new VerbsException(Errno.ENODEV, "the CM is closed");
        }
        try {
            p.start();
        } catch (VerbsException e) {
            throw new VerbsException(e.errno(), "the CM cannot open QP1 of " + p + ": " + e.getMessage());
        }
        if (!driven) {
            Thread t = Thread.ofPlatform().daemon().name("rdma4j-cm-" + p.device.name()).unstarted(() -> agentLoop(p));
            agents.add(t);
            t.start();
        }
    }

    // ------------------------------------------------------------------ agents

    private void agentLoop(MadPort p) {
        IdleStrategy idle = IdleStrategies.parse(AGENT_IDLE);
        while (!closed) {
            try {
                p.awaitCompletion(Duration.ofMillis(200));
                if (closed) {
                    return;
                }
                if (drainPort(p)) {
                    pollAwhile(p, idle); // not after a mere timeout: an idle CM does not spin every 200 ms
                }
                p.rearm();
                drainPort(p); // what completed between the drain and the re-arm
            } catch (RuntimeException | Error e) {
                if (closed) {
                    return;
                }
                LOG.log(System.Logger.Level.ERROR, "CM receive agent of " + p + " failed; it goes on", e);
            }
        }
    }

    /**
     * Keeps taking QP1's completions for {@link #AGENT_POLL_NS} after the last one, idling in between (spinning,
     * then yielding): the next MAD of an exchange is then received on this thread, not handed to it by another.
     * Bounded: it returns once a window passes with nothing taken, or when the CM closes.
     */
    private void pollAwhile(MadPort p, IdleStrategy idle) {
        if (AGENT_POLL_NS <= 0) {
            return;
        }
        idle.reset();
        long last = System.nanoTime();
        while (!closed) {
            if (drainPort(p)) {
                idle.reset();
                last = System.nanoTime();
                continue;
            }
            long left = AGENT_POLL_NS - (System.nanoTime() - last);
            if (left <= 0) {
                return;
            }
            idle.idleAtMost(left);
        }
    }

    /**
     * Takes QP1's completions without the CM lock and processes them with it; while application threads
     * hold the lock the agent keeps taking (reposting receive buffers), so a burst of REQs is not dropped by
     * a receive ring left empty behind a busy lock (dropped MADs cost a retransmission timeout of seconds).
     *
     * @return whether anything was taken
     */
    private boolean drainPort(MadPort p) {
        boolean any = false;
        while (!closed) {
            any |= p.take();
            if (!p.hasTaken()) {
                return any;
            }
            any = true;
            boolean locked;
            try {
                locked = lock.tryLock(200, TimeUnit.MICROSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt(); // nobody interrupts the agent; if someone does, it still drains
                lock.lock();
                locked = true;
            }
            if (locked) {
                try {
                    p.process(mad);
                } finally {
                    lock.unlock();
                }
            }
        }
        return any;
    }

    /**
     * Processes what arrived on every port's QP1 (and the sends that completed), on the calling thread: for a
     * {@linkplain Builder#driven(boolean) driven} CM the only way MADs get processed; harmless otherwise.
     *
     * @return whether anything was processed
     */
    public boolean progress() {
        boolean any = false;
        lock.lock();
        try {
            for (MadPort p : ports) {
                any |= p.drain(mad);
            }
        } finally {
            lock.unlock();
        }
        return any;
    }

    /** Runs {@code r} with the CM lock held (a test releasing MADs its tap held). */
    void runLocked(Runnable r) {
        lock.lock();
        try {
            r.run();
        } finally {
            lock.unlock();
        }
    }

    // ------------------------------------------------------------------ counters

    void count(CmCounter c) {
        counters[c.ordinal()]++;
    }

    /**
     * {@return its value}
     *
     * @param c a counter
     */
    public long counter(CmCounter c) {
        lock.lock();
        try {
            return counters[c.ordinal()];
        } finally {
            lock.unlock();
        }
    }

    /** {@return every counter by {@link CmCounter#counterName()}, read together} */
    public Map<String, Long> counters() {
        Map<String, Long> m = new LinkedHashMap<>();
        lock.lock();
        try {
            for (CmCounter c : CmCounter.values()) {
                m.put(c.counterName(), counters[c.ordinal()]);
            }
        } finally {
            lock.unlock();
        }
        return Collections.unmodifiableMap(m);
    }

    /** {@return how many IB CM communications exist (listeners and TIMEWAIT ones included)} */
    public int communications() {
        lock.lock();
        try {
            return ibcm.idCount();
        } finally {
            lock.unlock();
        }
    }

    Random random() {
        return random;
    }

    List<MadPort> ports() {
        return ports;
    }

    // ------------------------------------------------------------------ CmProvider

    @Override
    public String name() {
        return "rdma4j-cm";
    }

    @Override
    public List<CmAddress> addresses() {
        List<CmAddress> all = new ArrayList<>();
        for (MadPort p : ports) {
            all.addAll(p.addresses());
        }
        return all;
    }

    /**
     * {@inheritDoc}
     *
     * <p>For devices the host's routing table does not know (in-process ones, whose addresses are their
     * link-local GIDs): with a single device, its first address of the destination's family.
     */
    @Override
    public CmAddress sourceFor(InetAddress destination) {
        List<CmAddress> fam = new ArrayList<>();
        for (CmAddress a : addresses()) {
            if ((a.address() instanceof Inet4Address) == (destination instanceof Inet4Address)) {
                fam.add(a);
            }
        }
        boolean oneDevice = fam.stream().map(CmAddress::device).distinct().count() == 1;
        return oneDevice ? fam.getFirst() : null;
    }

    @Override
    public CmIdSpi createId(CmEventSink sink, PortSpace portSpace, QpType qpType) {
        if (closed) {
            throw new VerbsException(Errno.ENODEV, "the CM is closed");
        }
        UserCmId id = new UserCmId(this, sink, portSpace, qpType, null);
        ids.add(id);
        return id;
    }

    /** {@return the port that owns the address, or null} */
    MadPort portOwning(InetAddress a) {
        for (MadPort p : ports) {
            if (p.active() && p.owns(a)) {
                return p;
            }
        }
        return null;
    }

    // ------------------------------------------------------------------ port tables (cma_get_port, cma_check_port)

    BindList bindList(PortSpace ps, int port) {
        return binds.computeIfAbsent(ps, k -> new HashMap<>()).get(port);
    }

    BindList ibBindList(long sid) {
        return ibBinds.get(sid);
    }

    /** A free ephemeral port of the space ({@code cma_alloc_any_port}: random in ip_local_port_range). */
    int anyPort(PortSpace ps) {
        Map<Integer, BindList> m = binds.computeIfAbsent(ps, k -> new HashMap<>());
        int low = 32768;
        int range = 60999 - low + 1;
        int start = random.nextInt(range);
        for (int i = 0; i < range; i++) {
            int p = low + (start + i) % range;
            if (!m.containsKey(p)) {
                return p;
            }
        }
        throw new VerbsException(Errno.EADDRNOTAVAIL, "no free port left in " + ps + " (32768..60999 all bound)");
    }

    BindList addBinding(PortSpace ps, int port, UserCmId id) {
        BindList bl = binds.computeIfAbsent(ps, k -> new HashMap<>()).computeIfAbsent(port,
                p -> new BindList(ps, p, ps.serviceId(p)));
        bl.owners.add(id);
        return bl;
    }

    BindList addIbBinding(long sid, UserCmId id) {
        BindList bl = ibBinds.computeIfAbsent(sid, s -> new BindList(PortSpace.IB, (int) (s & 0xFFFF), s));
        bl.owners.add(id);
        return bl;
    }

    /** {@code cma_release_port}. */
    void releaseBinding(BindList bl, UserCmId id) {
        bl.owners.remove(id);
        if (bl.owners.isEmpty()) {
            if (bl.serviceId == bl.ps.serviceId(bl.port) && binds.containsKey(bl.ps)) {
                binds.get(bl.ps).remove(bl.port, bl);
            }
            ibBinds.remove(bl.serviceId, bl);
        }
    }

    /** A random 24-bit PSN ({@code __rdma_create_id}: {@code get_random_u32() & 0xffffff}). */
    int randomPsn() {
        return random.nextInt() & 0xFF_FFFF;
    }

    /**
     * Stops the CM: every live CM ID gets DEVICE_REMOVAL, the receive agents and timers stop, the QP1s
     * and their contexts are destroyed.
     *
     * @throws VerbsException EBUSY if applications still hold PDs on a device context of this CM
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        lock.lock();
        try {
            for (UserCmId id : new ArrayList<>(ids)) {
                id.deviceRemoved();
            }
            closed = true;
        } finally {
            lock.unlock();
        }
        for (Thread t : agents) {
            try {
                t.join(2_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        timers.close();
        lock.lock();
        try {
            VerbsException first = null;
            for (MadPort p : ports) {
                try {
                    p.close();
                } catch (VerbsException e) {
                    if (first == null) {
                        first = new VerbsException(e.errno(), "closing the CM's QP1 of " + p + ": " + e.getMessage()
                                + " (close the PDs allocated on the CM IDs' contexts first)");
                    }
                }
            }
            if (first != null) {
                throw first;
            }
        } finally {
            lock.unlock();
        }
    }

    /** {@return whether the CM is closed} */
    boolean isClosed() {
        return closed;
    }

    @Override
    public String toString() {
        return "rdma4j-cm" + ports;
    }
}
