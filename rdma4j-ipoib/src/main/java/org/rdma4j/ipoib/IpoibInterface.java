package org.rdma4j.ipoib;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.Inet4Address;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

import org.rdma4j.common.NanoClock;
import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.Dma;
import org.rdma4j.verbs.DmaDirection;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * An IPoIB interface in datagram mode (RFC 4391): a TUN interface whose IPv4 packets travel as UD messages
 * with the 4-byte IPoIB header, and ARP with 20-byte hardware addresses over the partition's broadcast
 * group, which the interface's UD QP joins.
 *
 * <p>Data path. Receive: a ring of pre-posted buffers (40-byte GRH area + header + MTU) in one registered
 * region; each poll takes up to 32 completions and reposts their buffers as one chain (batched refill);
 * the receive thread sleeps on the CQ's completion channel when idle. Send: the TUN packet is read straight
 * into a slot of a registered send ring behind room for the header, so a packet is posted where it was
 * read; one send in 16 is signalled (completion moderation) and its completion frees every earlier slot,
 * since a UD send queue completes in order. ARP and packets that waited for resolution use a second, small
 * ring, each send signalled. Nothing is allocated per packet on either path. Buffers are registered memory
 * regions; mapping them through the DMA-mapping API is left for when that API is in main.
 *
 * <p>Threads: {@code ipoib-tx-<if>} (TUN to fabric) and {@code ipoib-rx-<if>} (fabric to TUN, ARP, aging);
 * the neighbour table and the send rings are guarded by one lock.
 */
public final class IpoibInterface implements AutoCloseable {
    private static final int RX_RING = 1024;
    private static final int TX_RING = 128;
    private static final int CTL_RING = 64;
    private static final int PENDING_BUFFERS = 64;
    private static final int SIGNAL_EVERY = 16;
    private static final int POLL_BATCH = 32;
    private static final long CTL_BIT = 1L << 62;
    private static final int IDLE_WAIT_MS = 100;
    private static final long TICK_NS = 100_000_000L;
    private static final ValueLayout.OfInt INT_BE = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfShort SHORT_BE = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfLong LONG_BE = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    /**
     * How to set an interface up.
     *
     * @param ifname      TUN interface name
     * @param address     the interface's IPv4 address
     * @param prefixLen   its prefix length
     * @param mtu         the IPoIB MTU, or 0 for min(2044, port MTU - 4)
     * @param pkey        partition key (0xFFFF: default partition)
     * @param qkey        the broadcast group's Q_Key
     * @param broadcast   the broadcast group, or null to derive it from the P_Key and the port's GID type
     * @param clock       time for neighbour aging
     * @param reachableNs how long a learned neighbour stays usable without a new ARP packet
     */
    public record Config(String ifname, Inet4Address address, int prefixLen, int mtu, int pkey, int qkey, Gid broadcast,
                         NanoClock clock, long reachableNs) {
        /**
         * @param ifname    TUN interface name
         * @param address   IPv4 address
         * @param prefixLen prefix length
         * @return defaults for the rest: derived MTU, P_Key 0xFFFF, Q_Key 0x0B1B, derived group, system clock,
         *     neighbours reachable for 60 s
         */
        public static Config of(String ifname, Inet4Address address, int prefixLen) {
            return new Config(ifname, address, prefixLen, 0, Ipoib.DEFAULT_PKEY, Ipoib.DEFAULT_QKEY, null,
                    NanoClock.SYSTEM, 60_000_000_000L);
        }
    }

    private final Config cfg;
    private final Consumer<String> log;
    private final int mtu;
    private final int ip;
    private final int netmask;
    private final AtomicLongArray counters = new AtomicLongArray(IpoibCounter.values().length);
    private final ReentrantLock lock = new ReentrantLock();
    private final List<AutoCloseable> resources = new ArrayList<>();
    private final Arena arena = Arena.ofShared();

    private Context ctx;
    private ProtectionDomain pd;
    private CompletionChannel channel;
    private CompletionQueue sendCq;
    private CompletionQueue recvCq;
    private QueuePair qp;
    private Gid gid;
    private Gid broadcast;
    private boolean attached;
    private HardwareAddress self;
    private AddressHandle broadcastAh;
    private PacketPort tun;
    private NeighbourCache<AddressHandle> neighbours;

