// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.VerbsException;

/**
 * Address resolution: ARP over the broadcast group (RFC 826 with RFC 4391's 20-byte hardware addresses) and the
 * neighbour table with its aging, around {@link NeighbourCache}. Linux leaves ARP to the kernel's neighbour code
 * and keeps the IPoIB part (path and address handle per neighbour) in {@code ipoib_main.c}
 * ({@code neigh_add_path}, {@code ipoib_neigh_*}); here the daemon is the whole link layer, so both are here.
 * <ul>
 *   <li>Unknown next hop: the packet waits (at most 3 per neighbour, 64 in all, datagram-sized only), an ARP
 *   request goes to the group, retried every second, given up after 3.</li>
 *   <li>An entry is reachable for the configured time after the last ARP from the neighbour; then, if packets
 *   went to it meanwhile, it stays in use and is probed with unicast requests (the kernel's STALE/PROBE, RFC 1122
 *   2.3.2.1), else it is forgotten.</li>
 *   <li>An ARP whose sender hardware address is not the QPN and GID the message came from is dropped.</li>
 *   <li>In connected mode a learned neighbour that offers connections is connected to at once, and a neighbour
 *   whose address changes or that announces a restart loses its connection ({@link ConnectedMode}).</li>
 * </ul>
 *
 * <p>Threads: the receive thread (ARP in, aging) and the transmit thread (lookups, resolution), always with the
 * interface lock.
 */
final class ArpNeighbours {
    private static final int PENDING_BUFFERS = 64;
    private static final long RETRANS_NS = 1_000_000_000L;
    private static final int MAX_REQUESTS = 3;
    private static final int MAX_PENDING_PER_NEIGHBOUR = 3;
    private static final int CAPACITY = 1024;

    private final IpoibResources res;
    private final UdSender ud;
    private final ConnectedMode cm;
    private final NeighbourCache<AddressHandle> table;
    /** Packets waiting for resolution: UD MTU bytes each, with their lengths and a free list. */
    private final MemorySegment pendingPool;
    private final int[] pendingLength = new int[PENDING_BUFFERS];
    private final int[] pendingFree = new int[PENDING_BUFFERS];
    private int pendingFreeCount;
    private final ArpPacket rxArp = new ArpPacket();
    private final ArpPacket txArp = new ArpPacket();

    ArpNeighbours(IpoibResources res, UdSender ud, ConnectedMode cm) {
        this.res = res;
        this.ud = ud;
        this.cm = cm;
        this.table = new NeighbourCache<>(res.clock(), res.cfg.reachableNs(), RETRANS_NS, MAX_REQUESTS,
                MAX_PENDING_PER_NEIGHBOUR, CAPACITY);
        this.pendingPool = res.arena.allocate((long) res.udMtu * PENDING_BUFFERS, 64);
        for (int k = 0; k < PENDING_BUFFERS; k++) {
            pendingFree[k] = k;
        }
        pendingFreeCount = PENDING_BUFFERS;
    }

    /**
     * A gratuitous ARP request for our own address (RFC 5227 announcement) to the broadcast group: hosts that
     * knew this address under an older hardware address (this daemon before a restart, with another QPN)
     * update their entry at once instead of sending to a dead QP until it ages out.
     */
    void announce() {
        res.lock.lock();
        try {
            sendArp(ArpPacket.OP_REQUEST, null, res.ip, res.broadcastAh, QueuePair.MULTICAST_QPN);
        } finally {
            res.lock.unlock();
        }
    }

    /**
     * The usable entry of a destination (lock held): reachable, or being probed while in use, and marked used.
     *
     * @param dst IPv4 address in the subnet
     * @return the entry with its address handle, or null when it must be resolved first ({@link #resolve})
     */
    NeighbourCache.Entry<AddressHandle> lookup(int dst) {
        assert res.lock.isHeldByCurrentThread();
        NeighbourCache.Entry<AddressHandle> e = table.get(dst);
        if (e == null || e.ah() == null) {
            return null;
        }
        table.used(e);
        return e;
    }

