// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.nio.channels.ClosedChannelException;
import java.util.ArrayList;
import java.util.List;

import org.rdma4j.libc.Errors;
import org.rdma4j.libc.NativeIOException;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.wire.AtomicAckEth;
import org.rdma4j.wire.AtomicEth;
import org.rdma4j.wire.Bth;
import org.rdma4j.wire.Deth;
import org.rdma4j.wire.Icrc;
import org.rdma4j.wire.PseudoHeader;
import org.rdma4j.wire.Reth;
import org.rdma4j.wire.RocePacket;
import org.rdma4j.wire.RoceParser;
import org.rdma4j.wire.RoceStatus;
import org.rdma4j.wire.net.DatagramBatch;
import org.rdma4j.wire.net.SockAddr;
import org.rdma4j.wire.net.UdpSocket;

/**
 * RoCEv2 on UDP (IBA Annex A17): a device's link to the world outside its JVM. Packets for a GID owned by
 * a device of the same {@link SoftFabric} still take the in-process path; all others are encoded (BTH,
 * extension headers, payload, pad, ICRC as rdma_rxe computes it) and sent from a socket bound to the
 * device's address and UDP port. One receive agent per socket ({@code rdma4j-roce-rx-<dev>-v4|v6}) takes
 * datagrams in batches, validates them (structure and ICRC; drops counted per reason), and hands them to
 * the receive dispatcher (which hands each to its QP's executor: docs/engine.md).
 *
 * <p>Interop choices (docs/roce-udp.md): IPv4 datagrams leave an unconnected socket with DF set, for which
 * Linux writes IPv4 ID 0, so our ICRC covers ID 0; received IPv4 packets carry an ID chosen by the peer
 * (rxe hashes one), which a UDP socket does not show, so the ICRC check solves for it
 * ({@link RoceParser.IcrcCheck#SOLVE_IPV4_ID}). IPv6 sockets accept UDP checksum 0 (rxe prepare_udp_hdr
 * sends 0) and send checksum 0 as rxe does. Every packet leaves from the device's port (4791) rather than
 * rxe's per-QP source port (rxe_qp_init_req hashes the QPN): receivers ignore the source port, and the ICRC
 * covers the port we really send from.
 */
final class RoceLink implements Link {
    /** Largest datagram we accept: 4096 MTU + the longest header set + pad + ICRC, with room to spare. */
    private static final int SLOT_BYTES = 8192;
    private static final int RX_BATCH = 32;
    /** Source addresses whose GIDs a receive socket keeps (a power of two). */
    private static final int SOURCE_CACHE = 8;
    /**
     * With UDP GRO a slot may hold up to 64 KiB of coalesced datagrams (lo's gro_max_size): 16 such slots
     * are 1 MiB of native memory per socket, and each may carry up to 64 packets.
     */
    private static final int RX_BATCH_GRO = 16;
    private static final int RX_SLOT_GRO = 65536;
    private static final long RX_POLL_MS = 100;
    /** A poller that polled within this window is taken to be still polling. */
    private static final long POLLER_ACTIVE_NS = 200_000;
    /** After polling stopped, the agent waits at most 1 ms at a time for this long (deferred ACKs). */
    private static final long RECENT_POLLER_NS = 50_000_000;

    /**
     * How long the receive agent keeps polling its socket after the last bulk receive before it blocks again
     * ({@code -Drdma4j.roce.rxSpinUs}, microseconds). Off (0) by default: A/B runs on the shared two-core
     * machine were inside the noise (64 KiB ib_write_bw between processes: 506 and 553 against 322 and 244
     * MiB/s in one interleaved pair, 163 and 274 against 100 and 492 in another), and a spinning agent takes
     * a core from everything else on such a host. docs/benchmarks.md.
     */
    private static final long RX_SPIN_NS = Long.getLong("rdma4j.roce.rxSpinUs", 0) * 1000;
    /** A receive of at least this many datagrams is a stream's, worth spinning for. */
    private static final int BULK_DATAGRAMS = 4;
    /** Bound on one spin's iterations, whatever the clock says. */
    private static final long MAX_RX_SPINS = 100_000_000L;
    /** {@code -Drdma4j.roce.gso=false}: one datagram per packet (sendmmsg batches only), for comparisons. */
    private static final boolean GSO = !"false".equals(System.getProperty("rdma4j.roce.gso"));
    /** {@code -Drdma4j.roce.gro=false}: the receive sockets do not ask for coalesced datagrams. */
    private static final boolean GRO = !"false".equals(System.getProperty("rdma4j.roce.gro"));

    private final SoftDevice device;
    private final Link local;
    private final RoceConfig config;
    private final List<Endpoint> endpoints = new ArrayList<>();
    /** Multicast groups joined, one receiving socket each (written under the device's table lock). */
    private final java.util.Map<Gid, Endpoint> groups = new java.util.concurrent.ConcurrentHashMap<>();
    /** The endpoints of {@link #groups}, copied on every join and leave: polled without an iterator. */
    private volatile Endpoint[] groupList = new Endpoint[0];
    private final Endpoint v4;
    private final Endpoint v6;

