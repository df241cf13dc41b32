// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.nio.channels.ClosedChannelException;
import java.util.Locale;
import java.util.concurrent.locks.LockSupport;

import org.rdma4j.common.agent.Agent;
import org.rdma4j.common.agent.AgentRunner;
import org.rdma4j.common.agent.IdleStrategies;
import org.rdma4j.common.agent.IdleStrategy;
import org.rdma4j.verbs.Gid;
import org.rdma4j.wire.AtomicEth;
import org.rdma4j.wire.Bth;
import org.rdma4j.wire.Deth;
import org.rdma4j.wire.PseudoHeader;
import org.rdma4j.wire.Reth;
import org.rdma4j.wire.RocePacket;
import org.rdma4j.wire.RoceParser;
import org.rdma4j.wire.RoceStatus;
import org.rdma4j.wire.net.DatagramBatch;
import org.rdma4j.wire.net.SockAddr;
import org.rdma4j.wire.net.UdpSocket;

/**
 * One UDP socket of a {@link RoceLink} (a device address, or a multicast group it joined) and its receive agent
 * ({@code rdma4j-roce-rx-<dev>-v4|v6|-mc-<group>}, an {@link Agent} under an {@link AgentRunner}: what a cycle
 * throws is reported by {@link EngineErrors#agentFailed} and the agent carries on; a closed socket or link ends
 * it): the receive side of RoCEv2. Datagrams are taken in batches
 * (recvmmsg, UDP GRO trains split per packet), checked (structure and ICRC, the IPv4 ID solved; drops counted per
 * reason), decoded into the engine's {@link Packet} and handed to {@link SoftDevice#receive}. Whoever holds the
 * receive lock receives: the agent, or an application thread busy-polling the device's CQs ({@link #poll}), so
 * datagrams are processed in the order the socket queued them. The link keeps the transmit side (the socket's
 * send half, under its transmit lock).
 */
final class RoceEndpoint implements Agent {
    /**
     * The receive agents' idle strategy: {@value #BLOCK} (the default) or any {@link IdleStrategies#parse} accepts
     * ({@code spin}, {@code yield}, {@code park[:MIN[:MAX]]}, {@code backoff[:SPINS:YIELDS:MIN:MAX]}).
     */
    static final String RX_IDLE_PROPERTY = "rdma4j.soft.roceRxIdle";
    /**
     * The default receive idle: the agent blocks in {@code poll(2)} on its socket (at most {@link #RX_POLL_MS} at a
     * time), so a datagram wakes it and an idle device costs no CPU.
     */
    static final String BLOCK = "block";
    private static final int SLOT_BYTES = RoceLink.SLOT_BYTES;
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
    private final RoceLink link;
    private final SoftDevice device;
    private final RoceConfig config;
    final InetAddress address;
    final Gid gid;
    final UdpSocket socket;
    /** The agent's role ({@code roce-rx-<dev>-v4|v6|-mc-<group>}): its thread is {@code rdma4j-<role>}. */
    private final String role;
    /** Runs this endpoint's receive agent; started by the link. */
    final AgentRunner runner;
    /** The receive agent's thread ({@link #runner}'s). */
    final Thread agent;
    /**
     * Whether the agent blocks in {@code poll(2)} on the socket ({@value #BLOCK}), else it takes what is queued
     * without waiting and idles with the user's {@link IdleStrategy} when nothing came.
     */
    private final boolean blocking;
    /** Tests: run at the start of each of the agent's duty cycles (a fault injected into the agent's own work). */
    volatile Runnable cycleHook;
    final boolean ipv6;
    /** The traffic class (TOS) the socket sends with now; txLock. */
    int trafficClass;
    /**
     * Whether runs of packets leave as one UDP GSO send (txLock). Not for IPv6: we send IPv6 with UDP
     * checksum 0 as rxe does, and Linux refuses GSO without a checksum (udp_v6_send_skb: EINVAL when
     * no_check6_tx); off once the kernel refused a GSO send on this socket.
     */
    boolean gso;

    RoceEndpoint(RoceLink link, InetAddress address) throws IOException {
        this(link, address, null);
    }

    /**
     * Reads and checks {@value #RX_IDLE_PROPERTY}.
     *
     * @return the receive agents' idle strategy spec: {@value #BLOCK} when the property is unset or blank
     * @throws IllegalArgumentException naming the property and the accepted forms, for anything else
     */
    static String rxIdleSpec() {
        String spec = System.getProperty(RX_IDLE_PROPERTY, BLOCK).trim();
        if (spec.isEmpty()) {
            spec = BLOCK;
        }
        try {
            rxIdle(spec);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("-D" + RX_IDLE_PROPERTY + "=" + spec + ": expected " + BLOCK
                    + " (the default: wait in poll(2) on the socket) or an idle strategy: " + e.getMessage(), e);
        }
        return spec;
    }

