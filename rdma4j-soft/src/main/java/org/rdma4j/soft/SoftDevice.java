// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CopyOnWriteArrayList;

import org.rdma4j.common.CounterFile;
import org.rdma4j.dma.DmaConfig;
import org.rdma4j.dma.DmaSpace;
import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.AsyncEventType;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.DeviceAttributes;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.PortAttributes;
import org.rdma4j.verbs.PortState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.spi.GsiAccess;

/**
 * A software RDMA device on a {@link SoftFabric}: one port, link layer Ethernet (RoCE-style GID
 * addressing), GID 0 is fe80::&lt;node GUID&gt; as rxe derives it from a MAC. Holds the device-wide
 * key and QP-number tables and the receive dispatcher.
 */
public final class SoftDevice implements Device, GsiAccess {
    /** Largest message (rxe RXE_MAX_MSG_SZ). */
    static final long MAX_MSG_SZ = 1L << 31;
    /** Largest memory region, max_mr_size (rxe RXE_MAX_MR_SIZE is 2^31 too). */
    static final long MAX_MR_SIZE = 1L << 31;
    static final int MAX_QP = 16_384;
    static final int MAX_MR = 65_536;
    static final int MAX_QP_WR = 16_384;
    static final int MAX_SGE = 32;
    static final int MAX_CQE = 32_767;
    static final int MAX_INLINE = 512;
    static final int MAX_RD_ATOMIC = 128;
    static final int FIRST_QPN = 0x11;
    /** rxe RXE_MAX_MCAST_GRP: multicast groups per device. */
    static final int MAX_MCAST_GRP = 8_192;
    /** rxe RXE_MAX_MCAST_QP_ATTACH: QPs per multicast group. */
    static final int MAX_MCAST_QP_ATTACH = 56;
    /** The PD's local DMA L_Key (rdmavt uses 0 for its DMA MR too); MR keys start at 0x100. */
    static final int LOCAL_DMA_LKEY = 0;

    final SoftFabric fabric;
    /** How this device reaches memory: virtual, IOMMU or bounce, plus the optional DMA checker. */
    final DmaSpace dma;
    private final String name;
    private volatile long guid;
    private final Gid gid0;
    private volatile PortState portState = PortState.ACTIVE;
    private volatile Mtu activeMtu = Mtu.MTU_4096;
    /**
     * GID table: the fe80:: GID of an in-process device, or the IP addresses of a RoCE device (rxe builds
     * its table from the netdev's addresses, so a device bound to 127.0.0.1 alone has ::ffff:127.0.0.1 as
     * GID 0; an interface with a link-local IPv6 address would add that one too).
     */
    private volatile Gid[] gids;
    /** The RoCEv2 link when the device is bound to IP addresses, else null. */
    private volatile RoceLink roce;
    /** A RoCE configuration the device binds when its first QP is created ({@link #bindOnFirstQp}), or null. */
    private volatile RoceConfig unbound;
    /**
     * The device's own counts (packets dropped before a QP is known, link and CQ events), atomic: any thread
     * may count. What a QP's roles count goes to the QP ({@link SoftQp#count}), so that threads driving
     * different QPs never write a common cache line; {@link #counter} adds them up.
     */
    private final AtomicLongArray counters = new AtomicLongArray(SoftCounter.values().length);
    /** Counts of QPs that were destroyed (added when they go). */
    private final AtomicLongArray retired = new AtomicLongArray(SoftCounter.values().length);
    /**
     * The counters as other processes read them ('rdma4j statistic show', {@link CounterFile}): the sums of
     * {@link #counter}, published by the engine agent about every {@link TimerService#PUBLISH_NS} (a QP's
     * counts live in the QP, so no thread writes the file on the data path).
     */
    private final CounterFile published;
    /** What {@link #publishCounters} has added to {@link #published} so far (under its monitor). */
    private final long[] publishedValues = new long[SoftCounter.values().length];
    private final CopyOnWriteArrayList<SoftContext> contexts = new CopyOnWriteArrayList<>();