    // Transmit state: used under txLock only. Packets of a burst are built back to back in txBuf
    // and grouped in runs: a run is a train of packets to one destination, all the length of its first but
    // the last, which the kernel cuts from one buffer (UDP GSO, udp(7) UDP_SEGMENT). The runs leave with
    // one sendmmsg at the flush point (the end of the sender's Burst) or when the buffer is full.
    private static final int TX_BYTES = 1 << 20;
    private static final int TX_RUNS = 64;
    /** UDP GSO's limit: the IPv4 total length is 16 bits (ip_append_data); stay below 64 KiB for both families. */
    private static final int GSO_MAX_BYTES = 65_000;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment txBuf = arena.allocate(TX_BYTES + SLOT_BYTES, 64);
    private final DatagramBatch txBatch = new DatagramBatch(arena, TX_RUNS, 1);
    private final long[] runOff = new long[TX_RUNS];
    private final int[] runSeg = new int[TX_RUNS];
    private final int[] runLen = new int[TX_RUNS];
    private final int[] runCount = new int[TX_RUNS];
    private final boolean[] runClosed = new boolean[TX_RUNS];
    private final Gid[] runGid = new Gid[TX_RUNS];
    private int txRuns;
    private long txEnd;
    private Endpoint txEp;
    private final RocePacket txPkt = new RocePacket();
    private final Icrc txIcrc = new Icrc();
    private final PseudoHeader txIp = new PseudoHeader();
    private final Sgl txSgl = new Sgl(1);
    private final SockAddr txTo = new SockAddr();
    private final byte[] txGidBytes = new byte[16];
    private Gid txToGid;
    private volatile boolean closed;

    /** Receive batches allocated and not yet freed, over every link of the process (tests: nothing leaks). */
    static final java.util.concurrent.atomic.AtomicInteger LIVE_RX_BATCHES = new java.util.concurrent.atomic.AtomicInteger();

    private static Arena newRxArena() {
        LIVE_RX_BATCHES.incrementAndGet();
        return Arena.ofShared();
    }

    /** One bound socket and its receive agent. */
    private final class Endpoint implements Runnable {
        final InetAddress address;
        final Gid gid;
        final UdpSocket socket;
        final Thread agent;
        final boolean ipv6;
        /** The traffic class (TOS) the socket sends with now; txLock. */
        int trafficClass;
        /**
         * Whether runs of packets leave as one UDP GSO send (txLock). Not for IPv6: we send IPv6 with UDP
         * checksum 0 as rxe does, and Linux refuses GSO without a checksum (udp_v6_send_skb: EINVAL when
         * no_check6_tx); off once the kernel refused a GSO send on this socket.
         */
        boolean gso;

        Endpoint(InetAddress address) throws IOException {
            this(address, null);
        }

        /**
         * @param address the device's address, or a multicast group
         * @param iface   for a group: the device's address whose interface joins it; null for a unicast
         *                endpoint
         */
        Endpoint(InetAddress address, InetAddress iface) throws IOException {
            this.address = address;
            this.gid = Gid.ofInetAddress(address);
            this.ipv6 = !(address instanceof Inet4Address);
            UdpSocket s = null;
            try {
                s = iface == null ? UdpSocket.open(address, config.udpPort())
                        : UdpSocket.openGroup(address, config.udpPort(), iface);
                if (ipv6) {
                    s.setZeroChecksumReceive(true); // rxe sends IPv6 UDP with checksum 0
                    s.setZeroChecksumSend(true);
                }
                if (iface == null) {
                    // multicast sends leave from the device's interface, not wherever the group's route points
                    s.setMulticastInterface(address);
                }
                s.setBufferSizesForced(8 << 20, 4 << 20);
                s.setReceiveTimeout(RX_POLL_MS);
                this.gso = GSO && !ipv6 && iface == null;
                if (GRO) {
                    s.setGroReceive(true);
                }
            } catch (IOException | RuntimeException e) {
                if (s != null) {
                    s.close();
                }
                freeBatch(); // the receive batch came with the endpoint (field initialisers): no agent will free it
                throw e;
            }
            this.socket = s;
            this.agent = Thread.ofPlatform().daemon().name("rdma4j-roce-rx-" + device.name()
                    + (iface != null ? "-mc-" + address.getHostAddress() : ipv6 ? "-v6" : "-v4")).unstarted(this);
        }

        // Receive state, guarded by rxLock: whoever holds it receives and dispatches, so datagrams are
        // processed in the order the socket queued them even when an application thread polls too.
        private final java.util.concurrent.locks.ReentrantLock rxLock = new java.util.concurrent.locks.ReentrantLock();
        /**
         * The receive batch's memory (1 MiB with GRO): freed by {@link #freeBatch} when the endpoint ends, not left
         * to the garbage collector (a process that opens and closes many RoCE devices, such as the long property
         * runs of -Pslow, otherwise holds a MiB per closed endpoint until a GC happens to run).
         */
        private final Arena rxArena = newRxArena();
        private final DatagramBatch batch = GRO ? new DatagramBatch(rxArena, RX_BATCH_GRO, RX_SLOT_GRO)
                : new DatagramBatch(rxArena, RX_BATCH, SLOT_BYTES);
        private final RoceParser parser = new RoceParser(RoceParser.IcrcCheck.SOLVE_IPV4_ID);
        private final RocePacket pkt = new RocePacket();
        private final PseudoHeader ip = new PseudoHeader();
        private final Packet p = new Packet();
        private final Sgl payload = new Sgl(1);
        /**
         * The GIDs of the last few source addresses (direct-mapped by the address's hash): a source's GID is
         * made once, not per datagram, so a receive allocates nothing in steady state.
         */
        private final SockAddr[] fromAddr = new SockAddr[SOURCE_CACHE];
        private final Gid[] fromGid = new Gid[SOURCE_CACHE];
        private final byte[] gidScratch = new byte[16];
        private Gid lastFromGid;
        private SockAddr lastFromAddr;
        /** Whether the last receive took a bulk flow's worth: several datagrams, or a GRO train (rxLock). */
        private boolean lastBulk;
        /** When an application thread last polled this socket (System.nanoTime). */
        private volatile long lastPollerNs;
        /** Whether the thread that polled last has since blocked on a completion channel ({@link #pollerLeft}). */
        private volatile boolean pollerBlocked;