    /**
     * A packet to a neighbour with no usable entry (lock held): it waits for the resolution this starts (or that
     * is under way) when it is datagram-sized; a bigger one only starts it (TX_DROP_UNRESOLVED).
     *
     * @param src memory holding the IPv4 packet
     * @param off where it starts
     * @param n   its length
     */
    void resolve(int dst, MemorySegment src, long off, int n) {
        assert res.lock.isHeldByCurrentThread();
        NeighbourCache.Entry<AddressHandle> e = table.get(dst);
        boolean fresh = e == null;
        if (fresh) {
            e = table.startResolving(dst);
            if (e == null) {
                res.count(IpoibCounter.TX_DROP_UNRESOLVED);
                return;
            }
        }
        if (n > res.udMtu) {
            res.count(IpoibCounter.TX_DROP_UNRESOLVED); // the resolution queue holds datagram-sized packets only
        } else {
            queue(e, src, off, n);
        }
        if (fresh) {
            sendArp(ArpPacket.OP_REQUEST, null, dst, res.broadcastAh, QueuePair.MULTICAST_QPN);
        }
    }

    /** Copies a packet into the pending pool and onto its neighbour's queue (lock held). */
    private void queue(NeighbourCache.Entry<AddressHandle> e, MemorySegment src, long off, int n) {
        if (pendingFreeCount == 0) {
            res.count(IpoibCounter.TX_DROP_UNRESOLVED);
            return;
        }
        int b = pendingFree[pendingFreeCount - 1];
        if (!table.enqueue(e, b)) {
            res.count(IpoibCounter.TX_DROP_UNRESOLVED);
            return;
        }
        pendingFreeCount--;
        MemorySegment.copy(src, off, pendingPool, (long) b * res.udMtu, n);
        pendingLength[b] = n;
    }

    /**
     * An ARP packet from the fabric (receive thread; takes the lock when it teaches something).
     *
     * @param ring    the receive buffer
     * @param p       where the ARP packet starts
     * @param payload bytes that came for it
     * @param srcQp   the sender's QPN (from the DETH)
     * @param sgidHi  the sender's GID (from the GRH), high half
     * @param sgidLo  low half
     */
    void receive(MemorySegment ring, long p, int payload, int srcQp, long sgidHi, long sgidLo) {
        ArpPacket arp = rxArp.wrap(ring, p);
        if (arp.validate(payload) != ArpPacket.Verdict.OK) {
            res.count(IpoibCounter.RX_DROP_BAD_ARP);
            return;
        }
        HardwareAddress sha = arp.senderHardware();
        // the sender's hardware address must be where the message came from: a host cannot claim another's
        // QP or GID (the fabric's GRH and DETH say who sent it)
        if (sha.qpn() != srcQp || sha.gid().hi() != sgidHi || sha.gid().lo() != sgidLo) {
            res.count(IpoibCounter.RX_DROP_ARP_SPOOFED);
            return;
        }
        res.count(IpoibCounter.RX_ARP);
        int spa = arp.senderIp();
        int tpa = arp.targetIp();
        boolean forUs = tpa == res.ip;
        if (spa == 0 || spa == res.ip || (spa & res.netmask) != (res.ip & res.netmask)) {
            return; // probes and foreign subnets teach nothing (not an error)
        }
        res.lock.lock();
        try {
            NeighbourCache.Entry<AddressHandle> known = table.get(spa);
            // RFC 826: update an entry we have; add one only when the packet is addressed to us
            if (known != null || forUs) {
                if (res.connected && known != null && tpa == spa && sha.equals(known.hardware())) {
                    // a gratuitous ARP (RFC 5227 announcement) from a neighbour we know: it has (re)started its
                    // interface, with the same hardware address (same GID, first QPN again), so our connection
                    // goes to a QP that is gone or is someone else's: make a new one
                    cm.dropTx(spa);
                }
                learn(spa, sha, known);
            }
            if (forUs && arp.operation() == ArpPacket.OP_REQUEST) {
                NeighbourCache.Entry<AddressHandle> e = table.get(spa);
                if (e != null && e.ah() != null) {
                    sendArp(ArpPacket.OP_REPLY, sha, spa, e.ah(), sha.qpn());
                }
            }
        } finally {
            res.lock.unlock();
        }
    }