    // receive ring
    private int rxSlot;
    private Dma dma;
    private int dmaLkey;
    private MemorySegment rxRing;
    /** Each receive slot (GRH area, header, MTU) and its DMA address: mapped FROM_DEVICE once, for the ring's life. */
    private MemorySegment[] rxSlots;
    private long[] rxDma;
    private int rxMapped;
    private RecvWorkRequest[] rxWrs;
    /** Each receive slot's IP payload (after GRH and header), made once so the data path slices nothing. */
    private MemorySegment[] rxPayload;
    private final RecvWorkRequest[] refill = new RecvWorkRequest[POLL_BATCH];
    private final WorkCompletion[] rxWcs = newWcs(POLL_BATCH);
    // send rings (lock)
    private int txSlot;
    private MemorySegment txRing;
    /** Each send slot (header + MTU) and its DMA address while a send from it is outstanding. */
    private MemorySegment[] txSlots;
    private long[] txDma;
    /** Each send slot's IP payload (after the header), where the TUN read puts the packet. */
    private MemorySegment[] txPayload;
    private long txPosted;
    private long txDone;
    private MemorySegment ctlRing;
    private MemorySegment[] ctlSlots;
    private long[] ctlDma;
    private long ctlPosted;
    private long ctlDone;
    private final SendWorkRequest swr = new SendWorkRequest(1);
    private final WorkCompletion[] txWcs = newWcs(POLL_BATCH);
    // packets waiting for resolution (lock)
    private MemorySegment pendingPool;
    private final int[] pendingLength = new int[PENDING_BUFFERS];
    private final int[] pendingFree = new int[PENDING_BUFFERS];
    private int pendingFreeCount;
    /** Address handles replaced or expired, closed once every send posted before then has completed. */
    private final List<Retired> retired = new ArrayList<>();
    private final ArpPacket rxArp = new ArpPacket();
    private final ArpPacket ctlArp = new ArpPacket();

    private volatile boolean running;
    private Thread txThread;
    private Thread rxThread;
    private long nextTickNs;

    private record Retired(AddressHandle ah, long txSeq, long ctlSeq) {
    }

    private IpoibInterface(Config cfg, int mtu, Consumer<String> log) {
        this.cfg = cfg;
        this.mtu = mtu;
        this.log = log;
        byte[] a = cfg.address().getAddress();
        this.ip = ((a[0] & 0xFF) << 24) | ((a[1] & 0xFF) << 16) | ((a[2] & 0xFF) << 8) | (a[3] & 0xFF);
        this.netmask = cfg.prefixLen() == 0 ? 0 : -1 << (32 - cfg.prefixLen());
    }

    /**
     * Opens the device, creates the UD QP, joins the broadcast group, creates and configures the TUN
     * interface, and starts the data path.
     *
     * @param device the verbs device (port 1)
     * @param cfg    configuration
     * @param log    receives one line per learned or expired neighbour
     * @return the running interface
     * @throws IOException     if the TUN interface cannot be created or configured
     * @throws VerbsException if a verbs call fails
     */
    public static IpoibInterface start(Device device, Config cfg, Consumer<String> log) throws IOException {
        return start(device, cfg, null, log);
    }

    /**
     * As {@link #start(Device, Config, Consumer)}, exchanging packets with a given port instead of a TUN
     * interface it creates (tests without root).
     *
     * @param device the verbs device (port 1)
     * @param cfg    configuration (its ifname and address are not applied to the port)
     * @param port   the IP side, or null to create and configure a TUN interface
     * @param log    receives one line per learned or expired neighbour
     * @return the running interface
     * @throws IOException     if the TUN interface cannot be created or configured
     * @throws VerbsException if a verbs call fails
     */
    public static IpoibInterface start(Device device, Config cfg, PacketPort port, Consumer<String> log)
            throws IOException {
        if (cfg.prefixLen() < 1 || cfg.prefixLen() > 30) {
            throw new IllegalArgumentException("prefix length " + cfg.prefixLen() + " (1..30)");
        }
        Context ctx = device.open();
        IpoibInterface i;
        try {
            int portMtu = ctx.queryPort(1).activeMtu().bytes();
            int mtu = cfg.mtu() == 0 ? Math.min(Ipoib.DEFAULT_MTU, portMtu - Ipoib.HEADER_BYTES) : cfg.mtu();
            if (mtu < 576 || mtu + Ipoib.HEADER_BYTES > portMtu) {
                throw new VerbsException(Errno.EINVAL, "IPoIB MTU " + mtu + " does not fit the port's MTU " + portMtu
                        + " less the 4-byte header (and IPv4 needs at least 576)");
            }
            i = new IpoibInterface(cfg, mtu, log);
            i.ctx = ctx;
        } catch (RuntimeException e) {
            ctx.close();
            throw e;
        }
        try {
            i.setUp(port);
        } catch (IOException | RuntimeException e) {
            i.close();
            throw e;
        }
        return i;
    }