        /**
         * The receive agent: waits for datagrams and dispatches them, unless application threads are
         * busy-polling the device's CQs, which then receive on their own thread (see {@link #pollReceive}):
         * handing a packet from this agent to a spinning poller costs a wake-up on another core (about
         * 10 µs here), and on two cores a spinning poller and a woken agent fight for the CPU.
         */
        @Override
        public void run() {
            try {
                receiveLoop();
            } finally {
                freeBatch(); // the socket is closed or the link is: nobody receives on this endpoint again
            }
        }

        private void receiveLoop() {
            while (!closed) {
                try {
                    long sincePoll = pollerBlocked ? Long.MAX_VALUE : System.nanoTime() - lastPollerNs;
                    if (sincePoll < POLLER_ACTIVE_NS) {
                        // An application thread is busy-polling and receives on its own thread: stay off
                        // the socket, so that a datagram wakes nobody. A thread blocked in poll(2) is woken
                        // by every datagram the peer sends (on loopback, inside the peer's sendto), and on
                        // two cores that wake-up preempts a spinning poller: it cost a ping-pong most of
                        // its latency. A program that waits on memory rather than on a CQ (perftest's
                        // write_lat) has no poller, and then this agent receives within the window.
                        java.util.concurrent.locks.LockSupport.parkNanos(POLLER_ACTIVE_NS - sincePoll);
                        continue;
                    }
                    // ACKs a poller deferred and did not send itself (it went quiet): this agent sends them
                    if (device.fabric.acksPending()) {
                        device.fabric.flushAcks();
                    }
                    // Shortly after polling stopped, wake often: a poller that started again after the check
                    // above may defer an ACK whose datagram this agent will never see (bounded ACK delay).
                    long wait = sincePoll < RECENT_POLLER_NS ? 1 : RX_POLL_MS;
                    if (!socket.awaitReadable(wait)) {
                        continue;
                    }
                    if (drain(false) && lastBulk) {
                        spinWhileTrafficFlows();
                    }
                } catch (ClosedChannelException e) {
                    return;
                } catch (IOException e) {
                    if (closed) {
                        return;
                    }
                    device.countOutsideEngine(SoftCounter.ROCE_RX_ERRORS);
                } catch (Throwable t) {
                    // no receive agent dies silently: report, count, carry on (a packet's own failure was
                    // already taken by its QP in SoftDevice.receive)
                    if (closed) {
                        return;
                    }
                    EngineErrors.agentFailed(device, device.fabric, agent.getName(), t);
                    java.util.concurrent.locks.LockSupport.parkNanos(1_000_000); // no hot loop on a lasting fault
                }
            }
        }

        /**
         * After a bulk receive (several datagrams or a GRO train at once: a window of a stream, not the one
         * packet of a ping-pong), keeps taking datagrams without blocking for as long as they keep coming, up to
         * {@link #RX_SPIN_NS} after the last one (busy-poll, like a socket's SO_BUSY_POLL or NAPI): a flow
         * whose receiver has no polling thread (the target of RDMA WRITEs, a READ's responder) otherwise pays
         * a wake-up of this agent for every window of packets, and on a loaded two-core host that wake-up waits
         * for a CPU. Stops at once when an application thread starts polling (it then receives itself).
         */
        private void spinWhileTrafficFlows() throws IOException {
            if (RX_SPIN_NS <= 0) {
                return;
            }
            long last = System.nanoTime();
            for (long spins = 0; !closed && spins < MAX_RX_SPINS; spins++) {
                if (drain(false)) {
                    last = System.nanoTime();
                    continue;
                }
                long now = System.nanoTime();
                if (now - last > RX_SPIN_NS || now - lastPollerNs < POLLER_ACTIVE_NS) {
                    return;
                }
                Thread.onSpinWait();
            }
        }

        /**
         * Frees the receive batch (idempotent): under rxLock, so no thread is inside a receive or a dispatch that
         * reads the batch's buffers; later drains see it freed and receive nothing. Called by the agent when it
         * ends (socket closed: device close, or a group left) and by {@link RoceLink#close} for an agent that never
         * ran or did not end in time.
         */
        void freeBatch() {
            rxLock.lock();
            try {
                if (rxArena.scope().isAlive()) {
                    rxArena.close();
                    LIVE_RX_BATCHES.decrementAndGet();
                }
            } finally {
                rxLock.unlock();
            }
        }

        /** {@return whether the receive batch was freed (tests)} */
        boolean batchFreed() {
            return !rxArena.scope().isAlive();
        }

        /**
         * The thread that polled last is about to block on a completion channel: it receives no more, so the agent
         * takes over now, without the busy-poll window or the short waits after it.
         */
        void pollerLeft() {
            pollerBlocked = true;
            java.util.concurrent.locks.LockSupport.unpark(agent);
        }