    /** Records a neighbour's address, makes an address handle when it is new or changed, flushes its queue (lock held). */
    private void learn(int spa, HardwareAddress sha, NeighbourCache.Entry<AddressHandle> known) {
        boolean changed = known == null || known.ah() == null || !sha.equals(known.hardware());
        NeighbourCache.Entry<AddressHandle> e = table.confirm(spa, sha);
        if (e != null && !changed && res.connected && e.ah() != null && !cm.hasTx(spa)) {
            cm.connFor(e); // known, but its connection was dropped: connect again at once
        }
        if (e == null || !changed) {
            return;
        }
        AddressHandle ah;
        try {
            ah = res.own(res.pd.createAh(res.av(sha.gid())));
        } catch (VerbsException ex) {
            res.log.accept("ipoib: cannot reach " + IpoibResources.ipString(spa) + " at " + sha + ": " + ex.getMessage());
            return;
        }
        cm.dropTx(spa); // a connection to the old address is of no use (the neighbour restarted or changed mode)
        ud.retire(table.install(e, ah));
        res.count(IpoibCounter.NEIGHBOURS_LEARNED);
        res.log.accept("neighbour " + IpoibResources.ipString(spa) + " lladdr " + sha + " learned");
        if (e.pendingCount() > 0) {
            table.used(e);
        }
        table.drain(e, b -> {
            ud.sendCopy(pendingPool, (long) b * res.udMtu, pendingLength[b], ah, sha.qpn());
            pendingFree[pendingFreeCount++] = b;
        });
        if (res.connected) {
            cm.connFor(e); // connect at once, as Linux does when it learns a connected-mode neighbour
        }
    }

    /** Sends an ARP request (to the group, or unicast for a probe) or reply (to the asker) (lock held). */
    private void sendArp(int op, HardwareAddress tha, int tpa, AddressHandle ah, int qpn) {
        long base = ud.controlSlot();
        if (base < 0) {
            return;
        }
        txArp.wrap(ud.controlMemory(), base + Ipoib.HEADER_BYTES).write(op, res.self, res.ip, tha, tpa);
        if (ud.sendControl(Ipoib.TYPE_ARP, ArpPacket.BYTES, ah, qpn)) {
            res.count(op == ArpPacket.OP_REQUEST ? IpoibCounter.ARP_REQUESTS_SENT : IpoibCounter.ARP_REPLIES_SENT);
        }
    }

    private final NeighbourCache.Listener<AddressHandle> aging = new NeighbourCache.Listener<>() {
        @Override
        public void retry(NeighbourCache.Entry<AddressHandle> e) {
            sendArp(ArpPacket.OP_REQUEST, null, e.ip(), res.broadcastAh, QueuePair.MULTICAST_QPN);
        }

        @Override
        public void probe(NeighbourCache.Entry<AddressHandle> e) {
            // unicast to the address we have (RFC 1122 2.3.2.1: unicast poll before falling back to broadcast)
            sendArp(ArpPacket.OP_REQUEST, e.hardware(), e.ip(), e.ah(), e.hardware().qpn());
        }

        @Override
        public void removed(NeighbourCache.Entry<AddressHandle> e) {
            table.drain(e, b -> {
                res.count(IpoibCounter.TX_DROP_UNRESOLVED);
                pendingFree[pendingFreeCount++] = b;
            });
            cm.dropTx(e.ip());
            ud.retire(e.ah());
            res.count(IpoibCounter.NEIGHBOURS_EXPIRED);
            res.log.accept("neighbour " + IpoibResources.ipString(e.ip()) + (e.ah() != null ? " expired"
                    : " failed (no ARP reply)"));
        }
    };

    /** Ages the table: ARP retries and probes, removals (lock held). */
    void age() {
        assert res.lock.isHeldByCurrentThread();
        table.age(aging);
    }

    /** {@return the table, one line per entry, with the connection state in connected mode (takes the lock)} */
    List<String> lines() {
        List<String> out = new ArrayList<>();
        res.lock.lock();
        try {
            table.forEach(e -> out.add(IpoibResources.ipString(e.ip()) + " " + e.state().name().toLowerCase(Locale.ROOT)
                    + (e.hardware() != null ? " lladdr " + e.hardware() : "") + (res.connected ? cm.describe(e.ip()) : "")));
        } finally {
            res.lock.unlock();
        }
        return out;
    }
}