    // Key and QPN tables: written under tableLock, read by engine threads without a lock (slots are published
    // with release stores and read with acquire loads; entries are immutable but for an MR's volatile key).
    private final Object tableLock = new Object();
    private final SoftMr[] mrs = new SoftMr[MAX_MR];
    private int nextMrIndex = 1;
    private final SplittableRandom keyVariants;
    private final SoftQp[] qps = new SoftQp[MAX_QP + FIRST_QPN];
    private int nextQpn = FIRST_QPN;
    /** Multicast groups joined by QPs of this device (rxe_mcast.c mcg tree): member arrays copied on change. */
    private final java.util.Map<Gid, SoftQp[]> mcgs = new java.util.concurrent.ConcurrentHashMap<>();
    /** What this device's QPs learnt of the path to each destination GID they were connected to (Pacer). */
    private final java.util.Map<Gid, Pacer.Path> pacePaths = new java.util.concurrent.ConcurrentHashMap<>();
    /** Destinations whose pacing is remembered at most; past it, a new destination's QP learns on its own. */
    static final int MAX_PACE_PATHS = 4096;
    /** Where this device's engine sends packets (see {@link #link(Link)}). */
    volatile Link link;

    SoftDevice(SoftFabric fabric, String name, int index, DmaConfig dmaConfig) {
        this.fabric = fabric;
        this.dma = new DmaSpace(dmaConfig);
        this.name = name;
        this.guid = 0x0200_00FF_FE00_0000L | ((long) (index + 1) << 8) | 0x01;
        this.gid0 = new Gid(0xFE80_0000_0000_0000L, guid);
        this.gids = new Gid[] {gid0};
        this.keyVariants = new SplittableRandom(guid ^ System.nanoTime());
        this.link = fabric.defaultLink();
        this.published = CounterFile.create(name + "/1", COUNTER_NAMES);
    }

    private static final List<String> COUNTER_NAMES =
            Arrays.stream(SoftCounter.values()).map(SoftCounter::rxeName).toList();

    @Override
    public String name() {
        return name;
    }

    @Override
    public long guid() {
        return guid;
    }

    /**
     * {@inheritDoc}
     *
     * <p>"rxe" once the device is bound to IP addresses (its peers may be other processes, hosts or a
     * Linux rxe device, and rdma-core names rxe's provider so), "soft" while it reaches only devices of
     * its in-process fabric. Tools tell the two apart by this name: perftest refuses a peer QP of
     * another process on an in-process device, and that check must not refuse a RoCE device.
     */
    @Override
    public String providerName() {
        return roce != null || unbound != null ? "rxe" : "soft";
    }

    /** {@return how this device reaches memory, and its DMA checker if on} */
    public DmaSpace dma() {
        return dma;
    }

    /** {@return the fabric} */
    public SoftFabric fabric() {
        return fabric;
    }

    @Override
    public Context open() {
        fabric.checkOpen();
        SoftContext ctx = new SoftContext(this);
        contexts.add(ctx);
        return ctx;
    }

    /** {@inheritDoc} The port's QP1 for a user-space MAD layer; see {@link SoftGsi}. */
    @Override
    public org.rdma4j.verbs.QueuePair createSpecialQp(org.rdma4j.verbs.ProtectionDomain pd, SpecialQp kind, int port,
                                                      org.rdma4j.verbs.QpInitAttributes attrs) {
        return SoftGsi.create(this, pd, kind, port, attrs);
    }

    /** {@inheritDoc} True for a configured RoCE device not bound yet ({@link #bindOnFirstQp}). */
    @Override
    public boolean bindsOnFirstUse() {
        return unbound != null;
    }

    void contextClosed(SoftContext ctx) {
        contexts.remove(ctx);
    }

    /**
     * Changes the port state, raising PORT_ACTIVE or PORT_ERR on every open context.
     *
     * @param port  port number (1)
     * @param state the new state; anything but ACTIVE stops traffic
     */
    public void setPortState(int port, PortState state) {
        checkPort(port);
        PortState old = portState;
        portState = state;
        if (old != state && (state == PortState.ACTIVE || old == PortState.ACTIVE)) {
            AsyncEventType t = state == PortState.ACTIVE ? AsyncEventType.PORT_ACTIVE : AsyncEventType.PORT_ERR;
            for (SoftContext c : contexts) {
                c.raise(new AsyncEvent(t, null, null, null, port));
            }
        }
    }