        /** Called by a thread that polls a CQ of the device and found it empty. */
        boolean poll() {
            lastPollerNs = System.nanoTime();
            pollerBlocked = false;
            try {
                return drain(true);
            } catch (IOException e) {
                return false;
            }
        }

        /**
         * Receives what the socket has queued and dispatches it, as one Burst.
         *
         * @return whether a datagram was received
         */
        private boolean drain(boolean poller) throws IOException {
            if (poller) {
                if (!rxLock.tryLock()) {
                    return false; // the agent or another poller is receiving: this poll has nothing to add
                }
            } else {
                // The agent found the socket readable, and a poller may hold the lock: wait for it rather than
                // return and poll(2) again at once. A readable socket makes poll return at once, so on a loaded
                // host, where the holder can be preempted mid-dispatch, the agent span in a hot loop of
                // poll(2) and failed tryLocks (about 100 per message in ib_send_lat at load 14-24) on the CPU
                // the holder needed to finish (docs/benchmarks.md, "RoCE 8 B latency, session 4").
                rxLock.lock();
            }
            try {
                if (!rxArena.scope().isAlive()) {
                    return false; // the endpoint ended (freeBatch): nothing to receive into
                }
                int n = socket.receiveBatchNow(batch);
                if (n == 0) {
                    return false;
                }
                lastBulk = n >= BULK_DATAGRAMS || batch.segmentSize(0) != 0;
                dispatch(n, poller);
                return true;
            } finally {
                rxLock.unlock();
            }
        }

        /**
         * @param poller whether an application thread dispatches (it may defer ACKs to its next verbs call);
         *               else every ACK made, and any left deferred, leaves before the lock is released
         */
        private void dispatch(int n, boolean poller) {
            // one burst for the batch: the ACKs its requests earn and the packets its processing makes leave
            // together when it ends (Burst.exit), one system call per link
            Burst b = Burst.enter();
            b.deferAcks = poller;
            try {
                for (int i = 0; i < n; i++) {
                    SockAddr from = batch.address(i);
                    int len = batch.length(i);
                    int gso = batch.segmentSize(i);
                    if (ipv6 != from.isIpv6() || batch.truncated(i) && gso == 0) {
                        device.count(SoftCounter.DROP_MALFORMED);
                        continue;
                    }
                    lastFromGid = sourceGid(from);
                    fill(ip, lastFromGid, gid, from.port(), config.udpPort());
                    MemorySegment buf = batch.buffer(i);
                    if (gso == 0) {
                        deliver(buf, 0, len);
                        continue;
                    }
                    // UDP GRO coalesced datagrams of one flow: gso bytes each but the last (udp(7)). Each is a
                    // packet of its own, checked and counted on its own; the IPv4 ID of each was its sender's
                    // (the ICRC solver finds it per packet).
                    device.count(SoftCounter.ROCE_GRO_RECEIVES);
                    int off = 0;
                    while (off < len) {
                        int l = Math.min(gso, len - off);
                        if (batch.truncated(i) && l < gso) {
                            break;
                        }
                        deliver(buf, off, l);
                        off += l;
                    }
                    if (batch.truncated(i)) {
                        device.count(SoftCounter.DROP_MALFORMED); // what did not fit the slot
                    }
                }
            } catch (Throwable t) {
                // Outside a packet's dispatch (those are caught per packet in SoftDevice.receive): the batch's
                // bookkeeping. It must not kill the receiver: count and report it; RC recovers by retransmission.
                device.count(SoftCounter.ROCE_RX_ERRORS);
                EngineErrors.receiveFailed(device, null, p, t);
            } finally {
                b.deferAcks = false;
                try {
                    if (!poller && device.fabric.acksPending()) {
                        device.fabric.flushAcks(); // those a poller left deferred and did not send itself
                    }
                } finally {
                    b.exit();
                }
            }
        }

        private Gid sourceGid(SockAddr from) {
            if (lastFromAddr != null && lastFromAddr.equals(from)) {
                return lastFromGid; // the common case: the same peer as the datagram before
            }
            int h = from.hashCode() & (SOURCE_CACHE - 1);
            SockAddr a = fromAddr[h];
            if (a != null && a.equals(from)) {
                lastFromAddr = a;
                return fromGid[h];
            }
            if (a == null) {
                a = fromAddr[h] = new SockAddr(); // once per cache slot
            }
            a.set(from);
            from.copyGidTo(gidScratch, 0);
            Gid g = Gid.of(gidScratch);
            fromGid[h] = g;
            lastFromAddr = a;
            return g;
        }

        /** Checks and dispatches one datagram of a receive slot; {@link #ip} holds its addresses. */
        private void deliver(MemorySegment buf, int off, int len) {
            RoceStatus st = parser.parse(pkt, buf, off, len, ip);
            if (st != RoceStatus.OK) {
                // rxe_rcv: a bad ICRC is counted and dropped; so is anything malformed
                device.count(st == RoceStatus.BAD_ICRC ? SoftCounter.ICRC_ERROR : SoftCounter.DROP_MALFORMED);
                return;
            }
            decode(pkt, p, payload); // payloadStable false: the receive buffer is reused
            p.sgid = lastFromGid;
            p.dgid = gid;
            device.receive(p);
        }
    }

    /**
     * Lets an application thread that polls an empty CQ receive on its own thread (busy-poll mode, as
     * UCX and DPDK-style stacks do), so a ping-pong needs no cross-core wake-up per packet.
     *
     * @return whether any datagram was received
     */
    boolean pollReceive() {
        boolean got = false;
        for (int i = 0; i < endpoints.size(); i++) {
            got |= endpoints.get(i).poll();
        }
        Endpoint[] gs = groupList;
        for (int i = 0; i < gs.length; i++) {
            got |= gs[i].poll();
        }
        return got;
    }

