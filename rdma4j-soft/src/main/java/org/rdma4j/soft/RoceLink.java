// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;

import org.rdma4j.libc.Errors;
import org.rdma4j.libc.NativeIOException;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.wire.PseudoHeader;
import org.rdma4j.wire.RoceParser;
import org.rdma4j.wire.net.SockAddr;

/**
 * RoCEv2 on UDP (IBA Annex A17): a device's link to the world outside its JVM. Packets for a GID owned by
 * a device of the same {@link SoftFabric} still take the in-process path; all others are encoded (BTH,
 * extension headers, payload, pad, ICRC as rdma_rxe computes it) and sent from a socket bound to the
 * device's address and UDP port. Each socket is a {@link RoceEndpoint}, whose receive agent
 * ({@code rdma4j-roce-rx-<dev>-v4|v6}) takes datagrams in batches, validates them (structure and ICRC; drops counted
 * per reason), and hands them to the receive dispatcher (which hands each to its QP's executor: docs/engine.md).
 * This class keeps the routing (in process or on the wire, and from which socket) and the endpoints' lifecycle (bind,
 * groups, close); the transmit batch (packets built into one buffer, UDP GSO runs, one {@code sendmmsg} per flush,
 * refused sends retried) is its {@link GsoBatch}, the wire format's codec {@code org.rdma4j.wire}.
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

    private final GsoBatch tx;
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
        this.tx = new GsoBatch(this, device, config.udpPort());
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
        tx.add(from, p, ep);
    }

    /**
     * Sends the packets queued since the last flush: one {@code sendmmsg} whose entries are runs of
     * packets, each run one UDP GSO datagram train. Called when a burst that queued packets ends
     * ({@link Burst#exit}) and whenever the queue is full or changes socket. Any thread.
     */
    @Override
    public void flush() {
        synchronized (txLock) {
            tx.flush();
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
            tx.free();
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
        return tx.freed();
    }

    @Override
    public String toString() {
        return "RoCEv2/UDP " + config.addresses() + " port " + config.udpPort();
    }
}