    /**
     * {@return its value}
     *
     * @param c a counter
     */
    public long counter(SoftCounter c) {
        int i = c.ordinal();
        long v = counters.get(i) + retired.get(i);
        VarHandle.acquireFence();
        for (int q = 1; q < qps.length; q++) {
            SoftQp qp = qpAt(q);
            if (qp != null) {
                v += qp.counted(i);
            }
        }
        return v;
    }

    /**
     * @return every counter by {@link SoftCounter#rxeName()} (each QP's share read as it stands: a count made
     *         while this runs may be in or out)
     */
    java.util.Map<String, Long> counters() {
        var m = new java.util.LinkedHashMap<String, Long>();
        for (SoftCounter c : SoftCounter.values()) {
            m.put(c.rxeName(), counter(c));
        }
        return java.util.Collections.unmodifiableMap(m);
    }

    /**
     * Brings the published counters ({@link CounterFile}) up to {@link #counter}'s sums: one pass over the QP
     * table, each QP's counts added as they stand. Called by the engine agent about every
     * {@link TimerService#PUBLISH_NS}, and when the device goes; any thread (one at a time).
     */
    void publishCounters() {
        synchronized (publishedValues) {
            int n = publishedValues.length;
            long[] sum = new long[n];
            for (int i = 0; i < n; i++) {
                sum[i] = counters.get(i) + retired.get(i);
            }
            VarHandle.acquireFence();
            for (int q = 1; q < qps.length; q++) {
                SoftQp qp = qpAt(q);
                if (qp != null) {
                    for (int i = 0; i < n; i++) {
                        sum[i] += qp.counted(i);
                    }
                }
            }
            for (int i = 0; i < n; i++) {
                long d = sum[i] - publishedValues[i];
                if (d != 0) {
                    published.add(i, d); // the only writer of the file: this monitor's holder
                    publishedValues[i] = sum[i];
                }
            }
        }
    }

    /** Counts an event of the device's own (any thread). */
    void count(SoftCounter c) {
        counters.getAndIncrement(c.ordinal());
        if (c.isDrop()) {
            SoftEvents.drop(this, c);
        }
    }

    /** Counts events of the device's own (any thread). */
    void count(SoftCounter c, long n) {
        counters.getAndAdd(c.ordinal(), n);
    }

    /**
     * {@return the pacing state the device's QPs share toward {@code dgid} (Pacer), made on first use}
     *
     * @param dgid a QP's destination GID
     */
    Pacer.Path pacePath(Gid dgid) {
        Pacer.Path p = pacePaths.get(dgid);
        if (p != null) {
            return p;
        }
        if (pacePaths.size() >= MAX_PACE_PATHS) {
            return new Pacer.Path(); // bounded: a device connected to very many destinations stops sharing
        }
        return pacePaths.computeIfAbsent(dgid, g -> new Pacer.Path());
    }

    /** A QP is being destroyed: its counts stay the device's. */
    void retire(SoftQp qp) {
        for (int i = 0; i < SoftCounter.values().length; i++) {
            long v = qp.counted(i);
            if (v != 0) {
                retired.getAndAdd(i, v);
            }
        }
    }

    boolean portActive() {
        return portState == PortState.ACTIVE;
    }

    /**
     * {@return this device's own GID object equal to {@code g}, else {@code g}}: a QP keeps its peer's GID as the
     * peer device's object, so the address check of every packet between them compares references.
     *
     * @param g a GID of this device
     */
    Gid ownGid(Gid g) {
        for (Gid o : gids) {
            if (o != null && o.equals(g)) {
                return o;
            }
        }
        return g;
    }

    Gid gid(int index) {
        Gid[] t = gids;
        return index >= 0 && index < t.length ? t[index] : Gid.ZERO;
    }

    int gidTableLength() {
        return gids.length;
    }

