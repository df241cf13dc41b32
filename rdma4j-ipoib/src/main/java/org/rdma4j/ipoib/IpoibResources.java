// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

import org.rdma4j.common.NanoClock;
import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Dma;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WorkCompletion;

/**
 * The verbs side of an interface, as Linux's {@code ipoib_verbs.c} ({@code ipoib_transport_dev_init},
 * {@code ipoib_mcast_attach}), on the interface's own context of the device or, in connected mode, on the CM's
 * (the RC QPs are made by CM IDs, which take only objects of their context): the PD, one completion channel, the UD QP's send and receive CQs, the UD QP taken
 * to RTS with the broadcast group's Q_Key and attached to the group, the group's address handle, and the device's
 * DMA API with the PD's local DMA L_Key. It also holds what every part of the interface shares: the
 * configuration and the sizes derived from it, the counters, the log, the native memory arena, and the
 * <em>interface lock</em>.
 *
 * <p>The interface lock ({@link #lock}, Linux's {@code priv->lock}) guards the neighbour table
 * ({@link ArpNeighbours}), the connections ({@link ConnectedMode}), the UD send rings ({@link UdSender}) and the
 * list of verbs objects made at run time. Both data-path threads take it: {@code ipoib-tx-<if>}
 * ({@link IpoibTransmitter}) and {@code ipoib-rx-<if>} ({@link IpoibReceiver}). Methods that need it say "lock
 * held" and assert it. Everything else here is fixed once the interface is up.
 */
final class IpoibResources {
    final IpoibInterface.Config cfg;
    /** The interface (TUN) MTU: the UD MTU in datagram mode, up to 65520 in connected mode. */
    final int mtu;
    /** The largest IP packet one UD message carries: min(2044, port MTU - 4) unless configured. */
    final int udMtu;
    final boolean connected;
    /** Our IPv4 address and netmask, host order. */
    final int ip;
    final int netmask;
    final Consumer<String> log;
    final Counters counters = new Counters();
    /** The interface lock: see the class comment. */
    final ReentrantLock lock = new ReentrantLock();
    final Arena arena = Arena.ofShared();

    final Context ctx;
    private final boolean ownsContext;
    final ProtectionDomain pd;
    final CompletionChannel channel;
    /** The UD QP's send CQ, polled by whoever holds the lock ({@link UdSender#reap}). */
    final CompletionQueue sendCq;
    /** Every receive completion (UD and, in connected mode, the SRQ's): the receive thread's, on {@link #channel}. */
    final CompletionQueue recvCq;
    final QueuePair qp;
    final Gid gid;
    final Gid broadcast;
    final HardwareAddress self;
    final AddressHandle broadcastAh;
    final Dma dma;
    final int dmaLkey;
    /** Verbs objects to close, in order of creation (lock held once the threads run). */
    private final List<AutoCloseable> owned = new ArrayList<>();
    private boolean attached;

