// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.ReentrantLock;

import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.Dma;
import org.rdma4j.verbs.DmaDirection;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.PortAttributes;
import org.rdma4j.verbs.PortState;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcOpcode;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.verbs.cm.CmAddress;
import org.rdma4j.verbs.spi.GsiAccess;

/**
 * The MAD layer's end of one port ({@code struct ib_mad_port_private}): the port's GSI QP (QP1) with its
 * CQ and DMA-mapped buffers, set up as Linux's {@code ib_mad_port_start} does (INIT with Q_Key
 * 0x80010000 and P_Key index 0, RTR, RTS with send PSN 0), a ring of 40 + 256-byte receive buffers and a
 * pool of 256-byte send buffers. As mad.c, the buffers are not registered: they are DMA-mapped
 * ({@link Context#dma()}) and posted with the PD's local DMA L_Key, the receive ring FROM_DEVICE and the
 * send pool TO_DEVICE for the port's life, synced around each use, so every DMA mode works (a device that
 * reaches memory only through bounce buffers refuses registrations). Every MAD goes out as one UD SEND to QP 1 with Q_Key 0x80010000
 * ({@code ib_create_send_mad}); received ones are copied out with their GRH area and handed to the MAD
 * layer. Address handles are cached per destination. Everything but construction runs under the CM lock.
 */
