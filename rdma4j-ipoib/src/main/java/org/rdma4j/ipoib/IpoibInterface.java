// SPDX-License-Identifier: Apache-2.0
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
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SharedReceiveQueue;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * An IPoIB interface: a TUN interface whose IPv4 packets travel as UD messages with the 4-byte IPoIB header
 * (RFC 4391 datagram mode), and ARP with 20-byte hardware addresses over the partition's broadcast group,
 * which the interface's UD QP joins; in connected mode (RFC 4755) unicast packets to neighbours that offer
 * it travel on RC connections with a 65520-byte MTU (see docs/ipoib.md for the connection exchange, which
 * rdma4j carries over UD instead of the IB CM).
 *
 * <p>Data path. Packet buffers are DMA-mapped through {@link Context#dma()}, not registered. Receive: a ring
 * of pre-posted buffers (40-byte GRH area + header + UD MTU), mapped once; each poll takes up to 32
 * completions and reposts their buffers as one chain; in connected mode an SRQ of 64 KiB buffers feeds
 * every receiving RC QP and completes on the same CQ; the receive thread sleeps on the CQ's completion
 * channel when idle. Send (datagram mode): the TUN packet is read straight into a slot of a send ring
 * behind room for the header, mapped and posted from there; one send in 16 is signalled and its completion
 * unmaps every earlier slot, since a UD send queue completes in order. Send (connected mode): the TUN read
 * lands in a free 64 KiB buffer, posted as one signalled RC SEND and unmapped at its completion. ARP,
 * connection messages and packets that waited for resolution use a small control ring, each send
 * signalled. Nothing is allocated per packet on the data paths.
 *
 * <p>Threads: {@code ipoib-tx-<if>} (TUN to fabric) and {@code ipoib-rx-<if>} (fabric to TUN, ARP,
 * connection messages, aging); the neighbour table, the connections and the send rings are guarded by one
 * lock.
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
     * @param mtu         the interface MTU, or 0 for the mode's default: min(2044, port MTU - 4) in datagram
     *                    mode, 65520 in connected mode (Linux IPOIB_CM_MTU)
     * @param pkey        partition key (0xFFFF: default partition)
     * @param qkey        the broadcast group's Q_Key
     * @param broadcast   the broadcast group, or null to derive it from the P_Key and the port's GID type
     * @param clock       time for neighbour aging
     * @param reachableNs how long a learned neighbour stays usable without a new ARP packet
     * @param mode        datagram (RFC 4391) or connected (RFC 4755)
     */
    public record Config(String ifname, Inet4Address address, int prefixLen, int mtu, int pkey, int qkey, Gid broadcast,
                         NanoClock clock, long reachableNs, Mode mode) {
        /**
         * As the canonical constructor, in datagram mode.
         *
         * @param ifname TUN interface name
         * @param address the interface's IPv4 address
         * @param prefixLen its prefix length
         * @param mtu the interface MTU, or 0 for the mode's default: min(2044, port MTU - 4) in datagram mode,
         *     65520 in connected mode (Linux IPOIB_CM_MTU)
         * @param pkey partition key (0xFFFF: default partition)
         * @param qkey the broadcast group's Q_Key
         * @param broadcast the broadcast group, or null to derive it from the P_Key and the port's GID type
         * @param clock time for neighbour aging
         * @param reachableNs how long a learned neighbour stays usable without a new ARP packet
         */
        public Config(String ifname, Inet4Address address, int prefixLen, int mtu, int pkey, int qkey, Gid broadcast,
                      NanoClock clock, long reachableNs) {
            this(ifname, address, prefixLen, mtu, pkey, qkey, broadcast, clock, reachableNs, Mode.DATAGRAM);
        }

        /**
         * {@return this configuration in that mode}
         *
         * @param m the mode
         */
        public Config withMode(Mode m) {
            return new Config(ifname, address, prefixLen, mtu, pkey, qkey, broadcast, clock, reachableNs, m);
        }

        /**
         * {@return defaults for the rest: derived MTU, P_Key 0xFFFF, Q_Key 0x0B1B, derived group, system clock,
         * neighbours reachable for 60 s}
         *
         * @param ifname    TUN interface name
         * @param address   IPv4 address
         * @param prefixLen prefix length
         */
        public static Config of(String ifname, Inet4Address address, int prefixLen) {
            return new Config(ifname, address, prefixLen, 0, Ipoib.DEFAULT_PKEY, Ipoib.DEFAULT_QKEY, null,
                    NanoClock.SYSTEM, 60_000_000_000L);
        }
    }

    /** IPoIB modes, as Linux's /sys/class/net/ib0/mode: "datagram" (RFC 4391) or "connected" (RFC 4755). */
    public enum Mode {
        /** Every packet is a UD message of at most the UD MTU. */
        DATAGRAM,
        /** Unicast packets to neighbours that offer it travel on an RC connection, up to a 64 KiB MTU. */
        CONNECTED
    }

    /** Linux IPOIB_CM_MTU: 64 KiB less 16, the largest connected-mode MTU. */
    public static final int CM_MAX_MTU = 65520;
    /** RFC 4755 section 5: bit 0 of the hardware address flags, "connected mode supported" (Linux IPOIB_FLAGS_RC). */
    static final int FLAG_RC = 0x80;
    private static final int CM_RX_RING = 256;
    private static final int CM_TX_SLOTS = 128;
    private static final int CM_MAX_CONNS = 64;
    private static final int CM_MAX_REQS = 3;
    private static final long CM_REQ_TIMEOUT_NS = 1_000_000_000L;
    private static final long CM_RETRY_NS = 60_000_000_000L;
    private static final long CM_ERROR_RETRY_NS = 1_000_000_000L;
    private static final long CM_RX_BIT = 1L << 61;
    private static final int CM_SLOT_BITS = 20;

    private final Config cfg;
    private final Consumer<String> log;
    private final int mtu;
    private final int udMtu;
    private final boolean connected;
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

    // connected mode (RFC 4755): see setUpConnected
    private CompletionQueue cmSendCq;
    private SharedReceiveQueue srq;
    private Mtu pathMtu;
    private int cmSlot;
    private MemorySegment cmRxRing;
    private MemorySegment[] cmRxSlots;
    private long[] cmRxDma;
    private int cmRxMapped;
    private RecvWorkRequest[] cmRxWrs;
    private MemorySegment[] cmRxPayload;
    private final RecvWorkRequest[] cmRefill = new RecvWorkRequest[POLL_BATCH];
    private MemorySegment cmTxRing;
    private MemorySegment[] cmTxSlots;
    private MemorySegment[] cmTxPayload;
    /** The DMA mapping of each big send slot while a send from it is outstanding: segment, address, owner. */
    private MemorySegment[] cmTxMapped;
    private long[] cmTxDma;
    private TxConn[] cmTxOwner;
    private int[] cmTxFree;
    private int cmTxFreeCount;
    private final WorkCompletion[] cmWcs = newWcs(POLL_BATCH);
    /** Connections we opened, one per neighbour (lock). */
    private final List<TxConn> txConns = new ArrayList<>();
    /** Connections neighbours opened to us (lock). */
    private final List<RxConn> rxConns = new ArrayList<>();
    private final CmMessage rxCm = new CmMessage();
    private final java.util.Random ids = new java.util.Random();
    private int connSerial;
    private MemorySegment icmpScratch;

    /** A connection we opened to a neighbour (Linux struct ipoib_cm_tx); only unicast IPv4 goes on it. */
    private static final class TxConn {
        final int ip;
        final HardwareAddress peer;
        /** Changes with every QP, so completions of a torn-down QP are told from the new one's. */
        int serial;
        AddressHandle ah;
        QueuePair qp;
        int localId;
        int psn;
        int state; // CONNECTING, CONNECTED, FAILED
        int tries;
        long deadlineNs;
        int remoteMtu;
        int remoteQpn;
        int remoteId;
        /** FAILED for long (no answer, refused): big packets get ICMP "fragmentation needed"; else they wait. */
        boolean fallback;

        TxConn(int ip, HardwareAddress peer) {
            this.ip = ip;
            this.peer = peer;
        }
    }

    private static final int CONNECTING = 1;
    private static final int CONNECTED = 2;
    private static final int FAILED = 3;

    /** A connection a neighbour opened to us (Linux struct ipoib_cm_rx): its QP takes buffers from the SRQ. */
    private record RxConn(Gid peerGid, int peerUdQpn, int remoteId, int localId, int psn, int remoteQpn, QueuePair qp,
                          AddressHandle ah) {
    }

    private volatile boolean running;
    private Thread txThread;
    private Thread rxThread;
    private long nextTickNs;

    private record Retired(AddressHandle ah, long txSeq, long ctlSeq) {
    }

    private IpoibInterface(Config cfg, int mtu, int udMtu, Consumer<String> log) {
        this.cfg = cfg;
        this.mtu = mtu;
        this.udMtu = udMtu;
        this.connected = cfg.mode() == Mode.CONNECTED;
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
            boolean cm = cfg.mode() == Mode.CONNECTED;
            int udMtu = cfg.mtu() == 0 || cm ? Math.min(Ipoib.DEFAULT_MTU, portMtu - Ipoib.HEADER_BYTES) : cfg.mtu();
            if (udMtu < 576 || udMtu + Ipoib.HEADER_BYTES > portMtu) {
                throw new VerbsException(Errno.EINVAL, "IPoIB MTU " + udMtu + " does not fit the port's MTU " + portMtu
                        + " less the 4-byte header (and IPv4 needs at least 576)");
            }
            int mtu = udMtu;
            if (cm) {
                // RFC 4755 section 4: the connected-mode MTU may be up to 2^31; Linux caps it at IPOIB_CM_MTU
                mtu = cfg.mtu() == 0 ? CM_MAX_MTU : cfg.mtu();
                if (mtu < 576 || mtu > CM_MAX_MTU) {
                    throw new VerbsException(Errno.EINVAL, "connected-mode MTU " + mtu + " (576.." + CM_MAX_MTU + ")");
                }
                if (ctx.queryDevice().maxSrq() < 1) {
                    throw new VerbsException(Errno.EOPNOTSUPP, "connected mode needs a device with shared receive queues");
                }
            }
            i = new IpoibInterface(cfg, mtu, udMtu, log);
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
        recvCq = track(ctx.createCq(RX_RING + (connected ? CM_RX_RING : 0), channel, 0));
        qp = track(pd.createQp(new QpInitAttributes().type(QpType.UD).sendCq(sendCq).recvCq(recvCq)
                .cap(new QpCapabilities(TX_RING + CTL_RING, RX_RING, 1, 1, 0))));
        qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1).qkey(cfg.qkey()));
        qp.modify(new QpAttributes().state(QpState.RTR));
        qp.modify(new QpAttributes().state(QpState.RTS).sqPsn(0));
        // RFC 4755 section 5: the hardware address tells neighbours whether we take connections
        self = new HardwareAddress(connected ? FLAG_RC : 0, qp.qpNum(), gid);
        // the broadcast group carries ARP (RFC 4391 section 4: every IPoIB interface joins it)
        qp.attachMcast(broadcast, 0);
        attached = true;
        broadcastAh = track(pd.createAh(av(broadcast)));

        // packet buffers are not registered: they are DMA-mapped per I/O through the device (the receive
        // ring once, as Linux IPoIB keeps its rx ring mapped; each send at post, unmapped on completion)
        dma = ctx.dma();
        dmaLkey = pd.localDmaLkey();
        rxSlot = align(Ipoib.GRH_BYTES + Ipoib.HEADER_BYTES + udMtu, 64);
        rxRing = arena.allocate((long) rxSlot * RX_RING, 4096);
        txSlot = align(Ipoib.HEADER_BYTES + udMtu, 64);
        txRing = arena.allocate((long) txSlot * TX_RING, 4096);
        ctlRing = arena.allocate((long) txSlot * CTL_RING, 4096);
        txSlots = slots(txRing, TX_RING, txSlot, Ipoib.HEADER_BYTES + udMtu);
        txDma = new long[TX_RING];
        ctlSlots = slots(ctlRing, CTL_RING, txSlot, Ipoib.HEADER_BYTES + udMtu);
        ctlDma = new long[CTL_RING];
        rxSlots = slots(rxRing, RX_RING, rxSlot, Ipoib.GRH_BYTES + Ipoib.HEADER_BYTES + udMtu);
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
        pendingPool = arena.allocate((long) udMtu * PENDING_BUFFERS, 64);
        for (int k = 0; k < PENDING_BUFFERS; k++) {
            pendingFree[k] = k;
        }
        pendingFreeCount = PENDING_BUFFERS;
        neighbours = new NeighbourCache<>(cfg.clock(), cfg.reachableNs(), 1_000_000_000L, 3, 3, 1024);

        txPayload = new MemorySegment[TX_RING];
        for (int k = 0; k < TX_RING; k++) {
            txPayload[k] = txRing.asSlice((long) k * txSlot + Ipoib.HEADER_BYTES, udMtu);
        }
        rxPayload = new MemorySegment[RX_RING];
        for (int k = 0; k < RX_RING; k++) {
            rxPayload[k] = rxRing.asSlice((long) k * rxSlot + Ipoib.GRH_BYTES + Ipoib.HEADER_BYTES, udMtu);
        }
        rxWrs = new RecvWorkRequest[RX_RING];
        for (int k = 0; k < RX_RING; k++) {
            rxWrs[k] = new RecvWorkRequest(1).wrId(k).numSge(1);
            rxWrs[k].sge(0).dma(rxDma[k], Ipoib.GRH_BYTES + Ipoib.HEADER_BYTES + udMtu, dmaLkey, rxSlots[k]);
        }
        int posted = qp.postRecv(rxWrs, RX_RING);
        if (posted != RX_RING) {
            throw new VerbsException(Errno.ENOMEM, "could post only " + posted + " of " + RX_RING + " receive buffers: "
                    + rxWrs[posted].postError());
        }
        if (connected) {
            setUpConnected();
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

    /** {@return the TUN interface name} */
    public String name() {
        return tun.name();
    }

    /** {@return the interface's MTU} */
    public int mtu() {
        return mtu;
    }

    /** {@return this interface's 20-byte hardware address (QPN and GID)} */
    public HardwareAddress hardwareAddress() {
        return self;
    }

    /** {@return the broadcast group the interface joined} */
    public Gid broadcastGid() {
        return broadcast;
    }

    /**
     * {@return its value}
     *
     * @param c a counter
     */
    public long counter(IpoibCounter c) {
        return counters.get(c.ordinal());
    }

    /** {@return every counter, one "name value" per line} */
    public String countersText() {
        StringBuilder sb = new StringBuilder();
        for (IpoibCounter c : IpoibCounter.values()) {
            sb.append(c.name().toLowerCase(java.util.Locale.ROOT)).append(' ').append(counter(c)).append('\n');
        }
        return sb.toString();
    }

    /** {@return the neighbour table, one line per entry} */
    public List<String> neighbourLines() {
        List<String> out = new ArrayList<>();
        lock.lock();
        try {
            neighbours.forEach(e -> {
                String line = ipString(e.ip()) + " " + e.state().name().toLowerCase(java.util.Locale.ROOT)
                        + (e.hardware() != null ? " lladdr " + e.hardware() : "");
                if (connected) {
                    TxConn c = findTx(e.ip());
                    line += c == null ? " datagram" : switch (c.state) {
                        case CONNECTING -> " connecting";
                        case CONNECTED -> " connected";
                        default -> c.fallback ? " datagram" : " reconnecting";
                    };
                }
                out.add(line);
            });
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

    // ------------------------------------------------------------------ connected mode (RFC 4755)

    /**
     * Connected-mode resources, as Linux's ipoib_cm_dev_init: one SRQ whose buffers (header + MTU, 64 KiB)
     * every receiving RC QP shares, mapped FROM_DEVICE once; a pool of big send buffers, each mapped TO_DEVICE
     * for exactly the packet's length when posted and unmapped at its completion; a send CQ for the RC QPs.
     */
    private void setUpConnected() {
        pathMtu = ctx.queryPort(1).activeMtu();
        cmSendCq = track(ctx.createCq(CM_TX_SLOTS + CM_MAX_CONNS, null, 0));
        srq = track(pd.createSrq(CM_RX_RING, 1));
        cmSlot = align(Ipoib.HEADER_BYTES + mtu, 4096);
        cmRxRing = arena.allocate((long) cmSlot * CM_RX_RING, 4096);
        cmRxSlots = slots(cmRxRing, CM_RX_RING, cmSlot, Ipoib.HEADER_BYTES + mtu);
        cmRxDma = new long[CM_RX_RING];
        cmRxPayload = new MemorySegment[CM_RX_RING];
        cmRxWrs = new RecvWorkRequest[CM_RX_RING];
        for (int k = 0; k < CM_RX_RING; k++) {
            long a = dma.map(cmRxSlots[k], DmaDirection.FROM_DEVICE);
            if (dma.mappingError(a)) {
                throw new VerbsException(Errno.ENOMEM, "cannot DMA-map connected-mode receive buffer " + k + " of "
                        + CM_RX_RING + " (IOMMU window or bounce pool too small for " + (CM_RX_RING * (long) cmSlot >> 20)
                        + " MiB)");
            }
            cmRxDma[k] = a;
            cmRxMapped = k + 1;
            cmRxPayload[k] = cmRxRing.asSlice((long) k * cmSlot + Ipoib.HEADER_BYTES, mtu);
            cmRxWrs[k] = new RecvWorkRequest(1).wrId(CM_RX_BIT | k).numSge(1);
            cmRxWrs[k].sge(0).dma(a, Ipoib.HEADER_BYTES + mtu, dmaLkey, cmRxSlots[k]);
        }
        int posted = srq.postRecv(cmRxWrs, CM_RX_RING);
        if (posted != CM_RX_RING) {
            throw new VerbsException(Errno.ENOMEM, "could post only " + posted + " of " + CM_RX_RING + " SRQ buffers");
        }
        cmTxRing = arena.allocate((long) cmSlot * CM_TX_SLOTS, 4096);
        cmTxSlots = slots(cmTxRing, CM_TX_SLOTS, cmSlot, Ipoib.HEADER_BYTES + mtu);
        cmTxPayload = new MemorySegment[CM_TX_SLOTS];
        for (int k = 0; k < CM_TX_SLOTS; k++) {
            cmTxPayload[k] = cmTxRing.asSlice((long) k * cmSlot + Ipoib.HEADER_BYTES, mtu);
        }
        cmTxMapped = new MemorySegment[CM_TX_SLOTS];
        cmTxDma = new long[CM_TX_SLOTS];
        cmTxOwner = new TxConn[CM_TX_SLOTS];
        cmTxFree = new int[CM_TX_SLOTS];
        for (int k = 0; k < CM_TX_SLOTS; k++) {
            cmTxFree[k] = CM_TX_SLOTS - 1 - k;
        }
        cmTxFreeCount = CM_TX_SLOTS;
        icmpScratch = arena.allocate(128, 8);
    }

    private TxConn findTx(int ip) {
        for (int k = 0; k < txConns.size(); k++) {
            TxConn c = txConns.get(k);
            if (c.ip == ip) {
                return c;
            }
        }
        return null;
    }

    /**
     * The connection for a resolved neighbour (lock held), started now when it offers connected mode and
     * has none, or restarted when its retry time has come; null when it gets datagrams only.
     */
    private TxConn connFor(NeighbourCache.Entry<AddressHandle> e) {
        HardwareAddress hw = e.hardware();
        TxConn c = findTx(e.ip());
        if (c != null && c.peer != hw && !c.peer.equals(hw)) {
            dropTx(c);
            c = null;
        }
        if (c == null) {
            if ((hw.flags() & FLAG_RC) == 0 || txConns.size() >= CM_MAX_CONNS) {
                return null;
            }
            c = new TxConn(e.ip(), hw);
            txConns.add(c);
            connect(c, e.ah());
        } else if (c.state == FAILED && cfg.clock().nanoTime() - c.deadlineNs >= 0) {
            connect(c, e.ah());
        }
        return c;
    }

    /** Creates the RC QP (INIT, receiving from the SRQ as Linux's tx QPs do) and sends the REQ (lock held). */
    private void connect(TxConn c, AddressHandle ah) {
        QueuePair q;
        try {
            q = pd.createQp(new QpInitAttributes().type(QpType.RC).sendCq(cmSendCq).recvCq(recvCq).srq(srq)
                    .cap(new QpCapabilities(CM_TX_SLOTS, 0, 1, 1, 0)));
            try {
                q.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1)
                        .accessFlags(AccessFlag.of(AccessFlag.LOCAL_WRITE)));
            } catch (VerbsException ex) {
                q.close();
                throw ex;
            }
        } catch (VerbsException ex) {
            log.accept("ipoib: cannot open a connection to " + ipString(c.ip) + ": " + ex.getMessage());
            c.state = FAILED;
            c.fallback = true;
            c.deadlineNs = cfg.clock().nanoTime() + CM_RETRY_NS;
            return;
        }
        track(q);
        c.qp = q;
        c.ah = ah;
        c.serial = ++connSerial & 0x3FF_FFFF;
        c.localId = newId();
        c.psn = ids.nextInt() & 0xFF_FFFF;
        c.state = CONNECTING;
        c.fallback = false;
        c.tries = 0;
        sendReq(c);
    }

    private int newId() {
        int id;
        do {
            id = ids.nextInt();
        } while (id == 0);
        return id;
    }

    private void sendReq(TxConn c) {
        c.tries++;
        c.deadlineNs = cfg.clock().nanoTime() + CM_REQ_TIMEOUT_NS;
        if (sendCm(CmMessage.OP_REQ, c.localId, 0, CmMessage.serviceId(c.peer.qpn()), c.qp.qpNum(), c.psn, c.ah,
                c.peer.qpn())) {
            count(IpoibCounter.CM_REQ_SENT);
        }
    }

    /** Sends a connection message to a neighbour's UD QP through the control ring (lock held). */
    private boolean sendCm(int op, int localId, int remoteId, long serviceId, int rcQpn, int psn, AddressHandle ah,
                           int udQpn) {
        long base = ctlSlot();
        if (base < 0) {
            count(IpoibCounter.TX_DROP_RING_FULL);
            return false;
        }
        // the receive MTU we offer is what one SRQ buffer holds: header + interface MTU (Linux IPOIB_CM_BUF_SIZE)
        CmMessage.write(ctlRing, base + Ipoib.HEADER_BYTES, op, localId, remoteId, serviceId, rcQpn, psn, self.qpn(),
                Ipoib.HEADER_BYTES + mtu);
        return postCtl(base, CmMessage.TYPE, CmMessage.BYTES, ah, udQpn);
    }

    /** Closes a connection's QP and takes back its send buffers (lock held); the entry stays, FAILED. */
    private void teardown(TxConn c) {
        QueuePair q = c.qp;
        if (q != null) {
            c.qp = null;
            try {
                q.close(); // under the device's engine lock: nothing of the QP touches memory afterwards
            } catch (VerbsException ex) {
                log.accept("ipoib: close: " + ex.getMessage());
            }
            resources.remove(q);
            for (int k = 0; k < CM_TX_SLOTS; k++) {
                if (cmTxOwner[k] == c) {
                    releaseTx(k);
                }
            }
        }
        c.state = FAILED;
    }

    private void dropTx(TxConn c) {
        teardown(c);
        txConns.remove(c);
    }

    private void dropTx(int ip) {
        if (connected) {
            TxConn c = findTx(ip);
            if (c != null) {
                dropTx(c);
            }
        }
    }

    private void releaseTx(int slot) {
        dma.unmap(cmTxDma[slot], cmTxMapped[slot].byteSize(), DmaDirection.TO_DEVICE);
        cmTxOwner[slot] = null;
        cmTxFree[cmTxFreeCount++] = slot;
    }

    private QpAttributes rtr(Gid dgid, int destQpn, int rqPsn) {
        return new QpAttributes().state(QpState.RTR).pathMtu(pathMtu).destQpNum(destQpn).rqPsn(rqPsn).av(av(dgid))
                .maxDestRdAtomic(0).minRnrTimer(12);
    }

    private static QpAttributes rts(int sqPsn) {
        // timeout 14 (about 67 ms) x 7 retries: a vanished peer shows as an error completion in about half a
        // second; RNR retry 7 (infinite): an empty SRQ makes the sender wait, never drop
        return new QpAttributes().state(QpState.RTS).sqPsn(sqPsn).timeout(14).retryCnt(7).rnrRetry(7).maxRdAtomic(0);
    }

    /** Posts a big send buffer as one RC SEND (lock held); false leaves the buffer with the caller. */
    private boolean postRc(TxConn c, int slot, int n) {
        Ipoib.writeHeader(cmTxSlots[slot], 0, Ipoib.TYPE_IPV4);
        int len = Ipoib.HEADER_BYTES + n;
        MemorySegment seg = cmTxMapped[slot];
        if (seg == null || seg.byteSize() != len) {
            seg = cmTxSlots[slot].asSlice(0, len); // kept: bulk traffic repeats the same lengths, so this is rare
            cmTxMapped[slot] = seg;
        }
        long a = dma.map(seg, DmaDirection.TO_DEVICE);
        if (dma.mappingError(a)) {
            count(IpoibCounter.TX_DROP_DMA);
            return false;
        }
        // every RC send is signalled: one completion per 64 KiB is cheap, and each frees exactly its buffer
        swr.clear().wrId(((long) c.serial << CM_SLOT_BITS) | slot).opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                .numSge(1);
        swr.sge(0).dma(a, len, dmaLkey, seg);
        if (!c.qp.postSend(swr)) {
            dma.unmap(a, len, DmaDirection.TO_DEVICE);
            count(IpoibCounter.TX_ERRORS);
            return false;
        }
        cmTxDma[slot] = a;
        cmTxOwner[slot] = c;
        count(IpoibCounter.TX_PACKETS);
        count(IpoibCounter.TX_CM_PACKETS);
        add(IpoibCounter.TX_BYTES, n);
        return true;
    }

    /** Reaps RC send completions (lock held): each frees its buffer; an error tears the connection down. */
    private void reapCmSends() {
        int n = cmSendCq.poll(cmWcs, POLL_BATCH);
        for (int k = 0; k < n; k++) {
            WorkCompletion wc = cmWcs[k];
            long id = wc.wrId();
            int slot = (int) (id & ((1 << CM_SLOT_BITS) - 1));
            int serial = (int) (id >>> CM_SLOT_BITS);
            TxConn c = cmTxOwner[slot];
            if (c == null || c.serial != serial) {
                continue; // a send of a connection already torn down: its buffer was taken back then
            }
            releaseTx(slot);
            if (wc.status() != WcStatus.SUCCESS && c.qp != null) {
                // Linux ipoib_cm_handle_tx_wc: the connection is destroyed and made again on the next packet
                count(IpoibCounter.CM_TX_ERRORS);
                log.accept("neighbour " + ipString(c.ip) + " connection failed (" + wc.status() + "), reconnecting");
                teardown(c);
                c.deadlineNs = cfg.clock().nanoTime() + CM_ERROR_RETRY_NS;
            }
        }
    }

    /** Retries unanswered requests, once a second, and falls back to datagrams after three (lock held). */
    private void cmTick() {
        long now = cfg.clock().nanoTime();
        for (int k = 0; k < txConns.size(); k++) {
            TxConn c = txConns.get(k);
            if (c.state != CONNECTING || now - c.deadlineNs < 0) {
                continue;
            }
            if (c.tries < CM_MAX_REQS) {
                sendReq(c);
            } else {
                teardown(c);
                c.fallback = true;
                c.deadlineNs = now + CM_RETRY_NS;
                count(IpoibCounter.CM_FALLBACK);
                log.accept("neighbour " + ipString(c.ip) + " did not answer connected-mode requests: datagram mode");
            }
        }
    }

    /** A connection message from a neighbour's UD QP (receive thread). */
    private void receiveCm(MemorySegment ring, long p, int payload, int srcQp, long sgidHi, long sgidLo) {
        CmMessage m = rxCm;
        // the private data's UD QPN must be the QP the datagram came from (the fabric's DETH says who sent it)
        if (m.read(ring, p, payload) != CmMessage.Verdict.OK || m.udQpn != srcQp
                || m.mtu < Ipoib.HEADER_BYTES + 576) {
            count(IpoibCounter.RX_DROP_BAD_CM);
            return;
        }
        lock.lock();
        try {
            switch (m.op) {
                case CmMessage.OP_REQ -> onReq(m, new Gid(sgidHi, sgidLo));
                case CmMessage.OP_REP -> onRep(m, sgidHi, sgidLo);
                case CmMessage.OP_RTU -> onRtu(m, sgidHi, sgidLo);
                default -> onRej(m, sgidHi, sgidLo);
            }
        } finally {
            lock.unlock();
        }
    }

    private void onReq(CmMessage m, Gid g) {
        if (m.serviceId != CmMessage.serviceId(self.qpn())) {
            count(IpoibCounter.RX_DROP_BAD_CM); // not our service: a REQ for another interface's UD QPN
            return;
        }
        for (int k = 0; k < rxConns.size(); k++) {
            RxConn r = rxConns.get(k);
            if (r.peerUdQpn() == m.udQpn && r.remoteId() == m.localId && r.peerGid().equals(g)) {
                sendRep(r); // a retransmitted REQ: our REP was lost
                return;
            }
        }
        if (!connected) {
            reject(m, g); // datagram mode here: the peer falls back at once instead of after three requests
            return;
        }
        // a new REQ from the same interface replaces its old connection (it restarted, or reconnects after an error)
        for (int k = rxConns.size() - 1; k >= 0; k--) {
            RxConn r = rxConns.get(k);
            if (r.peerUdQpn() == m.udQpn && r.peerGid().equals(g)) {
                rxConns.remove(k);
                closeRx(r);
            }
        }
        if (rxConns.size() >= CM_MAX_CONNS) {
            reject(m, g);
            return;
        }
        AddressHandle ah = null;
        QueuePair q = null;
        try {
            ah = pd.createAh(av(g));
            q = pd.createQp(new QpInitAttributes().type(QpType.RC).sendCq(cmSendCq).recvCq(recvCq).srq(srq)
                    .cap(new QpCapabilities(1, 0, 1, 1, 0)));
            int psn = ids.nextInt() & 0xFF_FFFF;
            q.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1)
                    .accessFlags(AccessFlag.of(AccessFlag.LOCAL_WRITE)));
            q.modify(rtr(g, m.rcQpn, m.psn));
            q.modify(rts(psn));
            RxConn r = new RxConn(g, m.udQpn, m.localId, newId(), psn, m.rcQpn, track(q), track(ah));
            rxConns.add(r);
            sendRep(r);
            count(IpoibCounter.CM_ACCEPTED);
            log.accept("connection from " + g + " qpn 0x" + Integer.toHexString(m.udQpn) + " accepted (RC QPN 0x"
                    + Integer.toHexString(q.qpNum()) + ")");
        } catch (VerbsException ex) {
            log.accept("ipoib: cannot accept a connection from " + g + ": " + ex.getMessage());
            if (q != null) {
                resources.remove(q);
                q.close();
            }
            if (ah != null) {
                resources.remove(ah);
                ah.close();
            }
            reject(m, g);
        }
    }

    private void sendRep(RxConn r) {
        sendCm(CmMessage.OP_REP, r.localId(), r.remoteId(), CmMessage.serviceId(self.qpn()), r.qp().qpNum(), r.psn(),
                r.ah(), r.peerUdQpn());
    }

    private void reject(CmMessage m, Gid g) {
        AddressHandle ah;
        try {
            ah = track(pd.createAh(av(g)));
        } catch (VerbsException ex) {
            return;
        }
        if (sendCm(CmMessage.OP_REJ, newId(), m.localId, m.serviceId, 0, 0, ah, m.udQpn)) {
            count(IpoibCounter.CM_REJ_SENT);
        }
        retire(ah); // closed once the REJ has left
    }

    private void closeRx(RxConn r) {
        try {
            r.qp().close();
        } catch (VerbsException ex) {
            log.accept("ipoib: close: " + ex.getMessage());
        }
        resources.remove(r.qp());
        retire(r.ah());
    }

    private TxConn txById(int localId, long sgidHi, long sgidLo, int udQpn) {
        for (int k = 0; k < txConns.size(); k++) {
            TxConn c = txConns.get(k);
            if (c.localId == localId && c.qp != null && c.peer.qpn() == udQpn && c.peer.gid().hi() == sgidHi
                    && c.peer.gid().lo() == sgidLo) {
                return c;
            }
        }
        return null;
    }

    private void onRep(CmMessage m, long sgidHi, long sgidLo) {
        TxConn c = txById(m.remoteId, sgidHi, sgidLo, m.udQpn);
        if (c == null) {
            count(IpoibCounter.RX_DROP_BAD_CM);
            return;
        }
        if (c.state == CONNECTED) {
            if (m.rcQpn == c.remoteQpn && m.localId == c.remoteId) {
                sendCm(CmMessage.OP_RTU, c.localId, c.remoteId, m.serviceId, c.qp.qpNum(), c.psn, c.ah, c.peer.qpn());
            } else {
                count(IpoibCounter.RX_DROP_BAD_CM);
            }
            return;
        }
        try {
            c.qp.modify(rtr(c.peer.gid(), m.rcQpn, m.psn));
            c.qp.modify(rts(c.psn));
        } catch (VerbsException ex) {
            log.accept("ipoib: connection to " + ipString(c.ip) + " failed: " + ex.getMessage());
            teardown(c);
            c.fallback = true;
            c.deadlineNs = cfg.clock().nanoTime() + CM_RETRY_NS;
            return;
        }
        c.remoteQpn = m.rcQpn;
        c.remoteId = m.localId;
        c.remoteMtu = Math.min(m.mtu, Ipoib.HEADER_BYTES + mtu);
        c.state = CONNECTED;
        count(IpoibCounter.CM_CONNECTED);
        log.accept("neighbour " + ipString(c.ip) + " connected (RC QPN 0x" + Integer.toHexString(c.qp.qpNum())
                + " to 0x" + Integer.toHexString(m.rcQpn) + ", mtu " + (c.remoteMtu - Ipoib.HEADER_BYTES) + ")");
        sendCm(CmMessage.OP_RTU, c.localId, c.remoteId, m.serviceId, c.qp.qpNum(), c.psn, c.ah, c.peer.qpn());
    }

    private void onRtu(CmMessage m, long sgidHi, long sgidLo) {
        for (int k = 0; k < rxConns.size(); k++) {
            RxConn r = rxConns.get(k);
            if (r.localId() == m.remoteId && r.remoteId() == m.localId && r.peerUdQpn() == m.udQpn
                    && r.peerGid().hi() == sgidHi && r.peerGid().lo() == sgidLo) {
                return; // established; the QP was ready since the REP
            }
        }
        count(IpoibCounter.RX_DROP_BAD_CM);
    }

    private void onRej(CmMessage m, long sgidHi, long sgidLo) {
        TxConn c = txById(m.remoteId, sgidHi, sgidLo, m.udQpn);
        if (c == null || c.state != CONNECTING) {
            count(IpoibCounter.RX_DROP_BAD_CM);
            return;
        }
        teardown(c);
        c.fallback = true;
        c.deadlineNs = cfg.clock().nanoTime() + CM_RETRY_NS;
        count(IpoibCounter.CM_REJ_RECEIVED);
        log.accept("neighbour " + ipString(c.ip) + " refused connected mode: datagram mode");
    }

    /** An RC message from the SRQ: header and IPv4 packet (receive thread). */
    private void receiveRc(int slot, WorkCompletion wc) throws IOException {
        int len = wc.byteLen();
        long h = (long) slot * cmSlot;
        if (len < Ipoib.HEADER_BYTES || len > Ipoib.HEADER_BYTES + mtu) {
            count(IpoibCounter.RX_DROP_MALFORMED);
            return;
        }
        if (Ipoib.readType(cmRxRing, h) != Ipoib.TYPE_IPV4) {
            count(IpoibCounter.RX_DROP_UNKNOWN_TYPE); // RFC 4755 section 3: ARP and multicast stay on UD
            return;
        }
        deliver(cmRxRing, h + Ipoib.HEADER_BYTES, len - Ipoib.HEADER_BYTES, cmRxPayload[slot], true);
    }

    /**
     * Answers a packet too big for the way it must take with ICMP "fragmentation needed" (RFC 1191, with
     * the next-hop MTU; Linux ipoib_cm_skb_too_long does the same), written to the stack as if from the
     * destination, so the kernel lowers its path MTU towards it (transmit thread, lock held).
     */
    private void tooBig(MemorySegment ring, long base, int n, int allowed) {
        count(IpoibCounter.TX_DROP_TOO_BIG);
        long p = base + Ipoib.HEADER_BYTES;
        int ihl = (ring.get(ValueLayout.JAVA_BYTE, p) & 0xF) * 4;
        int proto = ring.get(ValueLayout.JAVA_BYTE, p + 9) & 0xFF;
        int frag = ring.get(SHORT_BE, p + 6) & 0x1FFF;
        if (ihl < 20 || n < ihl + 8 || frag != 0) {
            return; // RFC 1122 3.2.2: no ICMP error about a non-initial fragment
        }
        if (proto == 1) {
            int type = ring.get(ValueLayout.JAVA_BYTE, p + ihl) & 0xFF;
            if (type != 0 && type != 8) {
                return; // nor about an ICMP error message
            }
        }
        int quote = ihl + 8;
        int total = 20 + 8 + quote;
        MemorySegment o = icmpScratch;
        o.asSlice(0, 28).fill((byte) 0);
        o.set(ValueLayout.JAVA_BYTE, 0, (byte) 0x45);
        o.set(SHORT_BE, 2, (short) total);
        o.set(ValueLayout.JAVA_BYTE, 8, (byte) 64);
        o.set(ValueLayout.JAVA_BYTE, 9, (byte) 1);
        o.set(INT_BE, 12, ring.get(INT_BE, p + 16));
        o.set(INT_BE, 16, ring.get(INT_BE, p + 12));
        o.set(SHORT_BE, 10, (short) checksum(o, 0, 20));
        o.set(ValueLayout.JAVA_BYTE, 20, (byte) 3);
        o.set(ValueLayout.JAVA_BYTE, 21, (byte) 4);
        o.set(SHORT_BE, 26, (short) allowed);
        MemorySegment.copy(ring, p, o, 28, quote);
        o.set(SHORT_BE, 22, (short) checksum(o, 20, 8 + quote));
        try {
            tun.writeControl(o, total);
        } catch (IOException ex) {
            // the drop is counted; the sender's retransmission will meet the same answer
        }
    }

    /** The Internet checksum (RFC 1071) of {@code len} bytes at {@code off}. */
    static int checksum(MemorySegment s, long off, int len) {
        long sum = 0;
        int k = 0;
        for (; k + 1 < len; k += 2) {
            sum += s.get(SHORT_BE, off + k) & 0xFFFF;
        }
        if (k < len) {
            sum += (s.get(ValueLayout.JAVA_BYTE, off + k) & 0xFF) << 8;
        }
        while ((sum >>> 16) != 0) {
            sum = (sum & 0xFFFF) + (sum >>> 16);
        }
        return (int) (~sum & 0xFFFF);
    }

    // ------------------------------------------------------------------ TUN -> fabric

    private void txLoop() {
        if (connected) {
            txLoopConnected();
            return;
        }
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
                    route(ring, base, n, -1);
                }
            }
        } catch (IOException | RuntimeException e) {
            if (running) {
                log.accept("ipoib: transmit thread stopped: " + e);
            }
        }
    }

    /**
     * Connected mode: each TUN read lands in a free big buffer (up to the 64 KiB MTU), which an RC send then
     * owns until its completion; packets that go as datagrams are copied to the control ring.
     */
    private void txLoopConnected() {
        int held = -1;
        try {
            while (running) {
                if (held < 0) {
                    lock.lock();
                    try {
                        reapSends();
                        if (cmTxFreeCount > 0) {
                            held = cmTxFree[--cmTxFreeCount];
                        }
                    } finally {
                        lock.unlock();
                    }
                    if (held < 0) {
                        waitForSendRoom();
                        continue;
                    }
                }
                int n = tun.read(cmTxPayload[held], IDLE_WAIT_MS);
                if (n < 0) {
                    break;
                }
                if (n > 0 && route(cmTxRing, (long) held * cmSlot, n, held)) {
                    held = -1; // an RC send owns it now
                }
            }
        } catch (IOException | RuntimeException e) {
            if (running) {
                log.accept("ipoib: transmit thread stopped: " + e);
            }
        }
        if (held >= 0) {
            lock.lock();
            try {
                cmTxFree[cmTxFreeCount++] = held;
            } finally {
                lock.unlock();
            }
        }
    }

    /** Bounded wait for a signalled completion to free send slots; drops nothing (TUN queues meanwhile). */
    private void waitForSendRoom() {
        for (int spins = 0; spins < 1_000 && running; spins++) {
            lock.lock();
            try {
                reapSends();
                if (connected ? cmTxFreeCount > 0 : txPosted - txDone < TX_RING) {
                    return;
                }
            } finally {
                lock.unlock();
            }
            Thread.onSpinWait();
        }
        java.util.concurrent.locks.LockSupport.parkNanos(50_000);
    }

    /**
     * Decides where an IPv4 packet from the kernel goes (RFC 4391: unicast to the neighbour, broadcast and
     * multicast to the group; RFC 4755: unicast on the neighbour's connection when it has one).
     *
     * @param big the big send buffer the packet is in (connected mode), or -1 (datagram mode: data-ring slot)
     * @return whether an RC send now owns the big buffer
     */
    private boolean route(MemorySegment ring, long base, int n, int big) {
        long p = base + Ipoib.HEADER_BYTES;
        int vihl = ring.get(ValueLayout.JAVA_BYTE, p) & 0xFF;
        if ((vihl >>> 4) == 6) {
            count(IpoibCounter.TX_DROP_IPV6);
            return false;
        }
        if ((vihl >>> 4) != 4 || n < 20) {
            count(IpoibCounter.TX_DROP_MALFORMED);
            return false;
        }
        int dst = ring.get(INT_BE, p + 16);
        boolean toGroup = (dst >>> 28) == 0xE || dst == -1 || dst == (ip | ~netmask);
        lock.lock();
        try {
            if (toGroup) {
                // IP broadcast and multicast go to the broadcast group (phase 1 joins no other IP groups)
                sendUd(ring, base, n, broadcastAh, QueuePair.MULTICAST_QPN, big, false);
                return false;
            }
            if ((dst & netmask) != (ip & netmask) || dst == ip) {
                count(IpoibCounter.TX_DROP_NO_ROUTE);
                return false;
            }
            NeighbourCache.Entry<AddressHandle> e = neighbours.get(dst);
            if (e != null && e.ah() != null) { // reachable, or being probed while in use
                neighbours.used(e);
                if (big >= 0) {
                    TxConn c = connFor(e);
                    if (c != null && c.state == CONNECTED) {
                        if (Ipoib.HEADER_BYTES + n > c.remoteMtu) {
                            tooBig(ring, base, n, c.remoteMtu - Ipoib.HEADER_BYTES);
                            return false;
                        }
                        return postRc(c, big, n);
                    }
                    // no connection (yet): datagrams, and what does not fit one waits for the connection unless
                    // this neighbour is datagram-only
                    sendUd(ring, base, n, e.ah(), e.hardware().qpn(), big, c != null && !c.fallback);
                    return false;
                }
                postData(base, n, e.ah(), e.hardware().qpn());
                return false;
            }
            boolean fresh = e == null;
            if (fresh) {
                e = neighbours.startResolving(dst);
                if (e == null) {
                    count(IpoibCounter.TX_DROP_UNRESOLVED);
                    return false;
                }
            }
            if (n > udMtu) {
                count(IpoibCounter.TX_DROP_UNRESOLVED); // the resolution queue holds datagram-sized packets only
            } else {
                queue(e, ring, p, n);
            }
            if (fresh) {
                sendArp(ArpPacket.OP_REQUEST, null, dst, broadcastAh, QueuePair.MULTICAST_QPN);
            }
            return false;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Sends a packet as a UD message (lock held): from its data-ring slot in datagram mode, else copied from
     * its big buffer to the control ring; a packet over the UD MTU is dropped, with ICMP "fragmentation
     * needed" unless {@code waitForConnection}.
     */
    private void sendUd(MemorySegment ring, long base, int n, AddressHandle ah, int qpn, int big,
                        boolean waitForConnection) {
        if (big < 0) {
            postData(base, n, ah, qpn);
            return;
        }
        if (n > udMtu) {
            if (waitForConnection) {
                count(IpoibCounter.TX_DROP_CM_CONNECTING); // no ICMP: that would lower the path MTU for minutes
            } else {
                tooBig(ring, base, n, udMtu);
            }
            return;
        }
        long b = ctlSlot();
        if (b < 0) {
            count(IpoibCounter.TX_DROP_RING_FULL);
            return;
        }
        MemorySegment.copy(ring, base + Ipoib.HEADER_BYTES, ctlRing, b + Ipoib.HEADER_BYTES, n);
        if (postCtl(b, Ipoib.TYPE_IPV4, n, ah, qpn)) {
            count(IpoibCounter.TX_PACKETS);
            add(IpoibCounter.TX_BYTES, n);
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
        MemorySegment.copy(src, off, pendingPool, (long) b * udMtu, n);
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
        if (connected) {
            reapCmSends();
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
                int c = 0;
                for (int w = 0; w < n; w++) {
                    WorkCompletion wc = rxWcs[w];
                    if (wc.status() == WcStatus.WR_FLUSH_ERR && !running) {
                        continue;
                    }
                    if ((wc.wrId() & CM_RX_BIT) != 0) { // an SRQ buffer: a message on one of the RC connections
                        int slot = (int) (wc.wrId() & 0xFFFF);
                        long size = cmRxSlots[slot].byteSize();
                        if (wc.status() == WcStatus.SUCCESS) {
                            dma.syncForCpu(cmRxDma[slot], size, DmaDirection.FROM_DEVICE);
                            receiveRc(slot, wc);
                        } else if (wc.status() != WcStatus.WR_FLUSH_ERR) {
                            count(IpoibCounter.RX_ERRORS);
                        }
                        dma.syncForDevice(cmRxDma[slot], size, DmaDirection.FROM_DEVICE);
                        cmRefill[c++] = cmRxWrs[slot];
                        continue;
                    }
                    int slot = (int) wc.wrId();
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
                if (c > 0 && running && srq.postRecv(cmRefill, c) != c) {
                    count(IpoibCounter.RX_ERRORS);
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
        if (len < Ipoib.GRH_BYTES + Ipoib.HEADER_BYTES || len > Ipoib.GRH_BYTES + Ipoib.HEADER_BYTES + udMtu) {
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
            case Ipoib.TYPE_IPV4 -> deliver(ring, p, payload, rxPayload[slot], false);
            case Ipoib.TYPE_ARP -> receiveArp(ring, p, payload, wc.srcQp(), sgidHi, sgidLo);
            case CmMessage.TYPE -> receiveCm(ring, p, payload, wc.srcQp(), sgidHi, sgidLo);
            default -> count(IpoibCounter.RX_DROP_UNKNOWN_TYPE);
        }
    }

    /** Checks an IPv4 header against the bytes that came and hands the packet to the stack (receive thread). */
    private void deliver(MemorySegment ring, long p, int payload, MemorySegment packet, boolean rc) throws IOException {
        int vihl = payload >= 20 ? ring.get(ValueLayout.JAVA_BYTE, p) & 0xFF : 0;
        int total = payload >= 20 ? ring.get(SHORT_BE, p + 2) & 0xFFFF : 0;
        if ((vihl >>> 4) != 4 || (vihl & 0xF) < 5 || total < (vihl & 0xF) * 4 || total > payload) {
            count(IpoibCounter.RX_DROP_MALFORMED);
            return;
        }
        if (tun.write(packet, total)) {
            count(IpoibCounter.RX_PACKETS);
            if (rc) {
                count(IpoibCounter.RX_CM_PACKETS);
            }
            add(IpoibCounter.RX_BYTES, total);
        } else {
            count(IpoibCounter.RX_DROP_TUN);
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
                if (connected && known != null && tpa == spa && sha.equals(known.hardware())) {
                    // a gratuitous ARP (RFC 5227 announcement) from a neighbour we know: it has (re)started its
                    // interface, with the same hardware address (same GID, first QPN again), so our connection
                    // goes to a QP that is gone or is someone else's: make a new one
                    dropTx(spa);
                }
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
        if (e != null && !changed && connected && e.ah() != null && findTx(spa) == null) {
            connFor(e); // known, but its connection was dropped: connect again at once
        }
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
        dropTx(spa); // a connection to the old address is of no use (the neighbour restarted or changed mode)
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
                MemorySegment.copy(pendingPool, (long) b * udMtu, ctlRing, base + Ipoib.HEADER_BYTES, n);
                if (postCtl(base, Ipoib.TYPE_IPV4, n, ah, sha.qpn())) {
                    count(IpoibCounter.TX_PACKETS);
                    add(IpoibCounter.TX_BYTES, n);
                }
            }
            pendingFree[pendingFreeCount++] = b;
        });
        if (connected) {
            connFor(e); // connect at once, as Linux does when it learns a connected-mode neighbour
        }
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
            dropTx(e.ip());
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
            if (connected) {
                cmTick();
            }
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
            if (cmTxOwner != null) {
                for (int k = 0; k < CM_TX_SLOTS; k++) {
                    if (cmTxOwner[k] != null) {
                        releaseTx(k);
                    }
                }
            }
            for (int k = 0; k < cmRxMapped; k++) {
                dma.unmap(cmRxDma[k], cmRxSlots[k].byteSize(), DmaDirection.FROM_DEVICE);
            }
            cmRxMapped = 0;
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