    /**
     * Binds the device to IP addresses (called once by {@link SoftFabric#addRoceDevice}): the GID table
     * becomes their GIDs and packets to GIDs off the fabric go out as RoCEv2.
     */
    void attachRoce(RoceLink link, Mtu mtu) {
        this.gids = link.gids().toArray(Gid[]::new);
        this.guid = guidFor(gids[0]);
        this.activeMtu = mtu;
        this.roce = link;
        this.link = link;
    }

    /**
     * Makes the device a RoCE device that binds its addresses when its first QP is created (called once by
     * {@link SoftFabric#addRoceDeviceBoundOnFirstQp}, before anyone else sees the device): its GIDs, GUID
     * and MTU are the configuration's from now on, as they will be once bound.
     */
    void configureRoce(RoceConfig config) {
        Gid[] g = new Gid[config.addresses().size()];
        for (int i = 0; i < g.length; i++) {
            g[i] = Gid.ofInetAddress(config.addresses().get(i)); // as RoceLink's endpoints: configuration order
        }
        this.gids = g;
        this.guid = guidFor(g[0]);
        this.activeMtu = config.resolveMtu();
        this.unbound = config;
    }

    /**
     * Binds a device added by {@link SoftFabric#addRoceDeviceBoundOnFirstQp} (once; later calls return at
     * once). Called before a QP is created, owning no executor.
     *
     * @throws VerbsException EADDRINUSE when another process (or rdma_rxe) has the address and port,
     *                        EADDRNOTAVAIL when this host does not have the address; the next QP tries again
     */
    void bindOnFirstQp() {
        if (unbound == null) {
            return;
        }
        synchronized (this) {
            RoceConfig c = unbound;
            if (c != null) {
                fabric.bindRoce(this, c);
                unbound = null;
            }
        }
    }

    /**
     * A node GUID for a RoCE device: the EUI-64 of a locally administered MAC 02:00:a:b:c:d made of the
     * last four address bytes (rxe derives it from the netdev's MAC, which we do not have), so devices on
     * different hosts differ.
     */
    static long guidFor(Gid g) {
        long low32 = g.lo() & 0xFFFF_FFFFL;
        long mac = 0x0200_0000_0000L | low32;
        long hi24 = (mac >>> 24) ^ 0x02_0000L; // EUI-64: flip the universal/local bit
        return (hi24 << 40) | (0xFFFEL << 24) | (mac & 0xFF_FFFFL);
    }

    /** {@return the RoCE link, or null for an in-process device} */
    RoceLink roceLink() {
        return roce;
    }

    /** {@return whether packets are cut at the path MTU because they may cross a wire} */
    boolean onWire() {
        return roce != null;
    }

    /**
     * Gives a thread polling an empty CQ the chance to receive what the wire brought (RoCE devices
     * only; the in-process link delivers on the sender's thread).
     *
     * @return whether a packet was received
     */
    boolean pollLink() {
        RoceLink r = roce;
        return r != null && r.pollReceive();
    }

    /**
     * A thread is about to block on a completion channel of this device: the ACKs its last receive deferred leave
     * now (nobody else would send them before the peer's timeout), and the RoCE receive agents stop deferring to
     * it, so a packet that arrives next is taken at once.
     */
    void waiterBlocking() {
        if (fabric.acksPending()) {
            fabric.flushAcks();
        }
        RoceLink r = roce;
        if (r != null) {
            r.pollerBlocking();
        }
    }

    /**
     * What a poll of an empty CQ does: sends the ACKs this thread's last receive deferred, then receives.
     *
     * @return whether a packet was received
     */
    boolean pollIdle() {
        if (fabric.acksPending()) {
            fabric.flushAcks();
        }
        return pollLink();
    }

    /** Counts from any thread (the same as {@link #count}: kept for the callers that said so). */
    void countOutsideEngine(SoftCounter c) {
        count(c);
    }

    Mtu activeMtu() {
        return activeMtu;
    }

    void checkPort(int port) {
        if (port != 1) {
            throw new VerbsException(Errno.EINVAL, "port " + port + " (device " + name + " has port 1 only)");
        }
    }