    private void setUp(PacketPort port) throws IOException {
        gid = ctx.queryGid(1, 0);
        broadcast = cfg.broadcast() != null ? cfg.broadcast()
                : gid.isIpv4Mapped() ? Ipoib.broadcastGidIpv4(cfg.pkey()) : Ipoib.broadcastGid(cfg.pkey());
        pd = track(ctx.allocPd());
        channel = track(ctx.createCompChannel());
        sendCq = track(ctx.createCq(TX_RING + CTL_RING, null, 0));
        recvCq = track(ctx.createCq(RX_RING, channel, 0));
        qp = track(pd.createQp(new QpInitAttributes().type(QpType.UD).sendCq(sendCq).recvCq(recvCq)
                .cap(new QpCapabilities(TX_RING + CTL_RING, RX_RING, 1, 1, 0))));
        qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1).qkey(cfg.qkey()));
        qp.modify(new QpAttributes().state(QpState.RTR));
        qp.modify(new QpAttributes().state(QpState.RTS).sqPsn(0));
        self = new HardwareAddress(0, qp.qpNum(), gid);
        // the broadcast group carries ARP (RFC 4391 section 4: every IPoIB interface joins it)
        qp.attachMcast(broadcast, 0);
        attached = true;
        broadcastAh = track(pd.createAh(av(broadcast)));

        // packet buffers are not registered: they are DMA-mapped per I/O through the device (the receive
        // ring once, as Linux IPoIB keeps its rx ring mapped; each send at post, unmapped on completion)
        dma = ctx.dma();
        dmaLkey = pd.localDmaLkey();
        rxSlot = align(Ipoib.GRH_BYTES + Ipoib.HEADER_BYTES + mtu, 64);
        rxRing = arena.allocate((long) rxSlot * RX_RING, 4096);
        txSlot = align(Ipoib.HEADER_BYTES + mtu, 64);
        txRing = arena.allocate((long) txSlot * TX_RING, 4096);
        ctlRing = arena.allocate((long) txSlot * CTL_RING, 4096);
        txSlots = slots(txRing, TX_RING, txSlot, Ipoib.HEADER_BYTES + mtu);
        txDma = new long[TX_RING];
        ctlSlots = slots(ctlRing, CTL_RING, txSlot, Ipoib.HEADER_BYTES + mtu);
        ctlDma = new long[CTL_RING];
        rxSlots = slots(rxRing, RX_RING, rxSlot, Ipoib.GRH_BYTES + Ipoib.HEADER_BYTES + mtu);
        rxDma = new long[RX_RING];
        for (int k = 0; k < RX_RING; k++) {
            long a = dma.map(rxSlots[k], DmaDirection.FROM_DEVICE);
            if (dma.mappingError(a)) {
                throw new VerbsException(Errno.ENOMEM, "cannot DMA-map receive buffer " + k + " of " + RX_RING
                        + " (IOMMU window or bounce pool too small for the ring)");
            }
            rxDma[k] = a;
            rxMapped = k + 1;
        }
        pendingPool = arena.allocate((long) mtu * PENDING_BUFFERS, 64);
        for (int k = 0; k < PENDING_BUFFERS; k++) {
            pendingFree[k] = k;
        }
        pendingFreeCount = PENDING_BUFFERS;
        neighbours = new NeighbourCache<>(cfg.clock(), cfg.reachableNs(), 1_000_000_000L, 3, 3, 1024);

        txPayload = new MemorySegment[TX_RING];
        for (int k = 0; k < TX_RING; k++) {
            txPayload[k] = txRing.asSlice((long) k * txSlot + Ipoib.HEADER_BYTES, mtu);
        }
        rxPayload = new MemorySegment[RX_RING];
        for (int k = 0; k < RX_RING; k++) {
            rxPayload[k] = rxRing.asSlice((long) k * rxSlot + Ipoib.GRH_BYTES + Ipoib.HEADER_BYTES, mtu);
        }
        rxWrs = new RecvWorkRequest[RX_RING];
        for (int k = 0; k < RX_RING; k++) {
            rxWrs[k] = new RecvWorkRequest(1).wrId(k).numSge(1);
            rxWrs[k].sge(0).dma(rxDma[k], Ipoib.GRH_BYTES + Ipoib.HEADER_BYTES + mtu, dmaLkey, rxSlots[k]);
        }
        int posted = qp.postRecv(rxWrs, RX_RING);
        if (posted != RX_RING) {
            throw new VerbsException(Errno.ENOMEM, "could post only " + posted + " of " + RX_RING + " receive buffers: "
                    + rxWrs[posted].postError());
        }
        recvCq.reqNotify(false);

        if (port != null) {
            tun = port;
        } else {
            TunDevice t = TunDevice.open(cfg.ifname());
            tun = t;
            disableIpv6(t.name());
            t.configure(mtu, cfg.address(), cfg.prefixLen());
        }

        running = true;
        nextTickNs = cfg.clock().nanoTime() + TICK_NS;
        rxThread = Thread.ofPlatform().name("ipoib-rx-" + tun.name()).daemon().start(this::rxLoop);
        txThread = Thread.ofPlatform().name("ipoib-tx-" + tun.name()).daemon().start(this::txLoop);
        announce();
    }

    /**
     * A gratuitous ARP request for our own address (RFC 5227 announcement) to the broadcast group: hosts that
     * knew this address under an older hardware address (this daemon before a restart, with another QPN)
     * update their entry at once instead of sending to a dead QP until it ages out.
     */
    private void announce() {
        lock.lock();
        try {
            sendArp(ArpPacket.OP_REQUEST, null, ip, broadcastAh, QueuePair.MULTICAST_QPN);
        } finally {
            lock.unlock();
        }
    }

    /**
     * IPv6 over this link would need neighbour discovery with the IPoIB link-layer option (RFC 4391 section
     * 9.1); until then the interface is IPv4-only, so the kernel does not send router solicitations that
     * would only be counted as drops.
     */
    private static void disableIpv6(String ifname) {
        Path p = Path.of("/proc/sys/net/ipv6/conf", ifname, "disable_ipv6");
        try {
            if (Files.exists(p)) {
                Files.writeString(p, "1");
            }
        } catch (IOException e) {
            // not fatal: IPv6 packets are dropped and counted anyway
        }
    }

    private AhAttributes av(Gid dgid) {
        return new AhAttributes().dgid(dgid).sgidIndex(0).portNum(1).hopLimit(64).global(true);
    }

    private <T extends AutoCloseable> T track(T r) {
        resources.add(r);
        return r;
    }

    private static MemorySegment[] slots(MemorySegment ring, int n, int stride, int size) {
        MemorySegment[] out = new MemorySegment[n];
        for (int k = 0; k < n; k++) {
            out[k] = ring.asSlice((long) k * stride, size);
        }
        return out;
    }

    private static int align(int v, int a) {
        return (v + a - 1) & -a;
    }

    private static WorkCompletion[] newWcs(int n) {
        WorkCompletion[] w = new WorkCompletion[n];
        for (int k = 0; k < n; k++) {
            w[k] = new WorkCompletion();
        }
        return w;
    }

    /** @return the TUN interface name */
    public String name() {
        return tun.name();
    }

    /** @return the interface's MTU */
    public int mtu() {
        return mtu;
    }

    /** @return this interface's 20-byte hardware address (QPN and GID) */
    public HardwareAddress hardwareAddress() {
        return self;
    }

    /** @return the broadcast group the interface joined */
    public Gid broadcastGid() {
        return broadcast;
    }

    /**
     * @param c a counter
     * @return its value
     */
    public long counter(IpoibCounter c) {
        return counters.get(c.ordinal());
    }

    /** @return every counter, one "name value" per line */
    public String countersText() {
        StringBuilder sb = new StringBuilder();
        for (IpoibCounter c : IpoibCounter.values()) {
            sb.append(c.name().toLowerCase(java.util.Locale.ROOT)).append(' ').append(counter(c)).append('\n');
        }
        return sb.toString();
    }

    /** @return the neighbour table, one line per entry */
    public List<String> neighbourLines() {
        List<String> out = new ArrayList<>();
        lock.lock();
        try {
            neighbours.forEach(e -> out.add(ipString(e.ip()) + " " + e.state().name().toLowerCase(java.util.Locale.ROOT)
                    + (e.hardware() != null ? " lladdr " + e.hardware() : "")));
        } finally {
            lock.unlock();
        }
        return out;
    }

    private void count(IpoibCounter c) {
        counters.incrementAndGet(c.ordinal());
    }

    private void add(IpoibCounter c, long v) {
        counters.addAndGet(c.ordinal(), v);
    }

    // ------------------------------------------------------------------ TUN -> fabric

    private void txLoop() {
        try {
            while (running) {
                long seq;
                lock.lock();
                try {
                    reapSends();
                    seq = txPosted;
                    if (seq - txDone >= TX_RING) {
                        seq = -1;
                    }
                } finally {
                    lock.unlock();
                }
                if (seq < 0) {
                    waitForSendRoom();
                    continue;
                }
                // only this thread posts to the data ring, so slot seq stays ours until we post it
                int slot = (int) (seq % TX_RING);
                MemorySegment ring = txRing;
                long base = (long) slot * txSlot;
                int n = tun.read(txPayload[slot], IDLE_WAIT_MS);
                if (n < 0) {
                    return;
                }
                if (n > 0) {
                    route(ring, base, n);
                }
            }
        } catch (IOException | RuntimeException e) {
            if (running) {
                log.accept("ipoib: transmit thread stopped: " + e);
            }
        }
    }

    /** Bounded wait for a signalled completion to free send slots; drops nothing (TUN queues meanwhile). */
    private void waitForSendRoom() {
        for (int spins = 0; spins < 1_000 && running; spins++) {
            lock.lock();
            try {
                reapSends();
                if (txPosted - txDone < TX_RING) {
                    return;
                }
            } finally {
                lock.unlock();
            }
            Thread.onSpinWait();
        }
        java.util.concurrent.locks.LockSupport.parkNanos(50_000);
    }

    /** Decides where an IPv4 packet from the kernel goes (RFC 4391: unicast to the neighbour, broadcast and multicast to the group). */
    private void route(MemorySegment ring, long base, int n) {
        long p = base + Ipoib.HEADER_BYTES;
        int vihl = ring.get(ValueLayout.JAVA_BYTE, p) & 0xFF;
        if ((vihl >>> 4) == 6) {
            count(IpoibCounter.TX_DROP_IPV6);
            return;
        }
        if ((vihl >>> 4) != 4 || n < 20) {
            count(IpoibCounter.TX_DROP_MALFORMED);
            return;
        }
        int dst = ring.get(INT_BE, p + 16);
        boolean toGroup = (dst >>> 28) == 0xE || dst == -1 || dst == (ip | ~netmask);
        lock.lock();
        try {
            if (toGroup) {
                // IP broadcast and multicast go to the broadcast group (phase 1 joins no other IP groups)
                postData(base, n, broadcastAh, QueuePair.MULTICAST_QPN);
                return;
            }
            if ((dst & netmask) != (ip & netmask) || dst == ip) {
                count(IpoibCounter.TX_DROP_NO_ROUTE);
                return;
            }
            NeighbourCache.Entry<AddressHandle> e = neighbours.get(dst);
            if (e != null && e.ah() != null) { // reachable, or being probed while in use
                neighbours.used(e);
                postData(base, n, e.ah(), e.hardware().qpn());
                return;
            }
            boolean fresh = e == null;
            if (fresh) {
                e = neighbours.startResolving(dst);
                if (e == null) {
                    count(IpoibCounter.TX_DROP_UNRESOLVED);
                    return;
                }
            }
            queue(e, ring, p, n);
            if (fresh) {
                sendArp(ArpPacket.OP_REQUEST, null, dst, broadcastAh, QueuePair.MULTICAST_QPN);
            }
        } finally {
            lock.unlock();
        }
    }

    /** Copies a packet into the pending pool and onto its neighbour's queue (lock held). */
    private void queue(NeighbourCache.Entry<AddressHandle> e, MemorySegment src, long off, int n) {
        if (pendingFreeCount == 0) {
            count(IpoibCounter.TX_DROP_UNRESOLVED);
            return;
        }
        int b = pendingFree[pendingFreeCount - 1];
        if (!neighbours.enqueue(e, b)) {
            count(IpoibCounter.TX_DROP_UNRESOLVED);
            return;
        }
        pendingFreeCount--;
        MemorySegment.copy(src, off, pendingPool, (long) b * mtu, n);
        pendingLength[b] = n;
    }

    /** Posts data-ring slot {@code txPosted} (lock held; the packet is already in it). */
    private void postData(long base, int n, AddressHandle ah, int qpn) {
        Ipoib.writeHeader(txRing, base, Ipoib.TYPE_IPV4);
        long seq = txPosted;
        int slot = (int) (seq % TX_RING);
        // map after the CPU wrote the packet (the device may copy it at map time: bounce buffers)
        long a = dma.map(txSlots[slot], DmaDirection.TO_DEVICE);
        if (dma.mappingError(a)) {
            count(IpoibCounter.TX_DROP_DMA);
            return;
        }
        boolean signal = (seq % SIGNAL_EVERY) == SIGNAL_EVERY - 1;
        swr.clear().wrId(seq + 1).opcode(WrOpcode.SEND).sendFlags(signal ? SendFlags.SIGNALED : 0).numSge(1)
                .ah(ah).remoteQpn(qpn).remoteQkey(cfg.qkey());
        swr.sge(0).dma(a, Ipoib.HEADER_BYTES + n, dmaLkey, txSlots[slot]);
        if (!qp.postSend(swr)) {
            dma.unmap(a, txSlots[slot].byteSize(), DmaDirection.TO_DEVICE);
            count(IpoibCounter.TX_ERRORS);
            return;
        }
        txDma[slot] = a;
        txPosted = seq + 1;
        count(IpoibCounter.TX_PACKETS);
        add(IpoibCounter.TX_BYTES, n);
    }

    /**
     * Takes a control-ring slot for an ARP packet or a resolved packet (lock held).
     *
     * @return the slot's byte offset in the control region, or -1 when the ring is full
     */
    private long ctlSlot() {
        reapSends();
        if (ctlPosted - ctlDone >= CTL_RING) {
            return -1;
        }
        return (ctlPosted % CTL_RING) * txSlot;
    }

    private boolean postCtl(long base, int type, int len, AddressHandle ah, int qpn) {
        Ipoib.writeHeader(ctlRing, base, type);
        long seq = ctlPosted;
        int slot = (int) (seq % CTL_RING);
        long a = dma.map(ctlSlots[slot], DmaDirection.TO_DEVICE);
        if (dma.mappingError(a)) {
            count(IpoibCounter.TX_DROP_DMA);
            return false;
        }
        swr.clear().wrId(CTL_BIT | (seq + 1)).opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED).numSge(1)
                .ah(ah).remoteQpn(qpn).remoteQkey(cfg.qkey());
        swr.sge(0).dma(a, Ipoib.HEADER_BYTES + len, dmaLkey, ctlSlots[slot]);
        if (!qp.postSend(swr)) {
            dma.unmap(a, ctlSlots[slot].byteSize(), DmaDirection.TO_DEVICE);
            count(IpoibCounter.TX_ERRORS);
            return false;
        }
        ctlDma[slot] = a;
        ctlPosted = seq + 1;
        return true;
    }

    /** Sends an ARP request (to the group) or reply (to the asker) (lock held). */
    private void sendArp(int op, HardwareAddress tha, int tpa, AddressHandle ah, int qpn) {
        long base = ctlSlot();
        if (base < 0) {
            count(IpoibCounter.TX_DROP_RING_FULL);
            return;
        }
        ctlArp.wrap(ctlRing, base + Ipoib.HEADER_BYTES).write(op, self, ip, tha, tpa);
        if (postCtl(base, Ipoib.TYPE_ARP, ArpPacket.BYTES, ah, qpn)) {
            count(op == ArpPacket.OP_REQUEST ? IpoibCounter.ARP_REQUESTS_SENT : IpoibCounter.ARP_REPLIES_SENT);
        }
    }

    /** Polls the send CQ and frees slots up to each signalled completion (lock held). */
    private void reapSends() {
        int n = sendCq.poll(txWcs, POLL_BATCH);
        for (int k = 0; k < n; k++) {
            WorkCompletion wc = txWcs[k];
            if (wc.status() != WcStatus.SUCCESS) {
                count(IpoibCounter.TX_ERRORS);
            }
            long id = wc.wrId();
            // a UD send queue completes in order: every send up to this one is done, unmap them all
            if ((id & CTL_BIT) != 0) {
                for (long q = ctlDone; q < (id & ~CTL_BIT); q++) {
                    int slot = (int) (q % CTL_RING);
                    dma.unmap(ctlDma[slot], ctlSlots[slot].byteSize(), DmaDirection.TO_DEVICE);
                }
                ctlDone = Math.max(ctlDone, id & ~CTL_BIT);
            } else {
                for (long q = txDone; q < id; q++) {
                    int slot = (int) (q % TX_RING);
                    dma.unmap(txDma[slot], txSlots[slot].byteSize(), DmaDirection.TO_DEVICE);
                }
                txDone = Math.max(txDone, id);
            }
        }
        if (!retired.isEmpty()) {
            closeRetired();
        }
    }

    private void closeRetired() {
        for (int k = retired.size() - 1; k >= 0; k--) {
            Retired r = retired.get(k);
            if (txDone >= r.txSeq() && ctlDone >= r.ctlSeq()) {
                retired.remove(k);
                r.ah().close();
                resources.remove(r.ah());
            }
        }
    }

    private void retire(AddressHandle ah) {
        if (ah != null) {
            // sends posted so far may still use it: close it once they have all completed (in order)
            retired.add(new Retired(ah, txPosted, ctlPosted));
        }
    }

    // ------------------------------------------------------------------ fabric -> TUN

    private void rxLoop() {
        try {
            while (running) {
                int n = recvCq.poll(rxWcs, POLL_BATCH);
                if (n == 0) {
                    recvCq.reqNotify(false);
                    n = recvCq.poll(rxWcs, POLL_BATCH); // a completion may have come before arming
                    if (n == 0) {
                        CompletionQueue ev = channel.getCqEvent(Duration.ofMillis(IDLE_WAIT_MS));
                        if (ev != null) {
                            ev.ackEvents(1);
                        }
                        tick();
                        continue;
                    }
                }
                int k = 0;
                for (int w = 0; w < n; w++) {
                    WorkCompletion wc = rxWcs[w];
                    int slot = (int) wc.wrId();
                    if (wc.status() == WcStatus.WR_FLUSH_ERR && !running) {
                        continue;
                    }
                    long size = rxSlots[slot].byteSize();
                    if (wc.status() != WcStatus.SUCCESS) {
                        count(IpoibCounter.RX_ERRORS);
                    } else {
                        dma.syncForCpu(rxDma[slot], size, DmaDirection.FROM_DEVICE); // see what the device wrote
                        receive(slot, wc);
                    }
                    dma.syncForDevice(rxDma[slot], size, DmaDirection.FROM_DEVICE); // the device owns it again
                    refill[k++] = rxWrs[slot];
                }
                if (k > 0 && running) {
                    int posted = qp.postRecv(refill, k); // the batch goes back as one chain
                    if (posted != k) {
                        count(IpoibCounter.RX_ERRORS);
                    }
                }
                tick();
            }
        } catch (IOException | RuntimeException e) {
            if (running) {
                log.accept("ipoib: receive thread stopped: " + e);
            }
        }
    }

    private void receive(int slot, WorkCompletion wc) throws IOException {
        MemorySegment ring = rxRing;
        long base = (long) slot * rxSlot;
        int len = wc.byteLen();
        if (len < Ipoib.GRH_BYTES + Ipoib.HEADER_BYTES || len > Ipoib.GRH_BYTES + Ipoib.HEADER_BYTES + mtu) {
            count(IpoibCounter.RX_DROP_MALFORMED);
            return;
        }
        // the source GID from the GRH area: an IPv6 header, or 20 zero bytes and an IPv4 header (RoCEv2 over
        // IPv4, as rxe writes it: ib_get_rdma_header_version tells them apart by the version nibble)
        long sgidHi;
        long sgidLo;
        if (((ring.get(ValueLayout.JAVA_BYTE, base) & 0xF0) >>> 4) == 6) {
            sgidHi = ring.get(LONG_BE, base + 8);
            sgidLo = ring.get(LONG_BE, base + 16);
        } else {
            sgidHi = 0;
            sgidLo = 0x0000_FFFF_0000_0000L | (ring.get(INT_BE, base + 32) & 0xFFFF_FFFFL);
        }
        if (wc.srcQp() == self.qpn() && sgidHi == gid.hi() && sgidLo == gid.lo()) {
            count(IpoibCounter.RX_DROP_OWN);
            return;
        }
        long h = base + Ipoib.GRH_BYTES;
        int payload = len - Ipoib.GRH_BYTES - Ipoib.HEADER_BYTES;
        long p = h + Ipoib.HEADER_BYTES;
        switch (Ipoib.readType(ring, h)) {
            case Ipoib.TYPE_IPV4 -> {
                int vihl = payload >= 20 ? ring.get(ValueLayout.JAVA_BYTE, p) & 0xFF : 0;
                int total = payload >= 20 ? ring.get(SHORT_BE, p + 2) & 0xFFFF : 0;
                if ((vihl >>> 4) != 4 || (vihl & 0xF) < 5 || total < (vihl & 0xF) * 4 || total > payload) {
                    count(IpoibCounter.RX_DROP_MALFORMED);
                    return;
                }
                if (tun.write(rxPayload[slot], total)) {
                    count(IpoibCounter.RX_PACKETS);
                    add(IpoibCounter.RX_BYTES, total);
                } else {
                    count(IpoibCounter.RX_DROP_TUN);
                }
            }
            case Ipoib.TYPE_ARP -> receiveArp(ring, p, payload, wc.srcQp(), sgidHi, sgidLo);
            default -> count(IpoibCounter.RX_DROP_UNKNOWN_TYPE);
        }
    }

    private void receiveArp(MemorySegment ring, long p, int payload, int srcQp, long sgidHi, long sgidLo) {
        ArpPacket arp = rxArp.wrap(ring, p);
        if (arp.validate(payload) != ArpPacket.Verdict.OK) {
            count(IpoibCounter.RX_DROP_BAD_ARP);
            return;
        }
        HardwareAddress sha = arp.senderHardware();
        // the sender's hardware address must be where the message came from: a host cannot claim another's
        // QP or GID (the fabric's GRH and DETH say who sent it)
        if (sha.qpn() != srcQp || sha.gid().hi() != sgidHi || sha.gid().lo() != sgidLo) {
            count(IpoibCounter.RX_DROP_ARP_SPOOFED);
            return;
        }
        count(IpoibCounter.RX_ARP);
        int spa = arp.senderIp();
        int tpa = arp.targetIp();
        boolean forUs = tpa == ip;
        if (spa == 0 || spa == ip || (spa & netmask) != (ip & netmask)) {
            return; // probes and foreign subnets teach nothing (not an error)
        }
        lock.lock();
        try {
            NeighbourCache.Entry<AddressHandle> known = neighbours.get(spa);
            // RFC 826: update an entry we have; add one only when the packet is addressed to us
            if (known != null || forUs) {
                learn(spa, sha, known);
            }
            if (forUs && arp.operation() == ArpPacket.OP_REQUEST) {
                NeighbourCache.Entry<AddressHandle> e = neighbours.get(spa);
                if (e != null && e.ah() != null) {
                    sendArp(ArpPacket.OP_REPLY, sha, spa, e.ah(), sha.qpn());
                }
            }
        } finally {
            lock.unlock();
        }
    }

    /** Records a neighbour's address, makes an address handle when it is new or changed, flushes its queue (lock held). */
    private void learn(int spa, HardwareAddress sha, NeighbourCache.Entry<AddressHandle> known) {
        boolean changed = known == null || known.ah() == null || !sha.equals(known.hardware());
        NeighbourCache.Entry<AddressHandle> e = neighbours.confirm(spa, sha);
        if (e == null || !changed) {
            return;
        }
        AddressHandle ah;
        try {
            ah = track(pd.createAh(av(sha.gid())));
        } catch (VerbsException ex) {
            log.accept("ipoib: cannot reach " + ipString(spa) + " at " + sha + ": " + ex.getMessage());
            return;
        }
        retire(neighbours.install(e, ah));
        count(IpoibCounter.NEIGHBOURS_LEARNED);
        log.accept("neighbour " + ipString(spa) + " lladdr " + sha + " learned");
        if (e.pendingCount() > 0) {
            neighbours.used(e);
        }
        neighbours.drain(e, b -> {
            int n = pendingLength[b];
            long base = ctlSlot();
            if (base < 0) {
                count(IpoibCounter.TX_DROP_RING_FULL);
            } else {
                MemorySegment.copy(pendingPool, (long) b * mtu, ctlRing, base + Ipoib.HEADER_BYTES, n);
                if (postCtl(base, Ipoib.TYPE_IPV4, n, ah, sha.qpn())) {
                    count(IpoibCounter.TX_PACKETS);
                    add(IpoibCounter.TX_BYTES, n);
                }
            }
            pendingFree[pendingFreeCount++] = b;
        });
    }

    private final NeighbourCache.Listener<AddressHandle> aging = new NeighbourCache.Listener<>() {
        @Override
        public void retry(NeighbourCache.Entry<AddressHandle> e) {
            sendArp(ArpPacket.OP_REQUEST, null, e.ip(), broadcastAh, QueuePair.MULTICAST_QPN);
        }

        @Override
        public void probe(NeighbourCache.Entry<AddressHandle> e) {
            // unicast to the address we have (RFC 1122 2.3.2.1: unicast poll before falling back to broadcast)
            sendArp(ArpPacket.OP_REQUEST, e.hardware(), e.ip(), e.ah(), e.hardware().qpn());
        }

        @Override
        public void removed(NeighbourCache.Entry<AddressHandle> e) {
            neighbours.drain(e, b -> {
                count(IpoibCounter.TX_DROP_UNRESOLVED);
                pendingFree[pendingFreeCount++] = b;
            });
            retire(e.ah());
            count(IpoibCounter.NEIGHBOURS_EXPIRED);
            log.accept("neighbour " + ipString(e.ip()) + (e.ah() != null ? " expired" : " failed (no ARP reply)"));
        }
    };

    /** Neighbour aging and ARP retries, at most every 100 ms of the configured clock. */
    private void tick() {
        long now = cfg.clock().nanoTime();
        if (now - nextTickNs < 0) {
            return;
        }
        nextTickNs = now + TICK_NS;
        lock.lock();
        try {
            reapSends();
            neighbours.age(aging);
        } finally {
            lock.unlock();
        }
    }

    static String ipString(int a) {
        return (a >>> 24) + "." + ((a >>> 16) & 0xFF) + "." + ((a >>> 8) & 0xFF) + "." + (a & 0xFF);
    }

    /** Stops the threads, removes the TUN interface, leaves the group and releases every verbs object. */
    @Override
    public void close() {
        running = false;
        for (Thread t : new Thread[] {txThread, rxThread}) {
            if (t != null) {
                try {
                    t.join(2_000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }
        if (tun != null) {
            tun.close();
        }
        if (attached) {
            try {
                qp.detachMcast(broadcast, 0);
            } catch (VerbsException e) {
                // the QP is closed below either way
            }
            attached = false;
        }
        for (int k = resources.size() - 1; k >= 0; k--) {
            try {
                resources.get(k).close();
            } catch (Exception e) {
                log.accept("ipoib: close: " + e.getMessage()); // keep closing the rest
            }
        }
        resources.clear();
        if (dma != null) {
            // the QP is gone: unmap what the device still held (sends not yet reaped, the receive ring)
            for (long q = txDone; q < txPosted; q++) {
                int slot = (int) (q % TX_RING);
                dma.unmap(txDma[slot], txSlots[slot].byteSize(), DmaDirection.TO_DEVICE);
            }
            for (long q = ctlDone; q < ctlPosted; q++) {
                int slot = (int) (q % CTL_RING);
                dma.unmap(ctlDma[slot], ctlSlots[slot].byteSize(), DmaDirection.TO_DEVICE);
            }
            for (int k = 0; k < rxMapped; k++) {
                dma.unmap(rxDma[k], rxSlots[k].byteSize(), DmaDirection.FROM_DEVICE);
            }
            txDone = txPosted;
            ctlDone = ctlPosted;
            rxMapped = 0;
        }
        if (ctx != null) {
            try {
                ctx.close(); // refuses (EBUSY) if anything above leaked
            } catch (VerbsException e) {
                log.accept("ipoib: close: " + e.getMessage());
            }
        }
        arena.close();
    }
}
