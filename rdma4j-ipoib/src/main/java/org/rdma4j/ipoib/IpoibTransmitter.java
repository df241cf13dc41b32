// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.QueuePair;

/**
 * Stack to fabric, as Linux's {@code ipoib_start_xmit} ({@code ipoib_main.c}): the thread {@code ipoib-tx-<if>}
 * reads IP packets from the TUN interface and decides where each goes: unicast to its neighbour's UD QP (RFC 4391),
 * or on the neighbour's RC connection in connected mode (RFC 4755), broadcast and multicast to the group; a packet
 * to an unresolved neighbour waits for ARP ({@link ArpNeighbours}). What does not fit the way it must take is
 * dropped and answered with ICMP "fragmentation needed" ({@link IcmpTooBig}).
 * <ul>
 *   <li>Datagram mode: the TUN read lands in the data ring's next slot ({@link UdSender}) behind room for the
 *   header, and is posted from there. No copy, no allocation.</li>
 *   <li>Connected mode: the TUN read lands in a free 64 KiB buffer of {@link ConnectedMode}, which an RC send then
 *   owns until its completion; a packet that goes as a datagram instead is copied to the control ring.</li>
 * </ul>
 *
 * <p>Threads: the transmit thread waits for the TUN interface outside any lock and reads under the <em>TUN read
 * lock</em>, which the receive thread also takes, when it is free, to send at once what its own TUN writes made the
 * stack answer ({@link #transmitFromReceiver}); the reader fills the data ring's next slot or a big buffer without the
 * interface lock, and routes and posts with it.
 */
final class IpoibTransmitter {
    private static final int IDLE_WAIT_MS = 100;

    private final IpoibResources res;
    private final UdSender ud;
    private final ArpNeighbours neighbours;
    private final ConnectedMode cm;
    private final IcmpTooBig icmp;
    private static final int NO_ROOM = -1;
    private static final int CLOSED = -2;

    private PacketPort tun;
    private volatile boolean running;
    private Thread thread;
    /**
     * The TUN read lock: whoever reads from the TUN interface holds it until the packet is posted, so packets leave
     * in the order the stack queued them. The transmit thread takes it for every read; the receive thread tries it
     * after its writes ({@link #transmitFromReceiver}). Taken before the interface lock, never after.
     */
    private final ReentrantLock readLock = new ReentrantLock();
    /** Connected mode: the free big send buffer the next TUN read goes into, or -1 (TUN read lock). */
    private int held = -1;

    IpoibTransmitter(IpoibResources res, UdSender ud, ArpNeighbours neighbours, ConnectedMode cm) {
        this.res = res;
        this.ud = ud;
        this.neighbours = neighbours;
        this.cm = cm;
        this.icmp = new IcmpTooBig(res.arena);
    }

    /** Starts {@code ipoib-tx-<if>}, which reads from {@code port}. */
    void start(PacketPort port) {
        tun = port;
        running = true;
        thread = Thread.ofPlatform().name("ipoib-tx-" + port.name()).daemon().start(this::run);
    }

    /** Asks the thread to stop; it does within its idle wait. */
    void stop() {
        running = false;
    }

    /** Waits (bounded) for the thread to end. */
    void join() throws InterruptedException {
        if (thread != null) {
            thread.join(2_000);
        }
    }

    /** Reaps both send CQs (lock held). */
    private void reap() {
        ud.reap();
        cm.reapSends();
    }

    private void run() {
        try {
            while (running) {
                int r;
                readLock.lock();
                try {
                    r = transmitQueued(Integer.MAX_VALUE);
                } finally {
                    readLock.unlock();
                }
                if (r == CLOSED) {
                    break;
                }
                if (r == NO_ROOM) {
                    waitForSendRoom();
                } else if (r == 0) {
                    tun.awaitReadable(IDLE_WAIT_MS);
                }
            }
        } catch (IOException | RuntimeException e) {
            if (running) {
                res.log.accept("ipoib: transmit thread stopped: " + e);
            }
        }
        readLock.lock();
        try {
            if (held >= 0) {
                res.lock.lock();
                try {
                    cm.returnTxBuffer(held);
                } finally {
                    res.lock.unlock();
                }
                held = -1;
            }
        } finally {
            readLock.unlock();
        }
    }

    /**
     * Sends what the stack queued on the TUN interface as a consequence of packets the receive thread just wrote to
     * it (an echo reply, TCP's ACKs and the segments they release are made inside that write): at most
     * {@code max} packets, from the receive thread, so a request and its answer cost no wake-up of the transmit
     * thread. Does nothing when the transmit thread is reading.
     *
     * @param max most packets to send
     * @throws IOException on a TUN read error
     */
    void transmitFromReceiver(int max) throws IOException {
        if (running && readLock.tryLock()) {
            try {
                transmitQueued(max);
            } finally {
                readLock.unlock();
            }
        }
    }