    /**
     * A thread that polled the device's CQs now blocks on a completion channel (its deferred ACKs already sent):
     * the receive agents stop deferring to it at once. Without this, a datagram that came in the 200 us after the
     * thread's last empty poll waited for the agent's park to end, and the agent woke every millisecond for the
     * next 50 ms, although nobody polled (docs/ipoib.md, ping profile).
     */
    void pollerBlocking() {
        for (int i = 0; i < endpoints.size(); i++) {
            endpoints.get(i).pollerLeft();
        }
        Endpoint[] gs = groupList;
        for (int i = 0; i < gs.length; i++) {
            gs[i].pollerLeft();
        }
    }

    /** {@return whether the thread that polled the device last has blocked on a completion channel since} */
    boolean pollerBlocked() {
        for (int i = 0; i < endpoints.size(); i++) {
            if (!endpoints.get(i).pollerBlocked) {
                return false;
            }
        }
        return true;
    }

    /**
     * Joins the IP multicast group a multicast GID stands for, as RoCEv2 maps groups (the GID is the IPv6
     * address, or ::ffff:a.b.c.d for an IPv4 group: rdma_cm cma_iboe_set_mgid; rxe_mcast_add programs the
     * matching Ethernet multicast address on the netdev). A socket bound to the group and the UDP port
     * receives the group's datagrams; it is joined on the interface of the device's address of the same
     * family. Called under the device's table lock (on the first attach of the device to the group).
     *
     * @throws VerbsException EINVAL if the device has no address of the group's family, EADDRNOTAVAIL if the
     *                        socket cannot be bound or joined
     */
    void joinGroup(Gid mgid) {
        if (groups.containsKey(mgid)) {
            return;
        }
        Endpoint on = mgid.isIpv4Mapped() ? v4 : v6;
        if (on == null) {
            throw new VerbsException(Errno.EINVAL, "device " + device.name() + " has no " + (mgid.isIpv4Mapped()
                    ? "IPv4" : "IPv6") + " address to join multicast group " + mgid + " on (RoCEv2 carries a group"
                    + " in IP of the GID's family: use ::ffff:239.x.y.z on an IPv4 device)");
        }
        Endpoint g;
        try {
            g = new Endpoint(mgid.toInetAddress(), on.address);
        } catch (IOException e) {
            throw new VerbsException(Errno.EADDRNOTAVAIL, "device " + device.name() + " cannot join multicast group "
                    + mgid + " on " + on.address.getHostAddress() + " port " + config.udpPort() + ": " + e.getMessage());
        }
        groups.put(mgid, g);
        groupList = groups.values().toArray(Endpoint[]::new);
        if (!closed) {
            g.agent.start();
        }
    }

    /** Leaves a group joined by {@link #joinGroup} (last detach), under the device's table lock. */
    void leaveGroup(Gid mgid) {
        Endpoint g = groups.remove(mgid);
        groupList = groups.values().toArray(Endpoint[]::new);
        if (g != null) {
            g.socket.close(); // its agent sees the closed socket and ends, freeing the receive batch
            if (!g.agent.isAlive()) {
                g.freeBatch(); // an agent never started (joined after close) frees nothing
            }
        }
    }

    RoceLink(SoftDevice device, Link local, RoceConfig config) {
        this.device = device;
        this.local = local;
        this.config = config;
        Endpoint e4 = null;
        Endpoint e6 = null;
        try {
            for (InetAddress a : config.addresses()) {
                Endpoint e = new Endpoint(a);
                endpoints.add(e);
                if (e.ipv6) {
                    e6 = e;
                } else {
                    e4 = e;
                }
            }
        } catch (IOException e) {
            close();
            String where = "cannot bind RoCE device " + device.name() + " to UDP port " + config.udpPort() + " on "
                    + config.addresses().stream().map(InetAddress::getHostAddress).toList() + ": " + e.getMessage();
            if (e instanceof NativeIOException n && n.errno() == Errors.EADDRINUSE) {
                throw new VerbsException(Errno.EADDRINUSE, where + " (another process uses this device: a RoCE device"
                        + " serves one process at a time, the first that creates a QP on it; or rdma_rxe has the port)");
            }
            throw new VerbsException(Errno.EADDRNOTAVAIL, where + " (is the address configured on an interface? Local"
                    + " addresses: " + String.join(", ", org.rdma4j.common.RoceLinks.localAddresses()) + ")");
        }
        this.v4 = e4;
        this.v6 = e6;
    }

    /**
     * Sends IPv4 with UDP checksum 0, as rxe does (its prepare_udp_hdr writes 0; SO_NO_CHECK). Linux refuses
     * UDP GSO on such a socket (udp_send_skb: EINVAL), so the link's first train falls back to one datagram
     * per packet and GSO stays off: SoftRoceGsoCaptureTest uses this to check that fallback on the wire.
     */
    void ipv4ZeroChecksum(boolean on) throws IOException {
        if (v4 != null) {
            v4.socket.setZeroChecksumSend(on);
        }
    }

    /** Starts the receive agents (after the device is registered on its fabric). */
    void start() {
        for (Endpoint e : endpoints) {
            e.agent.start();
        }
    }