    DeviceAttributes attributes() {
        return new DeviceAttributes("0.1.0", guid, guid, MAX_MR_SIZE, 0xFFFF_F000L, 0xFFFFFF, 0, 0,
                MAX_QP, MAX_QP_WR, 0, MAX_SGE, 16_384, MAX_CQE, MAX_MR - 1, 65_536, MAX_RD_ATOMIC, MAX_RD_ATOMIC,
                8_192, MAX_QP_WR, MAX_SGE, 65_536, MAX_INLINE, "ATOMIC_HCA", 1, 15);
    }

    PortAttributes portAttributes() {
        boolean up = portState == PortState.ACTIVE;
        return new PortAttributes(portState, Mtu.MTU_4096, activeMtu, gidTableLength(), 0x0001_0000, MAX_MSG_SZ,
                0, 0, 0, up ? 5 : 3, "Ethernet", 2, 32, 1);
    }

    // ---- key table (writes under tableLock; lookups by any thread) ----

    private static final VarHandle MRS = MethodHandles.arrayElementVarHandle(SoftMr[].class);
    private static final VarHandle QPS = MethodHandles.arrayElementVarHandle(SoftQp[].class);

    /**
     * Registers an MR and returns its key: index in the upper 24 bits, random variant in the low 8. The MR's
     * key field must be set before the MR is looked up: {@code setKey} is called with the key under the
     * table lock, before the slot is published.
     */
    int addMr(SoftMr mr) {
        synchronized (tableLock) {
            for (int tries = 0; tries < MAX_MR; tries++) {
                int idx = nextMrIndex;
                nextMrIndex = nextMrIndex + 1 >= MAX_MR ? 1 : nextMrIndex + 1;
                if (MRS.getAcquire(mrs, idx) == null) {
                    int key = (idx << 8) | keyVariants.nextInt(256);
                    mr.key = key;
                    MRS.setRelease(mrs, idx, mr);
                    return key;
                }
            }
        }
        throw new VerbsException(Errno.ENOMEM, "MR table full (" + (MAX_MR - 1) + " regions)");
    }

    void removeMr(int key) {
        int idx = key >>> 8;
        if (idx > 0 && idx < MAX_MR) {
            synchronized (tableLock) {
                MRS.setRelease(mrs, idx, null);
            }
        }
    }

    /** {@return the MR with exactly this key, or null (any thread)} */
    SoftMr lookupMr(int key) {
        int idx = key >>> 8;
        if (idx <= 0 || idx >= MAX_MR) {
            return null;
        }
        SoftMr mr = (SoftMr) MRS.getAcquire(mrs, idx);
        return mr != null && mr.key == key ? mr : null;
    }

    /**
     * Inline data given by address only (verbs read it without an L_Key check): the registered region
     * of the same context (process) that holds it. A linear scan, off the fast path, which first tries
     * the L_Key as a hint.
     *
     * @return the MR, or null
     */
    SoftMr findMrByAddress(SoftContext ctx, long addr, long len) {
        for (int i = 1; i < MAX_MR; i++) {
            SoftMr mr = (SoftMr) MRS.getAcquire(mrs, i);
            if (mr != null && mr.pd.ctx == ctx && mr.contains(addr, len)) {
                return mr;
            }
        }
        return null;
    }

    // ---- QP table (writes under tableLock; lookups by any thread) ----

    /**
     * Takes a QP number for a QP. The QP is published in the table by {@link #publishQp} once its number is
     * set, so no thread finds a QP without one.
     */
    int addQp(SoftQp qp) {
        synchronized (tableLock) {
            for (int tries = 0; tries < MAX_QP; tries++) {
                int qpn = nextQpn;
                nextQpn = nextQpn + 1 >= qps.length ? FIRST_QPN : nextQpn + 1;
                if (QPS.getAcquire(qps, qpn) == null && !reserved.get(qpn)) {
                    reserved.set(qpn);
                    return qpn;
                }
            }
        }
        throw new VerbsException(Errno.ENOMEM, "QP table full (" + MAX_QP + " QPs)");
    }

    /** QP numbers taken by {@link #addQp} and not yet published or removed: tableLock. */
    private final java.util.BitSet reserved = new java.util.BitSet();

