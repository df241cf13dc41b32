// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
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

/**
 * RoCEv2 on UDP (IBA Annex A17): a device's link to the world outside its JVM. Packets for a GID owned by
 * a device of the same {@link SoftFabric} still take the in-process path; all others are encoded (BTH,
 * extension headers, payload, pad, ICRC as rdma_rxe computes it) and sent from a socket bound to the
 * device's address and UDP port. Each socket is a {@link RoceEndpoint}, whose receive agent
 * ({@code rdma4j-roce-rx-<dev>-v4|v6}) takes datagrams in batches, validates them (structure and ICRC; drops counted
 * per reason), and hands them to the receive dispatcher (which hands each to its QP's executor: docs/engine.md).
 * This class keeps the routing (in process or on the wire), the transmit batch (packets built into one buffer, UDP
 * GSO runs, one {@code sendmmsg} per flush, refused sends retried) and the endpoints' lifecycle (bind, groups,
 * close).
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
    static final int SLOT_BYTES = 8192;
    /** {@code -Drdma4j.roce.gso=false}: one datagram per packet (sendmmsg batches only), for comparisons. */
    static final boolean GSO = !"false".equals(System.getProperty("rdma4j.roce.gso"));
    /** {@code -Drdma4j.roce.gro=false}: the receive sockets do not ask for coalesced datagrams. */
    static final boolean GRO = !"false".equals(System.getProperty("rdma4j.roce.gro"));

    final SoftDevice device;
    private final Link local;
    final RoceConfig config;
    private final List<RoceEndpoint> endpoints = new ArrayList<>();
    /** Multicast groups joined, one receiving socket each (written under the device's table lock). */
    private final java.util.Map<Gid, RoceEndpoint> groups = new java.util.concurrent.ConcurrentHashMap<>();
    /** The endpoints of {@link #groups}, copied on every join and leave: polled without an iterator. */
    private volatile RoceEndpoint[] groupList = new RoceEndpoint[0];
    private final RoceEndpoint v4;
    private final RoceEndpoint v6;

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
    private RoceEndpoint txEp;
    private final RocePacket txPkt = new RocePacket();
    private final Icrc txIcrc = new Icrc();
    private final PseudoHeader txIp = new PseudoHeader();
    private final Sgl txSgl = new Sgl(1);
    private final SockAddr txTo = new SockAddr();
    private final byte[] txGidBytes = new byte[16];
    private Gid txToGid;
    private volatile boolean closed;
    /** The receive agents' idle strategy ({@link RoceEndpoint#RX_IDLE_PROPERTY}), read when the link was made. */
    final String rxIdle;

    /** {@return whether {@link #close} has begun (the endpoints' agents end)} */
    boolean closed() {
        return closed;
    }

    /** Receive batches allocated and not yet freed, over every link of the process (tests: nothing leaks). */
    static final java.util.concurrent.atomic.AtomicInteger LIVE_RX_BATCHES = new java.util.concurrent.atomic.AtomicInteger();

    static Arena newRxArena() {
        LIVE_RX_BATCHES.incrementAndGet();
        return Arena.ofShared();
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
        RoceEndpoint[] gs = groupList;
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
        RoceEndpoint[] gs = groupList;
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
        RoceEndpoint on = mgid.isIpv4Mapped() ? v4 : v6;
        if (on == null) {
            throw new VerbsException(Errno.EINVAL, "device " + device.name() + " has no " + (mgid.isIpv4Mapped()
                    ? "IPv4" : "IPv6") + " address to join multicast group " + mgid + " on (RoCEv2 carries a group"
                    + " in IP of the GID's family: use ::ffff:239.x.y.z on an IPv4 device)");
        }
        RoceEndpoint g;
        try {
            g = new RoceEndpoint(this, mgid.toInetAddress(), on.address);
        } catch (IOException e) {
            throw new VerbsException(Errno.EADDRNOTAVAIL, "device " + device.name() + " cannot join multicast group "
                    + mgid + " on " + on.address.getHostAddress() + " port " + config.udpPort() + ": " + e.getMessage());
        }
        groups.put(mgid, g);
        groupList = groups.values().toArray(RoceEndpoint[]::new);
        if (!closed) {
            g.runner.start();
        }
    }

    /** Leaves a group joined by {@link #joinGroup} (last detach), under the device's table lock. */
    void leaveGroup(Gid mgid) {
        RoceEndpoint g = groups.remove(mgid);
        groupList = groups.values().toArray(RoceEndpoint[]::new);
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
        try {
            this.rxIdle = RoceEndpoint.rxIdleSpec(); // before any socket: a bad value leaves nothing to close
        } catch (IllegalArgumentException e) {
            throw new VerbsException(Errno.EINVAL, "RoCE device " + device.name() + ": " + e.getMessage());
        }
        RoceEndpoint e4 = null;
        RoceEndpoint e6 = null;
        try {
            for (InetAddress a : config.addresses()) {
                RoceEndpoint e = new RoceEndpoint(this, a);
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
        for (RoceEndpoint e : endpoints) {
            e.runner.start();
        }
    }

    /** {@return the GIDs of the bound addresses, in configuration order} */
    List<Gid> gids() {
        List<Gid> l = new ArrayList<>();
        for (RoceEndpoint e : endpoints) {
            l.add(e.gid);
        }
        return l;
    }

    /** Points {@code a} at a GID's IP address without allocating ({@code scratch}: 16 bytes for IPv6). */
    static void setAddress(SockAddr a, Gid g, int port, byte[] scratch) {
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

    static void fill(PseudoHeader ip, Gid src, Gid dst, int srcPort, int dstPort) {
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
        RoceEndpoint ep = sgid == null ? null : sgid.isIpv4Mapped() ? v4 : v6;
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
        RoceEndpoint ep = txEp;
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
    private void sendSeparately(RoceEndpoint ep, int r) {
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

    @Override
    public void close() {
        closed = true;
        List<RoceEndpoint> all = receiveEndpoints();
        for (RoceEndpoint e : all) {
            e.socket.close();
            e.runner.wake(); // out of a park of its idle strategy: it sees the link closed and ends
        }
        for (RoceEndpoint e : all) {
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
        for (RoceEndpoint e : all) {
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

    /** {@return the receive endpoints: the device's addresses' and its multicast groups'} */
    List<RoceEndpoint> receiveEndpoints() {
        List<RoceEndpoint> all = new ArrayList<>(endpoints);
        all.addAll(groups.values());
        return all;
    }

    /** {@return whether every endpoint's receive batch is freed, groups' too (tests)} */
    boolean receiveBatchesFreed() {
        List<RoceEndpoint> all = receiveEndpoints();
        for (RoceEndpoint e : all) {
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