    /** {@return a new idle strategy for a receive agent, from a spec {@link #rxIdleSpec} accepted} */
    private static IdleStrategy rxIdle(String spec) {
        return BLOCK.equals(spec.toLowerCase(Locale.ROOT)) ? new BlockingIdle() : IdleStrategies.parse(spec);
    }

    /**
     * @param address the device's address, or a multicast group
     * @param iface   for a group: the device's address whose interface joins it; null for a unicast
     *                endpoint
     */
    RoceEndpoint(RoceLink link, InetAddress address, InetAddress iface) throws IOException {
        this.link = link;
        this.device = link.device;
        this.config = link.config;
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
            this.gso = RoceLink.GSO && !ipv6 && iface == null;
            if (RoceLink.GRO) {
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
        this.role = "roce-rx-" + device.name()
                + (iface != null ? "-mc-" + address.getHostAddress() : ipv6 ? "-v6" : "-v4");
        IdleStrategy idle = rxIdle(link.rxIdle);
        this.blocking = idle instanceof BlockingIdle;
        this.runner = new AgentRunner(this, idle, this::onAgentError);
        this.agent = runner.thread(); // rdma4j-roce-rx-...
    }

    // Receive state, guarded by rxLock: whoever holds it receives and dispatches, so datagrams are
    // processed in the order the socket queued them even when an application thread polls too.
    private final java.util.concurrent.locks.ReentrantLock rxLock = new java.util.concurrent.locks.ReentrantLock();
    /**
     * The receive batch's memory (1 MiB with GRO): freed by {@link #freeBatch} when the endpoint ends, not left
     * to the garbage collector (a process that opens and closes many RoCE devices, such as the long property
     * runs of -Pslow, otherwise holds a MiB per closed endpoint until a GC happens to run).
     */
    private final Arena rxArena = RoceLink.newRxArena();
    private final DatagramBatch batch = RoceLink.GRO ? new DatagramBatch(rxArena, RX_BATCH_GRO, RX_SLOT_GRO)
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
    volatile boolean pollerBlocked;

    /**
     * The receive agent's duty cycle: takes datagrams and dispatches them, unless application threads are
     * busy-polling the device's CQs, which then receive on their own thread (see {@link RoceLink#pollReceive}):
     * handing a packet from this agent to a spinning poller costs a wake-up on another core (about
     * 10 µs here), and on two cores a spinning poller and a woken agent fight for the CPU. With {@value #BLOCK}
     * (the default) the cycle itself waits for the socket, at most {@link #RX_POLL_MS}; with another idle
     * strategy it never blocks, and the runner idles with that strategy after a cycle that received nothing.
     */
    @Override
    public int doWork() {
        Runnable hook = cycleHook;
        if (hook != null) {
            hook.run();
        }
        if (link.closed()) {
            stop();
            return 0;
        }
        return blocking ? blockingCycle() : pollingCycle();
    }

    /** One cycle of the {@value #BLOCK} agent: its waits are its idle, so it always counts as work done. */
    private int blockingCycle() {
        try {
            long sincePoll = sincePoll();
            if (sincePoll < POLLER_ACTIVE_NS) {
                // An application thread is busy-polling and receives on its own thread: stay off
                // the socket, so that a datagram wakes nobody. A thread blocked in poll(2) is woken
                // by every datagram the peer sends (on loopback, inside the peer's sendto), and on
                // two cores that wake-up preempts a spinning poller: it cost a ping-pong most of
                // its latency. A program that waits on memory rather than on a CQ (perftest's
                // write_lat) has no poller, and then this agent receives within the window.
                LockSupport.parkNanos(POLLER_ACTIVE_NS - sincePoll);
                return 1;
            }
            // ACKs a poller deferred and did not send itself (it went quiet): this agent sends them
            if (device.fabric.acksPending()) {
                device.fabric.flushAcks();
            }
            // Shortly after polling stopped, wake often: a poller that started again after the check
            // above may defer an ACK whose datagram this agent will never see (bounded ACK delay).
            long wait = sincePoll < RECENT_POLLER_NS ? 1 : RX_POLL_MS;
            if (!socket.awaitReadable(wait)) {
                return 1;
            }
            if (drain(false, true) && lastBulk) {
                spinWhileTrafficFlows();
            }
            return 1;
        } catch (IOException e) {
            return ioFailed(e);
        }
    }

    /**
     * One cycle of an agent with an idle strategy of the user's: what the socket has queued, without waiting.
     * Within the poller window it stays off the socket as {@link #blockingCycle} does, idling instead.
     */
    private int pollingCycle() {
        try {
            if (sincePoll() < POLLER_ACTIVE_NS) {
                return 0; // an application thread receives on its own thread
            }
            if (device.fabric.acksPending()) {
                device.fabric.flushAcks();
            }
            return drain(false, false) ? 1 : 0;
        } catch (IOException e) {
            return ioFailed(e);
        }
    }

    /** A receive or a wait failed: a closed socket or link ends the agent, anything else is counted. */
    private int ioFailed(IOException e) {
        if (e instanceof ClosedChannelException || link.closed()) {
            stop();
            return 0;
        }
        device.countOutsideEngine(SoftCounter.ROCE_RX_ERRORS);
        return blocking ? 1 : 0;
    }

    /** {@return nanoseconds since an application thread last polled, {@link Long#MAX_VALUE} if it has left} */
    private long sincePoll() {
        return pollerBlocked ? Long.MAX_VALUE : System.nanoTime() - lastPollerNs;
    }

    /**
     * A parking idle strategy parks at most to the end of the poller window, and at most 1 ms at a time shortly
     * after it (a poller that started again may defer an ACK whose datagram this agent never sees).
     */
    @Override
    public long idleBudgetNs() {
        if (blocking) {
            return Long.MAX_VALUE; // only after a failed cycle: BlockingIdle's own pause
        }
        long sincePoll = sincePoll();
        if (sincePoll < POLLER_ACTIVE_NS) {
            return POLLER_ACTIVE_NS - sincePoll;
        }
        return sincePoll < RECENT_POLLER_NS ? 1_000_000 : Long.MAX_VALUE;
    }

    @Override
    public String roleName() {
        return role;
    }

    /** The socket is closed or the link is: nobody receives on this endpoint again. */
    @Override
    public void onClose() {
        freeBatch();
    }

    /** Ends the agent from its own thread: the runner stops after this cycle and calls {@link #onClose}. */
    private void stop() {
        runner.close();
    }

    /**
     * What a cycle threw: no receive agent dies silently. Reported and counted, and the agent carries on (a
     * packet's own failure was already taken by its QP in SoftDevice.receive); after close it just ends.
     */
    private void onAgentError(Agent a, Throwable t) {
        if (link.closed()) {
            stop();
            return;
        }
        EngineErrors.agentFailed(device, device.fabric, agent.getName(), t);
    }

    /**
     * The idle of the {@value #BLOCK} agent, whose cycles wait for the socket themselves and always count as
     * work: the runner calls it only after a cycle that threw, and it pauses 1 ms then, so a lasting fault is
     * no hot loop.
     */
    private static final class BlockingIdle implements IdleStrategy {
        private static final long PAUSE_NS = 1_000_000;

        @Override
        public void idle(int workCount) {
            if (workCount == 0) {
                idleAtMost(Long.MAX_VALUE);
            }
        }

        @Override
        public void idleAtMost(long maxParkNs) {
            LockSupport.parkNanos(Math.min(PAUSE_NS, maxParkNs));
        }

        @Override
        public void reset() {
        }

        @Override
        public boolean parks() {
            return true;
        }

        @Override
        public String alias() {
            return BLOCK;
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
        for (long spins = 0; !link.closed() && spins < MAX_RX_SPINS; spins++) {
            if (drain(false, true)) {
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
                RoceLink.LIVE_RX_BATCHES.decrementAndGet();
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
        LockSupport.unpark(agent);
    }

    /** Called by a thread that polls a CQ of the device and found it empty. */
    boolean poll() {
        lastPollerNs = System.nanoTime();
        pollerBlocked = false;
        try {
            return drain(true, false);
        } catch (IOException e) {
            return false;
        }
    }

    /**
     * Receives what the socket has queued and dispatches it, as one Burst.
     *
     * @param poller      whether an application thread receives (else the agent)
     * @param waitForLock whether to wait for the receive lock (the blocking agent, which found the socket
     *                    readable), else a holder's receive is taken to be this call's
     * @return whether a datagram was received
     */
    private boolean drain(boolean poller, boolean waitForLock) throws IOException {
        if (!waitForLock) {
            if (!rxLock.tryLock()) {
                return false; // the agent or a poller is receiving: this call has nothing to add
            }
        } else {
            // The agent found the socket readable, and a poller may hold the lock: wait for it rather than
            // return and poll(2) again at once. A readable socket makes poll return at once, so on a loaded
            // host, where the holder can be preempted mid-dispatch, the agent spun in a hot loop of
            // poll(2) and failed tryLocks (about 100 per message in ib_send_lat at load 14-24) on the CPU
            // the holder needed to finish (docs/benchmarks.md, "RoCEv2 8 B latency ... (roce-perf, session 4)").
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
                RoceLink.fill(ip, lastFromGid, gid, from.port(), config.udpPort());
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
}