    /** Takes QP number 1 for the GSI QP ({@link SoftGsi}). */
    int addGsiQp(SoftQp qp) {
        synchronized (tableLock) {
            if (QPS.getAcquire(qps, SoftGsi.GSI_QPN) != null || reserved.get(SoftGsi.GSI_QPN)) {
                throw new VerbsException(Errno.EBUSY, "the GSI QP (QP1) of " + name + " port 1 exists already: one"
                        + " MAD layer owns it (close the other first)");
            }
            reserved.set(SoftGsi.GSI_QPN);
            return SoftGsi.GSI_QPN;
        }
    }

    /** Makes a fully built QP visible to the receive dispatcher and the counters. */
    void publishQp(SoftQp qp) {
        synchronized (tableLock) {
            reserved.clear(qp.qpn);
            QPS.setRelease(qps, qp.qpn, qp);
        }
        fabric.timers.publishing(); // its counts reach the published counters through the engine agent
    }

    void removeQp(int qpn) {
        synchronized (tableLock) {
            reserved.clear(qpn);
            QPS.setRelease(qps, qpn, null);
        }
    }

    /** @return the QP with this number, or null (any thread) */
    SoftQp qpAt(int qpn) {
        return qpn > 0 && qpn < qps.length ? (SoftQp) QPS.getAcquire(qps, qpn) : null;
    }

    // ---- multicast groups (rxe_mcast.c); under tableLock, read by the dispatcher without it ----

    /**
     * Attaches a QP to a group (rxe_attach_mcast): a no-op if it already is; the first QP of a group makes
     * a RoCE device join the IP group, so the network delivers the group's datagrams to it.
     */
    void attachMcast(SoftQp qp, Gid mgid) {
        synchronized (tableLock) {
            attachMcastLocked(qp, mgid);
        }
    }

    private void attachMcastLocked(SoftQp qp, Gid mgid) {
        SoftQp[] members = mcgs.get(mgid);
        if (members == null) {
            if (mcgs.size() >= MAX_MCAST_GRP) {
                throw new VerbsException(Errno.ENOMEM, "device " + name + " has " + MAX_MCAST_GRP
                        + " multicast groups already (rxe RXE_MAX_MCAST_GRP); detach some first");
            }
            RoceLink r = roce;
            if (r != null) {
                r.joinGroup(mgid);
            }
            mcgs.put(mgid, new SoftQp[] {qp});
            return;
        }
        for (SoftQp m : members) {
            if (m == qp) {
                return; // rxe_attach_mcg: already a member
            }
        }
        if (members.length >= MAX_MCAST_QP_ATTACH) {
            throw new VerbsException(Errno.ENOMEM, "multicast group " + mgid + " has " + MAX_MCAST_QP_ATTACH
                    + " QPs attached already (rxe RXE_MAX_MCAST_QP_ATTACH)");
        }
        SoftQp[] grown = Arrays.copyOf(members, members.length + 1);
        grown[members.length] = qp;
        mcgs.put(mgid, grown);
    }

    /** Detaches a QP (rxe_detach_mcast); the last one out leaves the IP group. */
    void detachMcast(SoftQp qp, Gid mgid) {
        synchronized (tableLock) {
            detachMcastLocked(qp, mgid);
        }
    }

    private void detachMcastLocked(SoftQp qp, Gid mgid) {
        SoftQp[] members = mcgs.get(mgid);
        int at = -1;
        for (int i = 0; members != null && i < members.length; i++) {
            if (members[i] == qp) {
                at = i;
            }
        }
        if (at < 0) {
            throw new VerbsException(Errno.EINVAL, "QP " + qp.qpn + " is not attached to multicast group " + mgid
                    + " (rxe_detach_mcg)");
        }
        if (members.length == 1) {
            mcgs.remove(mgid);
            RoceLink r = roce;
            if (r != null) {
                r.leaveGroup(mgid);
            }
            return;
        }
        SoftQp[] shrunk = new SoftQp[members.length - 1];
        System.arraycopy(members, 0, shrunk, 0, at);
        System.arraycopy(members, at + 1, shrunk, at, members.length - at - 1);
        mcgs.put(mgid, shrunk);
    }