    /**
     * Reads packets from the TUN queue without waiting and routes each, until the queue is empty, there is no send
     * buffer, or {@code max} were sent (TUN read lock held). Datagram mode: each read lands in the data ring's next
     * slot, posted from there. Connected mode: each lands in a free big buffer ({@link #held}), which an RC send then
     * owns until its completion; a packet that goes as a datagram is copied to the control ring and the buffer kept.
     * Send completions are reaped only when no buffer is free, or by the receive thread's timer: an empty poll of a
     * CQ would make the device take this thread for a busy poller and its receive agent step back.
     *
     * @return how many packets were read, or {@link #NO_ROOM} (none read: no free buffer), or {@link #CLOSED}
     */
    private int transmitQueued(int max) throws IOException {
        SendRing data = ud.data();
        int k = 0;
        while (k < max) {
            MemorySegment into;
            if (res.connected) {
                if (held < 0) {
                    res.lock.lock();
                    try {
                        held = cm.takeTxBuffer();
                        if (held < 0) {
                            reap();
                            held = cm.takeTxBuffer();
                        }
                    } finally {
                        res.lock.unlock();
                    }
                    if (held < 0) {
                        return k > 0 ? k : NO_ROOM;
                    }
                }
                into = cm.txPayload(held);
            } else {
                if (data.full()) {
                    res.lock.lock();
                    try {
                        reap();
                    } finally {
                        res.lock.unlock();
                    }
                    if (data.full()) {
                        return k > 0 ? k : NO_ROOM;
                    }
                }
                // only the holder of the TUN read lock posts to the data ring: its next slot stays ours until posted
                into = data.nextPayload();
            }
            int n = tun.read(into, 0);
            if (n < 0) {
                return CLOSED;
            }
            if (n == 0) {
                return k;
            }
            k++;
            if (res.connected) {
                if (route(cm.txMemory(), cm.txOffset(held), n, held)) {
                    held = -1; // an RC send owns it now
                }
            } else {
                route(data.memory(), data.offset(), n, -1);
            }
        }
        return k;
    }

    /** Bounded wait for a signalled completion to free send buffers; drops nothing (TUN queues meanwhile). */
    private void waitForSendRoom() {
        for (int spins = 0; spins < 1_000 && running; spins++) {
            res.lock.lock();
            try {
                reap();
                if (res.connected ? cm.txBufferFree() : !ud.data().full()) {
                    return;
                }
            } finally {
                res.lock.unlock();
            }
            Thread.onSpinWait();
        }
        LockSupport.parkNanos(50_000);
    }

    /**
     * Decides where an IPv4 packet from the kernel goes (RFC 4391: unicast to the neighbour, broadcast and
     * multicast to the group; RFC 4755: unicast on the neighbour's connection when it has one).
     *
     * @param ring the memory the packet is in: the data ring, or the big send buffers
     * @param base the offset of its slot's header (the packet follows it)
     * @param n    the packet's length
     * @param big  the big send buffer the packet is in (connected mode), or -1 (datagram mode: the data ring)
     * @return whether an RC send now owns the big buffer
     */
    private boolean route(MemorySegment ring, long base, int n, int big) {
        long p = base + Ipoib.HEADER_BYTES;
        int vihl = ring.get(ValueLayout.JAVA_BYTE, p) & 0xFF;
        if ((vihl >>> 4) == 6) {
            res.count(IpoibCounter.TX_DROP_IPV6);
            return false;
        }
        if ((vihl >>> 4) != 4 || n < 20) {
            res.count(IpoibCounter.TX_DROP_MALFORMED);
            return false;
        }
        int dst = ring.get(Ipoib.INT_BE, p + 16);
        boolean toGroup = (dst >>> 28) == 0xE || dst == -1 || dst == (res.ip | ~res.netmask);
        res.lock.lock();
        try {
            if (toGroup) {
                // IP broadcast and multicast go to the broadcast group (no other IP groups are joined)
                sendUd(ring, base, n, res.broadcastAh, QueuePair.MULTICAST_QPN, big, false);
                return false;
            }
            if ((dst & res.netmask) != (res.ip & res.netmask) || dst == res.ip) {
                res.count(IpoibCounter.TX_DROP_NO_ROUTE);
                return false;
            }
            NeighbourCache.Entry<AddressHandle> e = neighbours.lookup(dst);
            if (e == null) {
                neighbours.resolve(dst, ring, p, n);
                return false;
            }
            if (big < 0) {
                ud.sendData(n, e.ah(), e.hardware().qpn());
                return false;
            }
            TxConn c = cm.connFor(e);
            if (c != null && c.state == TxConn.State.CONNECTED) {
                if (Ipoib.HEADER_BYTES + n > c.remoteMtu) {
                    tooBig(ring, p, n, c.remoteMtu - Ipoib.HEADER_BYTES);
                    return false;
                }
                return cm.send(c, big, n);
            }
            // no connection (yet): datagrams, and what does not fit one waits for the connection unless this
            // neighbour is datagram-only
            sendUd(ring, base, n, e.ah(), e.hardware().qpn(), big, c != null && !c.fallback);
            return false;
        } finally {
            res.lock.unlock();
        }
    }

    /**
     * Sends a packet as a UD message (lock held): from its data-ring slot in datagram mode, else copied from its big
     * buffer to the control ring; a packet over the UD MTU is dropped, with ICMP "fragmentation needed" unless
     * {@code waitForConnection}.
     */
    private void sendUd(MemorySegment ring, long base, int n, AddressHandle ah, int qpn, int big,
                        boolean waitForConnection) {
        if (big < 0) {
            ud.sendData(n, ah, qpn);
            return;
        }
        if (n > res.udMtu) {
            if (waitForConnection) {
                res.count(IpoibCounter.TX_DROP_CM_CONNECTING); // no ICMP: that would lower the path MTU for minutes
            } else {
                tooBig(ring, base + Ipoib.HEADER_BYTES, n, res.udMtu);
            }
            return;
        }
        ud.sendCopy(ring, base + Ipoib.HEADER_BYTES, n, ah, qpn);
    }

    /** Drops a packet too big for its way and tells the stack (RFC 1191; Linux ipoib_cm_skb_too_long). */
    private void tooBig(MemorySegment ring, long p, int n, int allowed) {
        res.count(IpoibCounter.TX_DROP_TOO_BIG);
        int len = icmp.build(ring, p, n, allowed);
        if (len == 0) {
            return;
        }
        try {
            tun.writeControl(icmp.message(), len);
        } catch (IOException ex) {
            // the drop is counted; the sender's retransmission will meet the same answer
        }
    }
}