    /** {@return the GIDs of the bound addresses, in configuration order} */
    List<Gid> gids() {
        List<Gid> l = new ArrayList<>();
        for (Endpoint e : endpoints) {
            l.add(e.gid);
        }
        return l;
    }

    /** Points {@code a} at a GID's IP address without allocating ({@code scratch}: 16 bytes for IPv6). */
    private static void setAddress(SockAddr a, Gid g, int port, byte[] scratch) {
        if (g.isIpv4Mapped()) {
            a.setIpv4((int) g.lo(), port);
            return;
        }
        long hi = g.hi();
        long lo = g.lo();
        for (int i = 0; i < 8; i++) {
            scratch[i] = (byte) (hi >>> (56 - 8 * i));
            scratch[8 + i] = (byte) (lo >>> (56 - 8 * i));
        }
        a.setIpv6(scratch, 0, port);
    }

    private static void fill(PseudoHeader ip, Gid src, Gid dst, int srcPort, int dstPort) {
        if (src.isIpv4Mapped()) {
            ip.ipv4((int) src.lo(), (int) dst.lo()).ipId(0);
        } else {
            ip.ipv6(src.hi(), src.lo(), dst.hi(), dst.lo());
        }
        ip.ports(srcPort, dstPort);
    }

    /**
     * Sends a packet: to a device of this fabric through the in-process link, else encoded into the transmit
     * batch, which leaves when the calling thread's {@link Burst} ends (at once outside any). Any thread: the
     * batch is shared by the device's QPs, under {@link #txLock}.
     */
    @Override
    public void send(SoftDevice from, Packet p) {
        if (p.route != null || device.fabric.deviceFor(p.dgid) != null) {
            flush(); // keep the order the engine emitted packets in
            local.send(from, p);
            return;
        }
        synchronized (txLock) {
            if (closed) {
                return; // the sockets and the transmit buffer are gone (close)
            }
            queue(from, p);
        }
        Burst b = Burst.current();
        if (b.active()) {
            b.queued(this);
        } else {
            flush();
        }
    }

    /** Guards the transmit batch: building packets into it and sending it. */
    private final Object txLock = new Object();

    private void queue(SoftDevice from, Packet p) {
        Gid sgid = p.sgid;
        Endpoint ep = sgid == null ? null : sgid.isIpv4Mapped() ? v4 : v6;
        if (ep == null || !ep.gid.equals(sgid) || p.dgid == null || p.dgid.isIpv4Mapped() != sgid.isIpv4Mapped()) {
            // rxe prepare4/prepare6 need a route from SGID to DGID; the link-local GID 0 has none here
            from.count(SoftCounter.DROP_NO_ROUTE);
            return;
        }
        if (txRuns > 0 && (ep != txEp || p.trafficClass != ep.trafficClass)) {
            flushLocked(); // one sendmmsg per socket, and the traffic class is a socket option
        }
        if (txRuns == TX_RUNS || txEnd + SLOT_BYTES > TX_BYTES) {
            flushLocked();
        }
        long at = txEnd;
        int len = txPkt.build(txBuf, at, p.opcode, p.payloadLen);
        Bth bth = txPkt.bth();
        // rxe init_req_packet / prepare_ack_packet: MigReq 0, default P_Key, TVer 0
        bth.solicited(p.solicited).destQp(p.destQpn).ackReq(p.ackReq).psn(p.psn).pkey(p.pkey);
        int m = txPkt.mask();
        if ((m & org.rdma4j.wire.RoceOpcode.M_RETH) != 0) {
            Reth r = txPkt.reth();
            r.va(p.va).rkey(p.rkey).dmaLength(p.dmaLen);
        }
        if ((m & org.rdma4j.wire.RoceOpcode.M_ATMETH) != 0) {
            AtomicEth a = txPkt.atomicEth();
            a.va(p.va).rkey(p.rkey).swapAdd(p.swapAdd).compare(p.compare);
        }
        if ((m & org.rdma4j.wire.RoceOpcode.M_IMMDT) != 0) {
            txPkt.immDt().imm(p.imm);
        }
        if ((m & org.rdma4j.wire.RoceOpcode.M_AETH) != 0) {
            txPkt.aeth().syndrome(p.syndrome).msn(p.msn);
        }
        if ((m & org.rdma4j.wire.RoceOpcode.M_ATMACK) != 0) {
            AtomicAckEth a = txPkt.atomicAckEth();
            a.origRemoteData(p.origValue);
        }
        if ((m & org.rdma4j.wire.RoceOpcode.M_DETH) != 0) {
            Deth d = txPkt.deth();
            d.qkey(p.qkey).srcQp(p.srcQpn);
        }
        if (p.payloadLen > 0) {
            txSgl.set(txBuf, txPkt.payloadOffset(), p.payloadLen);
            try {
                Sgl.transfer(p.payload, p.payloadOff, txSgl, 0, p.payloadLen);
            } catch (IllegalStateException | IndexOutOfBoundsException fault) {
                // The device may not read the source any more (an IOMMU mapping removed since the WQE
                // started): the packet is not sent, as a DMA read fault stops a NIC's transmit; RC
                // retransmits it, and the local fault repeats until the retry count runs out.
                from.count(SoftCounter.ROCE_TX_ERRORS);
                return;
            }
        }
        if (p.trafficClass != ep.trafficClass) {
            try {
                ep.socket.setTrafficClass(p.trafficClass); // a system call: only when the class changes
                ep.trafficClass = p.trafficClass;
            } catch (IOException e) {
                from.count(SoftCounter.ROCE_TX_ERRORS);
                return;
            }
        }
        // Join the open run (one UDP GSO send) if the kernel will cut it there: same socket and destination,
        // every segment the size of the first but the last, which may be shorter, at most 64 and < 64 KiB.
        int r = txRuns - 1;
        boolean join = r >= 0 && ep.gso && !runClosed[r] && p.dgid.equals(runGid[r]) && len <= runSeg[r]
                && runCount[r] < DatagramBatch.MAX_SEGMENTS && runLen[r] + len <= GSO_MAX_BYTES;
        int ipId;
        if (join) {
            // Linux numbers the segments of a GSO send from the ID the whole skb got (0: unconnected, DF;
            // ip_select_ident_segs) upwards (inet_gso_segment), and the ICRC covers each one's ID:
            // measured in docs/roce-udp.md and checked on every captured packet by SoftRoceGsoCaptureTest.
            ipId = runCount[r];
            runCount[r]++;
            runLen[r] += len;
            runClosed[r] = len < runSeg[r];
        } else {
            r = txRuns++;
            runOff[r] = at;
            runSeg[r] = len;
            runLen[r] = len;
            runCount[r] = 1;
            runClosed[r] = false;
            if (!p.dgid.equals(txToGid)) {
                setAddress(txTo, p.dgid, config.udpPort(), txGidBytes);
                txToGid = p.dgid;
            }
            runGid[r] = p.dgid;
            txBatch.address(r).set(txTo);
            ipId = 0;
            if (r == 0) {
                txEp = ep;
            }
        }
        fill(txIp, sgid, p.dgid, ep.socket.localPort(), config.udpPort());
        if (!ep.ipv6) {
            txIp.ipId(ipId);
        }
        txPkt.seal(txIcrc, txIp);
        txEnd = at + len;
    }