    /**
     * A packet to the multicast QPN (rxe_rcv_mcast_pkt): every QP attached to the destination group gets
     * it, each checked as a unicast target would be (transport type and state here, Q_Key in the
     * responder). The sender's own QP is not excluded: rxe delivers to every list member, and IPoIB
     * drops the copies of its own packets itself (ipoib_ib_handle_rx_wc).
     */
    private void receiveMcast(Packet p) {
        SoftQp[] members = p.dgid != null && p.dgid.isMulticast() ? mcgs.get(p.dgid) : null;
        if (members == null) {
            count(SoftCounter.DROP_NO_MCAST_GROUP);
            return;
        }
        if ((p.opcode & 0xE0) != Opcodes.UD || (p.mask() & Opcodes.M_REQ) == 0) {
            count(SoftCounter.DROP_BAD_STATE); // rxe check_type_state: multicast is UD only
            return;
        }
        for (SoftQp qp : members) {
            qp.deliver(p); // state and Q_Key checked per member (rxe check_type_state, check_keys)
        }
    }

    /**
     * Attaches the device to another link (a RoCEv2 one, or a decorator of the current one).
     *
     * @param l the link its engine sends through from now on
     */
    void link(Link l) {
        link = l;
    }

    /** {@return the link the device sends through} */
    Link link() {
        return link;
    }

    // ---- receive dispatcher (rxe_recv.c); any thread ----

    /**
     * Takes a packet from a link (rxe_rcv) and hands it to its QP ({@link SoftQp#deliver}: processed now, on
     * this thread or by the QP's owner, or kept in the QP's inbox). The packet object is valid only during the
     * call; its payload after the call only as {@link Packet#payloadStable} says.
     */
    void receive(Packet p) {
        try {
            dispatch(p);
        } catch (Throwable t) {
            // no engine thread dies of one packet: the QP it was for goes to ERR, the thread carries on
            // (a QP's own work catches its failures in OwnerWork.process: this is the dispatch itself, which owns no
            // QP, so no QP is touched)
            EngineErrors.receiveFailed(this, null, p, t);
        }
    }

    private void dispatch(Packet p) {
        int mask = p.mask();
        if (mask == 0) {
            count(SoftCounter.RCVD_PKTS);
            count(SoftCounter.DROP_MALFORMED);
            return;
        }
        int qpn = p.destQpn;
        if (qpn == org.rdma4j.verbs.QueuePair.MULTICAST_QPN) {
            count(SoftCounter.RCVD_PKTS);
            receiveMcast(p);
            return;
        }
        SoftQp qp = qpAt(qpn);
        if (qp == null) {
            count(SoftCounter.RCVD_PKTS);
            count(SoftCounter.DROP_NO_QP);
            return;
        }
        // rxe check_type_state: the transport bits of the opcode must match the QP type.
        int transport = p.opcode & 0xE0;
        int expected = switch (qp.type) {
            case RC -> Opcodes.RC;
            case UC -> Opcodes.UC;
            case UD -> Opcodes.UD;
        };
        if (transport != expected) {
            count(SoftCounter.RCVD_PKTS);
            count(SoftCounter.DROP_BAD_STATE);
            return;
        }
        // rxe check_addr: a connected QP takes packets only from its peer's address to its own, so a
        // third host that guesses a QPN and PSN cannot inject into the connection.
        // (identity first: in process both GIDs are the devices' own objects, SoftQp.modify, so the check reads
        // no GID's line)
        Gid qd = qp.dgid;
        Gid qs = qp.sgid;
        if (qp.type != QpType.UD && qs != null && !((qd == p.sgid || qd.equals(p.sgid)) && (qs == p.dgid || qs.equals(p.dgid)))) {
            count(SoftCounter.RCVD_PKTS);
            count(SoftCounter.DROP_BAD_ADDRESS);
            return;
        }
        qp.deliver(p); // counts RCVD_PKTS on the QP
    }

    @Override
    public String toString() {
        return "SoftDevice{" + name + ", gids=" + Arrays.toString(gids) + (roce != null ? ", " + roce : "") + '}';
    }
}