    /**
     * Creates the verbs objects; on failure closes what it made (the context stays the caller's).
     *
     * @param ctx         the device context: the interface's own, or the CM's in connected mode
     * @param ownsContext whether {@link #close()} closes it (not the CM's: the CM owns that one)
     * @param sendWrs send queue depth of the UD QP (its send CQ holds as many)
     * @param recvWrs receive queue depth of the UD QP
     * @param recvCqe entries of the receive CQ (UD receives, plus the SRQ's in connected mode)
     */
    IpoibResources(Context ctx, boolean ownsContext, IpoibInterface.Config cfg, int mtu, int udMtu,
                   Consumer<String> log, int sendWrs, int recvWrs, int recvCqe) {
        this.ownsContext = ownsContext;
        this.cfg = cfg;
        this.mtu = mtu;
        this.udMtu = udMtu;
        this.connected = cfg.mode() == IpoibInterface.Mode.CONNECTED;
        this.log = log;
        this.ctx = ctx;
        byte[] a = cfg.address().getAddress();
        this.ip = ((a[0] & 0xFF) << 24) | ((a[1] & 0xFF) << 16) | ((a[2] & 0xFF) << 8) | (a[3] & 0xFF);
        this.netmask = cfg.prefixLen() == 0 ? 0 : -1 << (32 - cfg.prefixLen());
        try {
            gid = ctx.queryGid(1, 0);
            broadcast = cfg.broadcast() != null ? cfg.broadcast()
                    : gid.isIpv4Mapped() ? Ipoib.broadcastGidIpv4(cfg.pkey()) : Ipoib.broadcastGid(cfg.pkey());
            pd = own(ctx.allocPd());
            channel = own(ctx.createCompChannel());
            sendCq = own(ctx.createCq(sendWrs, null, 0));
            recvCq = own(ctx.createCq(recvCqe, channel, 0));
            qp = own(pd.createQp(new QpInitAttributes().type(QpType.UD).sendCq(sendCq).recvCq(recvCq)
                    .cap(new QpCapabilities(sendWrs, recvWrs, 1, 1, 0))));
            qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1).qkey(cfg.qkey()));
            qp.modify(new QpAttributes().state(QpState.RTR));
            qp.modify(new QpAttributes().state(QpState.RTS).sqPsn(0));
            // RFC 4755 section 5: the hardware address tells neighbours whether we take connections
            self = new HardwareAddress(connected ? HardwareAddress.FLAG_RC : 0, qp.qpNum(), gid);
            // the broadcast group carries ARP (RFC 4391 section 4: every IPoIB interface joins it)
            qp.attachMcast(broadcast, 0);
            attached = true;
            broadcastAh = own(pd.createAh(av(broadcast)));
            // packet buffers are not registered: they are DMA-mapped per I/O through the device, as Linux IPoIB
            // maps its skbs (ipoib_dma_map_tx, ipoib_ud_dma_map_rx)
            dma = ctx.dma();
            dmaLkey = pd.localDmaLkey();
        } catch (RuntimeException e) {
            releaseVerbs();
            arena.close();
            throw e;
        }
    }

    /** {@return the address vector of a unicast or multicast destination on port 1 (GRH always: RoCE)} */
    AhAttributes av(Gid dgid) {
        return new AhAttributes().dgid(dgid).sgidIndex(0).portNum(1).hopLimit(64).global(true);
    }

    NanoClock clock() {
        return cfg.clock();
    }

    void count(IpoibCounter c) {
        counters.count(c);
    }

    void add(IpoibCounter c, long v) {
        counters.add(c, v);
    }

    /** Registers a verbs object to close with the interface (lock held once the threads run). */
    <T extends AutoCloseable> T own(T r) {
        owned.add(r);
        return r;
    }

    /** Forgets a verbs object the caller closed itself (lock held). */
    void disown(AutoCloseable r) {
        owned.remove(r);
    }

    /** Leaves the group and closes every verbs object, newest first (the threads have stopped). */
    void releaseVerbs() {
        if (attached) {
            try {
                qp.detachMcast(broadcast, 0);
            } catch (VerbsException e) {
                // the QP is closed below either way
            }
            attached = false;
        }
        for (int k = owned.size() - 1; k >= 0; k--) {
            try {
                owned.get(k).close();
            } catch (Exception e) {
                log.accept("ipoib: close: " + e.getMessage()); // keep closing the rest
            }
        }
        owned.clear();
    }

    /**
     * Closes the device context when it is ours (it refuses, EBUSY, if anything leaked; the CM's stays open) and
     * frees the buffers.
     */
    void close() {
        if (ownsContext) {
            try {
                ctx.close();
            } catch (VerbsException e) {
                log.accept("ipoib: close: " + e.getMessage());
            }
        }
        arena.close();
    }

    static MemorySegment[] slots(MemorySegment ring, int n, int stride, int size) {
        MemorySegment[] out = new MemorySegment[n];
        for (int k = 0; k < n; k++) {
            out[k] = ring.asSlice((long) k * stride, size);
        }
        return out;
    }

    static int align(int v, int a) {
        return (v + a - 1) & -a;
    }

    static WorkCompletion[] newWcs(int n) {
        WorkCompletion[] w = new WorkCompletion[n];
        for (int k = 0; k < n; k++) {
            w[k] = new WorkCompletion();
        }
        return w;
    }

    static String ipString(int a) {
        return (a >>> 24) + "." + ((a >>> 16) & 0xFF) + "." + ((a >>> 8) & 0xFF) + "." + (a & 0xFF);
    }
}