    /**
     * Sends the packets queued since the last flush: one {@code sendmmsg} whose entries are runs of
     * packets, each run one UDP GSO datagram train. Called when a burst that queued packets ends
     * ({@link Burst#exit}) and whenever the queue is full or changes socket. Any thread.
     */
    @Override
    public void flush() {
        synchronized (txLock) {
            flushLocked();
        }
    }

    private void flushLocked() {
        int n = txRuns;
        if (n == 0) {
            return;
        }
        Endpoint ep = txEp;
        txRuns = 0;
        txEnd = 0;
        txEp = null;
        if (closed) {
            return;
        }
        for (int i = 0; i < n; i++) {
            txBatch.setSlice(i, txBuf, runOff[i], runLen[i]);
            txBatch.setSegmentSize(i, runCount[i] > 1 ? runSeg[i] : 0);
        }
        int i = 0;
        long backoff = 0;
        long refusedSince = 0;
        while (i < n) {
            try {
                int sent = ep.socket.sendBatch(txBatch, i, n - i);
                for (int k = i; k < i + sent; k++) {
                    if (runCount[k] > 1) {
                        device.count(SoftCounter.ROCE_GSO_SENDS);
                    }
                }
                if (sent <= 0) {
                    // EAGAIN: the send buffer is full (a send timeout passed, or a non-blocking socket)
                    if ((refusedSince = refused(i, n, refusedSince, backoff = nextBackoff(backoff))) < 0) {
                        return;
                    }
                    continue;
                }
                i += sent;
                backoff = 0;
                refusedSince = 0;
            } catch (NativeIOException e) {
                if (e.errno() == Errors.ENOBUFS) {
                    // the device queue or the qdisc is full (reported when the socket asks for errors: IP_RECVERR)
                    if ((refusedSince = refused(i, n, refusedSince, backoff = nextBackoff(backoff))) < 0) {
                        return;
                    }
                    continue;
                }
                if (runCount[i] > 1 && (e.errno() == Errors.EINVAL || e.errno() == Errors.EIO)) {
                    // The kernel refused the GSO send (udp_send_skb: e.g. no checksum offload on the route):
                    // count it, stop asking on this socket, and send the run's packets one by one.
                    device.count(SoftCounter.ROCE_GSO_REFUSED);
                    ep.gso = false;
                    for (int k = i; k < n; k++) {
                        sendSeparately(ep, k); // the rest of this flush too: its trains were sealed for GSO
                    }
                    return;
                } else {
                    device.count(SoftCounter.ROCE_TX_ERRORS, runCount[i]); // lost; RC retransmits
                }
                i++;
            } catch (IOException e) {
                countLost(i, n);
                return;
            }
        }
    }

    /** Back-off after a refused send: 10 us, doubling to 1 ms. */
    private static long nextBackoff(long ns) {
        return ns == 0 ? 10_000 : Math.min(ns * 2, 1_000_000);
    }

    /** How long a flush keeps trying to send what the kernel refuses before it counts the rest lost. */
    private static final long REFUSED_BUDGET_NS = 20_000_000;

    /**
     * The kernel refused runs [from, to) for want of buffer space: counted, kept, and tried again after {@code
     * backoffNs} (the caller holds {@link #txLock}; the socket is full, so the other senders would wait anyway),
     * unless the refusals have lasted longer than {@link #REFUSED_BUDGET_NS}: then the runs are lost (counted;
     * RC retransmits).
     *
     * @return when the refusals began (to pass back), or -1 when the runs were given up
     */
    private long refused(int from, int to, long since, long backoffNs) {
        long now = System.nanoTime();
        device.count(SoftCounter.ROCE_TX_REFUSED, runCount[from]);
        if (since != 0 && now - since > REFUSED_BUDGET_NS || closed) {
            countLost(from, to);
            return -1;
        }
        java.util.concurrent.locks.LockSupport.parkNanos(this, backoffNs);
        return since == 0 ? now : since;
    }