final class MadPort implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger("org.rdma4j.cm");
    static final int GRH = 40;
    /**
     * Receive buffers of QP1. Linux posts 512 (IB_MAD_QP_RECV_SIZE, mad_priv.h; the mad_recvq_size module
     * parameter); a CM in user space shares the CPU with its application, so it keeps twice as many for
     * bursts of requests (a MAD dropped for want of a buffer costs its sender a retransmission timeout).
     */
    static final int RECV_SLOTS = 1024;
    static final int SEND_SLOTS = 128;
    static final int RECV_SLOT_BYTES = 320; // GRH + MAD (296), 64-byte aligned
    /** Receive buffers per DMA mapping: 160 KiB, under a bounce pool's largest mapping (swiotlb's 256 KiB). */
    static final int RECV_CHUNK = 512;
    static final long SEND_TAG = 1L << 40;
    /** Sends waiting for a free send buffer beyond this are dropped (counted). */
    static final int MAX_BACKLOG = 8192;
    /** Completions taken from QP1's CQ without the CM lock that may wait for it. */
    static final int MAX_TAKEN = 4096;
    private static final int AH_CACHE = 512;

    final UserCm cm;
    final Device device;
    final int portNum;
    final Context ctx;
    final long caGuid;
    final int ackDelay;
    final int maxRdAtomic;
    final int maxInitRdAtomic;
    private final GsiAccess gsi;
    /** QP1 and its buffers, made by {@link #start()}; null until then. */
    private Qp1 q1;
    private final ArrayDeque<Integer> freeSend = new ArrayDeque<>();
    private final ArrayDeque<Object[]> backlog = new ArrayDeque<>();
    private final AddressHandle[] slotAh = new AddressHandle[SEND_SLOTS];
    private final Map<AddressHandle, int[]> ahUse = new IdentityHashMap<>();
    private final LinkedHashMap<CmAv, AddressHandle> ahCache = new LinkedHashMap<>(64, 0.75f, true);
    private final List<AddressHandle> retired = new ArrayList<>();
    /** Guards QP1's CQ, its receive ring and {@link #taken} (taken after the CM lock, never before it). */
    private final ReentrantLock rxLock = new ReentrantLock();
    private final ArrayDeque<Taken> taken = new ArrayDeque<>();
    private final WorkCompletion[] wcs = new WorkCompletion[32];
    private final RecvWorkRequest rwr = new RecvWorkRequest();
    private final SendWorkRequest swr = new SendWorkRequest();
    private boolean closed;

    /** The port's GSI QP with its CQ, completion channel and DMA-mapped buffers. */
    private record Qp1(ProtectionDomain pd, CompletionChannel channel, CompletionQueue cq, QueuePair qp, Arena arena,
            Dma dma, int lkey, MemorySegment recvMem, MemorySegment sendMem, long[] recvDma, long sendDma) {
        /** @return the DMA address of receive buffer {@code slot} (the ring is mapped in chunks) */
        long recvAt(int slot) {
            return recvDma[slot / RECV_CHUNK] + (long) (slot % RECV_CHUNK) * RECV_SLOT_BYTES;
        }
    }

    /**
     * Opens the device (a context for its attributes and GIDs); QP1 comes with {@link #start()}, when an ID
     * first binds or resolves to the port, so a RoCE device another process serves is not taken by merely
     * starting the CM.
     */
    MadPort(UserCm cm, Device device, int portNum) {
        this.cm = cm;
        this.device = device;
        this.portNum = portNum;
        if (!(device instanceof GsiAccess g)) {
            throw new IllegalArgumentException(device.name() + " does not give its QP1 to a user-space MAD layer");
        }
        this.gsi = g;
        Context c = device.open();
        try {
            var attrs = c.queryDevice();
            this.caGuid = attrs.nodeGuid();
            this.ackDelay = attrs.localCaAckDelay();
            this.maxRdAtomic = attrs.maxQpRdAtom();
            this.maxInitRdAtomic = attrs.maxQpInitRdAtom();
        } catch (RuntimeException e) {
            c.close();
            throw e;
        }
        this.ctx = c;
    }

    /** @return whether QP1 is up */
    boolean started() {
        return q1 != null;
    }

    /**
     * Creates QP1 (CM lock held), as {@code ib_mad_port_open} does, and posts the receive ring. Idempotent.
     *
     * @throws VerbsException what creating QP1 throws (EADDRINUSE for a RoCE device another process serves),
     *                        ENOMEM when the buffers cannot be DMA-mapped
     */
    void start() {
        if (q1 != null) {
            return;
        }
        if (closed) {
            throw new VerbsException(Errno.ENODEV, "QP1 of " + this + ": the CM is closed");
        }
        ProtectionDomain p = null;
        CompletionChannel ch = null;
        CompletionQueue q = null;
        QueuePair qp1 = null;
        Arena a = Arena.ofShared();
        Dma d = ctx.dma();
        MemorySegment rm = a.allocate((long) RECV_SLOTS * RECV_SLOT_BYTES, 64);
        MemorySegment sm = a.allocate((long) SEND_SLOTS * Mad.SIZE, 64);
        long[] rd = new long[RECV_SLOTS / RECV_CHUNK];
        int rMapped = 0;
        long chunk = (long) RECV_CHUNK * RECV_SLOT_BYTES;
        try {
            p = ctx.allocPd();
            ch = ctx.createCompChannel();
            q = ctx.createCq(RECV_SLOTS + SEND_SLOTS + 16, ch, 0);
            qp1 = gsi.createSpecialQp(p, GsiAccess.SpecialQp.GSI, portNum, new QpInitAttributes().sendCq(q).recvCq(q)
                    .cap(new QpCapabilities(SEND_SLOTS, RECV_SLOTS, 1, 1, 0)));
            // ib_mad_port_start: INIT (qkey, pkey index), RTR, RTS with sq_psn IB_MAD_SEND_Q_PSN (0)
            qp1.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(portNum).qkey(GsiAccess.GSI_QKEY));
            qp1.modify(new QpAttributes().state(QpState.RTR));
            qp1.modify(new QpAttributes().state(QpState.RTS).sqPsn(0));
            for (; rMapped < rd.length; rMapped++) {
                rd[rMapped] = d.map(rm.asSlice(rMapped * chunk, chunk), DmaDirection.FROM_DEVICE);
                if (d.mappingError(rd[rMapped])) {
                    break;
                }
            }
            long sd = rMapped == rd.length ? d.map(sm, DmaDirection.TO_DEVICE) : 0;
            if (rMapped < rd.length || d.mappingError(sd)) {
                throw new VerbsException(Errno.ENOMEM, "QP1 of " + this + ": cannot DMA-map the "
                        + (rMapped == rd.length ? "send" : "receive") + " buffers of the MAD layer (a bounce device needs "
                        + (RECV_SLOTS * RECV_SLOT_BYTES + SEND_SLOTS * Mad.SIZE) + " bytes of its pool per port)");
            }
            q1 = new Qp1(p, ch, q, qp1, a, d, p.localDmaLkey(), rm, sm, rd, sd);
        } catch (RuntimeException e) {
            closeQuietly(qp1, q, ch);
            for (int i = 0; i < rMapped; i++) {
                d.unmap(rd[i], chunk, DmaDirection.FROM_DEVICE);
            }
            closeQuietly(p);
            a.close();
            throw e;
        }
        for (int i = 0; i < wcs.length; i++) {
            wcs[i] = new WorkCompletion();
        }
        for (int i = 0; i < SEND_SLOTS; i++) {
            freeSend.add(i);
        }
        for (int i = 0; i < RECV_SLOTS; i++) {
            postRecv(i);
        }
        q1.cq().reqNotify(false);
    }

    private static void closeQuietly(AutoCloseable... all) {
        for (AutoCloseable x : all) {
            if (x != null) {
                try {
                    x.close();
                } catch (Exception ignored) {
                    // unwinding a failed construction: the first error is the one reported
                }
            }
        }
    }

    @Override
    public String toString() {
        return device.name() + "/" + portNum;
    }

    // ------------------------------------------------------------------ GIDs and addresses

    Gid gid(int index) {
        return ctx.queryGid(portNum, index);
    }

    int gidCount() {
        return ctx.queryPort(portNum).gidTblLen();
    }

    /** {@return the index of {@code g} in the port's GID table, or -1} */
    int gidIndexOf(Gid g) {
        int n = gidCount();
        for (int i = 0; i < n; i++) {
            if (gid(i).equals(g)) {
                return i;
            }
        }
        return -1;
    }

    boolean active() {
        return ctx.queryPort(portNum).state() == PortState.ACTIVE;
    }

    Mtu activeMtu() {
        PortAttributes pa = ctx.queryPort(portNum);
        return pa.activeMtu();
    }

    /** The port's addresses as rdma_cm sees them: each non-zero GID as the IP address it stands for. */
    List<CmAddress> addresses() {
        List<CmAddress> out = new ArrayList<>();
        if (closed || !active()) {
            return out;
        }
        int n = gidCount();
        for (int i = 0; i < n; i++) {
            Gid g = gid(i);
            if (!g.equals(Gid.ZERO)) {
                out.add(new CmAddress(g.toInetAddress(), device, portNum, i));
            }
        }
        return out;
    }

    /** {@return whether this port owns the address} */
    boolean owns(InetAddress a) {
        return gidIndexOf(Gid.ofInetAddress(a)) >= 0;
    }

    // ------------------------------------------------------------------ receive

    /** Hands a receive buffer (back) to the device. */
    private void postRecv(int slot) {
        long at = q1.recvAt(slot);
        q1.dma().syncForDevice(at, GRH + Mad.SIZE, DmaDirection.FROM_DEVICE);
        rwr.wrId(slot).numSge(1).sge(0).dma(at, GRH + Mad.SIZE, q1.lkey(),
                q1.recvMem().asSlice((long) slot * RECV_SLOT_BYTES, GRH + Mad.SIZE));
        if (!q1.qp().postRecv(rwr)) {
            LOG.log(System.Logger.Level.WARNING, "QP1 of {0}: cannot post receive buffer {1}: {2}", this, slot,
                    rwr.postError());
        }
    }

    /**
     * Takes what completed on QP1 and processes it (CM lock held): {@link #take()} then {@link #process}.
     *
     * @return whether anything completed
     */
    boolean drain(MadLayer layer) {
        boolean any = take();
        return process(layer) || any;
    }

    /**
     * Takes what completed on QP1's CQ without the CM lock (the receive agent, while the CM is busy): each
     * received MAD is copied out and its buffer posted again at once, so the receive ring stays full while
     * application threads hold the CM lock (Linux's MAD layer reposts in its completion handler too, and
     * hands the MAD to the CM's work queue: {@code ib_mad_recv_done}, {@code cm_recv_handler}). At most
     * {@link #MAX_TAKEN} completions wait for {@link #process}; beyond that they stay in the CQ.
     *
     * @return whether anything was taken
     */
    boolean take() {
        rxLock.lock();
        try {
            if (closed || q1 == null) {
                return false;
            }
            boolean any = false;
            int n;
            while (taken.size() < MAX_TAKEN && (n = q1.cq().poll(wcs, Math.min(wcs.length, MAX_TAKEN - taken.size()))) > 0) {
                any = true;
                for (int i = 0; i < n; i++) {
                    WorkCompletion wc = wcs[i];
                    if ((wc.wrId() & SEND_TAG) != 0) {
                        taken.add(new Taken((int) (wc.wrId() & 0xFFFF), wc.status(), null, null));
                    } else {
                        taken.add(received((int) wc.wrId(), wc));
                    }
                }
            }
            return any;
        } finally {
            rxLock.unlock();
        }
    }

    /** @return whether taken completions wait for {@link #process} */
    boolean hasTaken() {
        rxLock.lock();
        try {
            return !taken.isEmpty();
        } finally {
            rxLock.unlock();
        }
    }

    /**
     * Processes the completions {@link #take()} took (CM lock held): received MADs go to {@code layer},
     * finished sends free their buffers.
     *
     * @return whether there were any
     */
    boolean process(MadLayer layer) {
        List<Taken> batch;
        rxLock.lock();
        try {
            if (taken.isEmpty()) {
                return false;
            }
            batch = new ArrayList<>(taken);
            taken.clear();
        } finally {
            rxLock.unlock();
        }
        for (Taken t : batch) {
            if (t.recv == null && t.drop == null) {
                sendDone(t.slot, t.status);
            } else {
                cm.count(CmCounter.MADS_RECEIVED);
                if (t.drop != null) {
                    cm.count(t.drop);
                } else {
                    layer.receive(t.recv);
                }
            }
        }
        return true;
    }

    /** A completion taken from QP1's CQ: a send's (slot, status), or a received MAD or the reason it is dropped. */
    private record Taken(int slot, WcStatus status, MadRecv recv, CmCounter drop) {
    }

    /** A receive completion (receive lock held): the MAD copied out, its buffer posted again. */
    private Taken received(int slot, WorkCompletion wc) {
        if (wc.status() != WcStatus.SUCCESS || wc.opcode() != WcOpcode.RECV) {
            if (!closed && wc.status() != WcStatus.WR_FLUSH_ERR) {
                postRecv(slot);
            }
            return new Taken(slot, wc.status(), null, CmCounter.DROP_RECV_ERROR);
        }
        q1.dma().syncForCpu(q1.recvAt(slot), GRH + Mad.SIZE, DmaDirection.FROM_DEVICE);
        MemorySegment seg = q1.recvMem().asSlice((long) slot * RECV_SLOT_BYTES, RECV_SLOT_BYTES);
        MadRecv r = null;
        CmCounter drop = null;
        if (wc.byteLen() < GRH + Mad.SIZE) {
            drop = CmCounter.DROP_TRUNCATED;
        } else {
            r = parse(seg, wc);
            if (r == null) {
                drop = CmCounter.DROP_BAD_GRH;
            }
        }
        postRecv(slot);
        return new Taken(slot, wc.status(), r, drop);
    }

    /** The GRH area (rxe's layout): an IPv6 header, or 20 zero bytes and an IPv4 header. */
    private MadRecv parse(MemorySegment seg, WorkCompletion wc) {
        byte[] g = seg.asSlice(0, GRH).toArray(ValueLayout.JAVA_BYTE);
        byte[] mad = seg.asSlice(GRH, Mad.SIZE).toArray(ValueLayout.JAVA_BYTE);
        Gid sgid;
        Gid dgid;
        int hop;
        int tc;
        int flow = 0;
        if ((g[0] & 0xF0) == 0x60) {
            int vtf = Mad.get32(g, 0);
            tc = (vtf >>> 20) & 0xFF;
            flow = vtf & 0xF_FFFF;
            hop = g[7] & 0xFF;
            sgid = Mad.getGid(g, 8);
            dgid = Mad.getGid(g, 24);
        } else if ((g[20] & 0xFF) == 0x45) {
            tc = g[21] & 0xFF;
            hop = g[28] & 0xFF;
            sgid = new Gid(0, 0x0000_FFFF_0000_0000L | (Mad.get32(g, 32) & 0xFFFF_FFFFL));
            dgid = new Gid(0, 0x0000_FFFF_0000_0000L | (Mad.get32(g, 36) & 0xFFFF_FFFFL));
        } else {
            return null;
        }
        return new MadRecv(mad, this, sgid, dgid, hop, tc, flow, wc.srcQp(), wc.pkeyIndex());
    }

    // ------------------------------------------------------------------ send

    /**
     * Sends one MAD to the peer's QP1 (CM lock held). The bytes are copied: the caller may keep the
     * array for an identical retransmission.
     *
     * @param mad 256 bytes
     * @param av  where to
     */
    void send(byte[] mad, CmAv av) {
        cm.tap.send(this, mad, av, m -> sendNow(m, av));
    }

    /** Sends without the tap (CM lock held). */
    void sendNow(byte[] mad, CmAv av) {
        if (closed) {
            cm.count(CmCounter.MAD_SEND_ERRORS);
            return;
        }
        if (q1 == null) {
            try {
                cm.start(this);
            } catch (VerbsException e) {
                LOG.log(System.Logger.Level.WARNING, "QP1 of {0} cannot start: {1}", this, e.getMessage());
                cm.count(CmCounter.MAD_SEND_ERRORS);
                return;
            }
        }
        Integer slot = freeSend.pollFirst();
        if (slot == null) {
            if (backlog.size() >= MAX_BACKLOG) {
                cm.count(CmCounter.MAD_SEND_ERRORS);
                return;
            }
            backlog.addLast(new Object[] {mad.clone(), av});
            return;
        }
        post(slot, mad, av);
    }

    private void post(int slot, byte[] mad, CmAv av) {
        AddressHandle ah;
        try {
            ah = ah(av);
        } catch (VerbsException e) {
            LOG.log(System.Logger.Level.WARNING, "QP1 of {0}: no address handle to {1}: {2}", this, av.dgid(),
                    e.getMessage());
            cm.count(CmCounter.MAD_SEND_ERRORS);
            freeSend.addFirst(slot);
            return;
        }
        long off = (long) slot * Mad.SIZE;
        MemorySegment.copy(mad, 0, q1.sendMem(), ValueLayout.JAVA_BYTE, off, Mad.SIZE);
        q1.dma().syncForDevice(q1.sendDma() + off, Mad.SIZE, DmaDirection.TO_DEVICE);
        swr.clear();
        swr.wrId(SEND_TAG | slot).opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED).numSge(1)
                .ah(ah).remoteQpn(1).remoteQkey(GsiAccess.GSI_QKEY);
        swr.sge(0).dma(q1.sendDma() + off, Mad.SIZE, q1.lkey(), q1.sendMem().asSlice(off, Mad.SIZE));
        if (!q1.qp().postSend(swr)) {
            LOG.log(System.Logger.Level.WARNING, "QP1 of {0}: send refused: {1}", this, swr.postError());
            cm.count(CmCounter.MAD_SEND_ERRORS);
            freeSend.addFirst(slot);
            return;
        }
        slotAh[slot] = ah;
        ahUse.computeIfAbsent(ah, k -> new int[1])[0]++;
        cm.count(CmCounter.MADS_SENT);
    }

    private void sendDone(int slot, WcStatus status) {
        if (status != WcStatus.SUCCESS && status != WcStatus.WR_FLUSH_ERR) {
            cm.count(CmCounter.MAD_SEND_ERRORS);
        }
        AddressHandle ah = slotAh[slot];
        slotAh[slot] = null;
        if (ah != null) {
            int[] u = ahUse.get(ah);
            if (u != null && --u[0] == 0) {
                ahUse.remove(ah);
                if (retired.remove(ah)) {
                    ah.close();
                }
            }
        }
        if (closed) {
            return;
        }
        Object[] next = backlog.pollFirst();
        if (next != null) {
            post(slot, (byte[]) next[0], (CmAv) next[1]);
        } else {
            freeSend.addLast(slot);
        }
    }

    private AddressHandle ah(CmAv av) {
        AddressHandle ah = ahCache.get(av);
        if (ah != null) {
            return ah;
        }
        ah = q1.pd().createAh(av.ahAttributes());
        ahCache.put(av, ah);
        if (ahCache.size() > AH_CACHE) {
            var it = ahCache.entrySet().iterator();
            AddressHandle old = it.next().getValue();
            it.remove();
            if (ahUse.containsKey(old)) {
                retired.add(old); // closed when its last send completes
            } else {
                old.close();
            }
        }
        return ah;
    }

    /** Waits (without the CM lock) for QP1 completions: for the receive agent. */
    boolean awaitCompletion(Duration timeout) {
        CompletionQueue c = q1.channel().getCqEvent(timeout);
        if (c != null) {
            c.ackEvents(1);
            return true;
        }
        return false;
    }

    /** Re-arms the CQ after draining it (CM lock not needed). */
    void rearm() {
        if (!closed && q1 != null) {
            q1.cq().reqNotify(false);
        }
    }

    /** Destroys QP1 (if started) and the port's context (CM lock held); PDs of applications on {@link #ctx} must be gone. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        rxLock.lock();
        try {
            closed = true;
            taken.clear();
        } finally {
            rxLock.unlock();
        }
        if (q1 != null) {
            q1.qp().close();
            for (AddressHandle ah : ahCache.values()) {
                ah.close();
            }
            for (AddressHandle ah : retired) {
                ah.close();
            }
            ahCache.clear();
            retired.clear();
            for (long at : q1.recvDma()) {
                q1.dma().unmap(at, (long) RECV_CHUNK * RECV_SLOT_BYTES, DmaDirection.FROM_DEVICE);
            }
            q1.dma().unmap(q1.sendDma(), q1.sendMem().byteSize(), DmaDirection.TO_DEVICE);
            q1.cq().close();
            q1.channel().close();
            q1.pd().close();
            q1.arena().close();
        }
        ctx.close();
    }
}