    private void countLost(int from, int to) {
        for (int k = from; k < to; k++) {
            device.count(SoftCounter.ROCE_TX_ERRORS, runCount[k]);
        }
    }

    /** Sends the packets of run {@code r} one datagram each, resealed for the ID 0 each one now carries. */
    private void sendSeparately(Endpoint ep, int r) {
        long off = runOff[r];
        long end = off + runLen[r];
        SockAddr to = txBatch.address(r);
        fill(txIp, ep.gid, runGid[r], ep.socket.localPort(), config.udpPort());
        while (off < end) {
            int len = (int) Math.min(runSeg[r], end - off);
            if (!ep.ipv6 && off != runOff[r] && txPkt.wrap(txBuf, off, len) == RoceStatus.OK) {
                txPkt.seal(txIcrc, txIp); // ipId 0
            }
            try {
                if (ep.socket.send(txBuf.asSlice(off, len), to) < 0) {
                    device.count(SoftCounter.ROCE_TX_ERRORS);
                }
            } catch (IOException e) {
                device.count(SoftCounter.ROCE_TX_ERRORS);
            }
            off += len;
        }
    }

    /** Copies the received headers into the engine's packet; the payload refers to the receive buffer. */
    private static void decode(RocePacket pkt, Packet p, Sgl payload) {
        p.route = null;
        Bth bth = pkt.bth();
        p.opcode = bth.opcode();
        p.solicited = bth.solicited();
        p.pkey = bth.pkey();
        p.destQpn = bth.destQp();
        p.ackReq = bth.ackReq();
        p.psn = bth.psn();
        p.hopLimit = 64;
        p.trafficClass = 0;
        int m = pkt.mask();
        if ((m & org.rdma4j.wire.RoceOpcode.M_RETH) != 0) {
            Reth r = pkt.reth();
            p.va = r.va();
            p.rkey = r.rkey();
            p.dmaLen = r.dmaLength();
        }
        if ((m & org.rdma4j.wire.RoceOpcode.M_ATMETH) != 0) {
            AtomicEth a = pkt.atomicEth();
            p.va = a.va();
            p.rkey = a.rkey();
            p.swapAdd = a.swapAdd();
            p.compare = a.compare();
        }
        if ((m & org.rdma4j.wire.RoceOpcode.M_IMMDT) != 0) {
            p.imm = pkt.immDt().imm();
        }
        if ((m & org.rdma4j.wire.RoceOpcode.M_AETH) != 0) {
            p.syndrome = pkt.aeth().syndrome();
            p.msn = pkt.aeth().msn();
        }
        if ((m & org.rdma4j.wire.RoceOpcode.M_ATMACK) != 0) {
            p.origValue = pkt.atomicAckEth().origRemoteData();
        }
        if ((m & org.rdma4j.wire.RoceOpcode.M_DETH) != 0) {
            Deth d = pkt.deth();
            p.qkey = d.qkey();
            p.srcQpn = d.srcQp();
        }
        int len = pkt.payloadLength();
        if (len > 0) {
            payload.set(pkt.segment(), pkt.payloadOffset(), len);
            p.payload = payload;
            p.payloadStable = false; // the receive buffer: an inbox copies it
        } else {
            p.payload = null;
        }
        p.payloadOff = 0;
        p.payloadLen = len;
    }

    @Override
    public void close() {
        closed = true;
        List<Endpoint> all = new ArrayList<>(endpoints);
        all.addAll(groups.values());
        for (Endpoint e : all) {
            e.socket.close();
        }
        for (Endpoint e : all) {
            if (e.agent.isAlive() && e.agent != Thread.currentThread()) {
                try {
                    e.agent.join(2_000);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }
        // An agent that ended freed its receive batch; one that never started, or is still in a dispatch,
        // has it freed here (under its rxLock, so after that dispatch)
        for (Endpoint e : all) {
            if (e.agent != Thread.currentThread()) {
                e.freeBatch();
            }
        }
        // The transmit buffer (1 MiB) is a shared arena's: nothing frees it but close. Under txLock, so that no
        // sender is between building a packet and its sendmmsg; later sends stop at `closed` (send).
        // Without this every RoCE device closed leaked it: the long RoCE property runs of -Pslow (thousands of
        // device pairs) grew past 20 GB and were killed by the kernel's OOM killer.
        synchronized (txLock) {
            txRuns = 0;
            txEnd = 0;
            txEp = null;
            if (arena.scope().isAlive()) {
                arena.close();
            }
        }
    }

    /** {@return whether every endpoint's receive batch is freed, groups' too (tests)} */
    boolean receiveBatchesFreed() {
        List<Endpoint> all = new ArrayList<>(endpoints);
        all.addAll(groups.values());
        for (Endpoint e : all) {
            if (!e.batchFreed()) {
                return false;
            }
        }
        return !all.isEmpty();
    }

    /** {@return whether close has freed the transmit buffer (tests)} */
    boolean transmitBufferFreed() {
        return !arena.scope().isAlive();
    }

    @Override
    public String toString() {
        return "RoCEv2/UDP " + config.addresses() + " port " + config.udpPort();
    }
}
