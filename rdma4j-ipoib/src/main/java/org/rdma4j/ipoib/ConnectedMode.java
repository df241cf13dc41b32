// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.DmaDirection;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.SharedReceiveQueue;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * Connected mode (RFC 4755), as Linux's {@code ipoib_cm.c}: an RC connection per neighbour and direction,
 * {@link TxConn}s we open ({@code ipoib_cm_tx}) and {@link RxConn}s neighbours open to us ({@code ipoib_cm_rx}),
 * one SRQ shared by every receiving QP, and a pool of big send buffers.
 * <ul>
 *   <li><b>Resources</b> ({@code ipoib_cm_dev_init}): one SRQ of 256 buffers of header + MTU (64 KiB), mapped
 *   FROM_DEVICE once and synced around each use; its completions land on the UD receive CQ, so one receive thread
 *   serves both. A send CQ for the RC QPs. 128 big send buffers, each mapped TO_DEVICE for exactly the packet's
 *   length when posted as one signalled RC SEND, unmapped and freed at its completion.</li>
 *   <li><b>Connection messages</b> (a documented deviation, {@link CmMessage}): REQ, REP, RTU and REJ travel as
 *   datagrams between the interfaces' UD QPs on the control ring instead of as IB CM MADs on QP1. A REQ is retried
 *   every second; after three without an answer (or on a REJ) the neighbour gets datagrams for 60 s. An interface
 *   in datagram mode answers a REQ with a REJ.</li>
 *   <li><b>Errors</b> ({@code ipoib_cm_handle_tx_wc}): a send completing in error tears the connection down and
 *   the next packet after a second reconnects.</li>
 * </ul>
 *
 * <p>Threads: the transmit thread (connections, sends, reaping) and the receive thread (messages, SRQ
 * completions, retries), with the interface lock except where a method says otherwise. In datagram mode only the
 * REJ answer to a REQ is used.
 */
final class ConnectedMode {
    /** SRQ buffers, on the UD receive CQ too. */
    static final int RX_RING = 256;
    private static final int TX_SLOTS = 128;
    private static final int MAX_CONNS = 64;
    private static final int MAX_REQS = 3;
    private static final int POLL_BATCH = 32;
    private static final long REQ_TIMEOUT_NS = 1_000_000_000L;
    private static final long RETRY_NS = 60_000_000_000L;
    private static final long ERROR_RETRY_NS = 1_000_000_000L;
    /** Work request IDs of SRQ buffers, on the receive CQ shared with the UD ring. */
    private static final long RX_BIT = 1L << 61;
    private static final int SLOT_BITS = 20;

    private final IpoibResources res;
    private final UdSender ud;
    private final Random ids = new Random();
    private final CmMessage rxCm = new CmMessage();
    /** Connections we opened, one per neighbour (lock). */
    private final List<TxConn> txConns = new ArrayList<>();
    /** Connections neighbours opened to us (lock). */
    private final List<RxConn> rxConns = new ArrayList<>();
    private int connSerial;

    // resources, connected mode only (else null)
    private final CompletionQueue sendCq;
    private final SharedReceiveQueue srq;
    private final Mtu pathMtu;
    private final int slotBytes;
    private final MemorySegment rxRing;
    private final MemorySegment[] rxSlots;
    private final long[] rxDma;
    private int rxMapped;
    private final RecvWorkRequest[] rxWrs;
    private final MemorySegment[] rxPayload;
    /** SRQ buffers to repost after a receive batch (receive thread only). */
    private final RecvWorkRequest[] refill = new RecvWorkRequest[POLL_BATCH];
    private int refillCount;
    private final MemorySegment txRing;
    private final MemorySegment[] txSlots;
    private final MemorySegment[] txPayload;
    /** The DMA mapping of each big send buffer while a send from it is outstanding: segment, address, owner. */
    private final MemorySegment[] txMapped;
    private final long[] txDma;
    private final TxConn[] txOwner;
    private final int[] txFree;
    private int txFreeCount;
    private final WorkCompletion[] wcs = IpoibResources.newWcs(POLL_BATCH);
    private final SendWorkRequest swr = new SendWorkRequest(1);

    /**
     * In connected mode, makes the SRQ, the RC send CQ and the buffers ({@link #postReceives()} maps and posts the
     * SRQ's); in datagram mode nothing.
     */
    ConnectedMode(IpoibResources res, UdSender ud) {
        this.res = res;
        this.ud = ud;
        if (!res.connected) {
            sendCq = null;
            srq = null;
            pathMtu = null;
            slotBytes = 0;
            rxRing = txRing = null;
            rxSlots = rxPayload = txSlots = txPayload = txMapped = null;
            rxDma = txDma = null;
            rxWrs = null;
            txOwner = null;
            txFree = null;
            return;
        }
        pathMtu = res.ctx.queryPort(1).activeMtu();
        sendCq = res.own(res.ctx.createCq(TX_SLOTS + MAX_CONNS, null, 0));
        srq = res.own(res.pd.createSrq(RX_RING, 1));
        int size = Ipoib.HEADER_BYTES + res.mtu;
        slotBytes = IpoibResources.align(size, 4096);
        rxRing = res.arena.allocate((long) slotBytes * RX_RING, 4096);
        rxSlots = IpoibResources.slots(rxRing, RX_RING, slotBytes, size);
        rxDma = new long[RX_RING];
        rxPayload = new MemorySegment[RX_RING];
        rxWrs = new RecvWorkRequest[RX_RING];
        for (int k = 0; k < RX_RING; k++) {
            rxPayload[k] = rxRing.asSlice((long) k * slotBytes + Ipoib.HEADER_BYTES, res.mtu);
        }
        txRing = res.arena.allocate((long) slotBytes * TX_SLOTS, 4096);
        txSlots = IpoibResources.slots(txRing, TX_SLOTS, slotBytes, size);
        txPayload = new MemorySegment[TX_SLOTS];
        for (int k = 0; k < TX_SLOTS; k++) {
            txPayload[k] = txRing.asSlice((long) k * slotBytes + Ipoib.HEADER_BYTES, res.mtu);
        }
        txMapped = new MemorySegment[TX_SLOTS];
        txDma = new long[TX_SLOTS];
        txOwner = new TxConn[TX_SLOTS];
        txFree = new int[TX_SLOTS];
        for (int k = 0; k < TX_SLOTS; k++) {
            txFree[k] = TX_SLOTS - 1 - k;
        }
        txFreeCount = TX_SLOTS;
    }

    /**
     * Maps every SRQ buffer FROM_DEVICE (for the ring's life, as Linux keeps its rx ring mapped) and posts them (no
     * thread runs yet); on failure {@link #unmapAll()} undoes what was mapped.
     */
    void postReceives() {
        if (srq == null) {
            return;
        }
        int size = Ipoib.HEADER_BYTES + res.mtu;
        for (int k = 0; k < RX_RING; k++) {
            long a = res.dma.map(rxSlots[k], DmaDirection.FROM_DEVICE);
            if (res.dma.mappingError(a)) {
                throw new VerbsException(Errno.ENOMEM, "cannot DMA-map connected-mode receive buffer " + k + " of "
                        + RX_RING + " (IOMMU window or bounce pool too small for " + (RX_RING * (long) slotBytes >> 20)
                        + " MiB)");
            }
            rxDma[k] = a;
            rxMapped = k + 1;
            rxWrs[k] = new RecvWorkRequest(1).wrId(RX_BIT | k).numSge(1);
            rxWrs[k].sge(0).dma(a, size, res.dmaLkey, rxSlots[k]);
        }
        int posted = srq.postRecv(rxWrs, RX_RING);
        if (posted != RX_RING) {
            throw new VerbsException(Errno.ENOMEM, "could post only " + posted + " of " + RX_RING + " SRQ buffers");
        }
    }

    // ------------------------------------------------------------------ big send buffers (transmit thread)

    /** {@return a free big send buffer, or -1 when every one waits for its completion (lock held)} */
    int takeTxBuffer() {
        assert res.lock.isHeldByCurrentThread();
        return txFreeCount > 0 ? txFree[--txFreeCount] : -1;
    }

    /** Gives back a buffer taken with {@link #takeTxBuffer()} and not posted (lock held). */
    void returnTxBuffer(int slot) {
        assert res.lock.isHeldByCurrentThread();
        txFree[txFreeCount++] = slot;
    }

    /** {@return whether a big send buffer is free (lock held)} */
    boolean txBufferFree() {
        return txFreeCount > 0;
    }

    /** {@return the memory of the big send buffers, which {@link #txOffset} indexes} */
    MemorySegment txMemory() {
        return txRing;
    }

    /** {@return the offset of a big buffer's header in {@link #txMemory()}} */
    long txOffset(int slot) {
        return (long) slot * slotBytes;
    }

    /** {@return where the TUN read puts the packet of a big buffer: MTU bytes after its header} */
    MemorySegment txPayload(int slot) {
        return txPayload[slot];
    }

    // ------------------------------------------------------------------ connections we open (≈ ipoib_cm_tx)

    private TxConn findTx(int ip) {
        for (int k = 0; k < txConns.size(); k++) {
            TxConn c = txConns.get(k);
            if (c.ip == ip) {
                return c;
            }
        }
        return null;
    }

    /** {@return whether we hold a connection entry (in any state) for a neighbour (lock held)} */
    boolean hasTx(int ip) {
        return findTx(ip) != null;
    }

    /**
     * The connection for a resolved neighbour (lock held, connected mode), started now when it offers connected
     * mode and has none, or restarted when its retry time has come; null when it gets datagrams only.
     */
    TxConn connFor(NeighbourCache.Entry<AddressHandle> e) {
        assert res.lock.isHeldByCurrentThread() && res.connected;
        HardwareAddress hw = e.hardware();
        TxConn c = findTx(e.ip());
        if (c != null && c.peer != hw && !c.peer.equals(hw)) {
            dropTx(c);
            c = null;
        }
        if (c == null) {
            if ((hw.flags() & HardwareAddress.FLAG_RC) == 0 || txConns.size() >= MAX_CONNS) {
                return null;
            }
            c = new TxConn(e.ip(), hw);
            txConns.add(c);
            connect(c, e.ah());
        } else if (c.state == TxConn.State.FAILED && res.clock().nanoTime() - c.deadlineNs >= 0) {
            connect(c, e.ah());
        }
        return c;
    }

    /** Creates the RC QP (INIT, receiving from the SRQ as Linux's tx QPs do) and sends the REQ (lock held). */
    private void connect(TxConn c, AddressHandle ah) {
        QueuePair q;
        try {
            q = res.pd.createQp(new QpInitAttributes().type(QpType.RC).sendCq(sendCq).recvCq(res.recvCq).srq(srq)
                    .cap(new QpCapabilities(TX_SLOTS, 0, 1, 1, 0)));
            try {
                q.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1)
                        .accessFlags(AccessFlag.of(AccessFlag.LOCAL_WRITE)));
            } catch (VerbsException ex) {
                q.close();
                throw ex;
            }
        } catch (VerbsException ex) {
            res.log.accept("ipoib: cannot open a connection to " + IpoibResources.ipString(c.ip) + ": "
                    + ex.getMessage());
            c.state = TxConn.State.FAILED;
            c.fallback = true;
            c.deadlineNs = res.clock().nanoTime() + RETRY_NS;
            return;
        }
        res.own(q);
        c.qp = q;
        c.ah = ah;
        c.serial = ++connSerial & 0x3FF_FFFF;
        c.localId = newId();
        c.psn = ids.nextInt() & 0xFF_FFFF;
        c.state = TxConn.State.CONNECTING;
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
        c.deadlineNs = res.clock().nanoTime() + REQ_TIMEOUT_NS;
        if (sendCm(CmMessage.OP_REQ, c.localId, 0, CmMessage.serviceId(c.peer.qpn()), c.qp.qpNum(), c.psn, c.ah,
                c.peer.qpn())) {
            res.count(IpoibCounter.CM_REQ_SENT);
        }
    }

    /** Sends a connection message to a neighbour's UD QP through the control ring (lock held). */
    private boolean sendCm(int op, int localId, int remoteId, long serviceId, int rcQpn, int psn, AddressHandle ah,
                           int udQpn) {
        long base = ud.controlSlot();
        if (base < 0) {
            return false;
        }
        // the receive MTU we offer is what one SRQ buffer holds: header + interface MTU (Linux IPOIB_CM_BUF_SIZE)
        CmMessage.write(ud.controlMemory(), base + Ipoib.HEADER_BYTES, op, localId, remoteId, serviceId, rcQpn, psn,
                res.self.qpn(), Ipoib.HEADER_BYTES + res.mtu);
        return ud.sendControl(CmMessage.TYPE, CmMessage.BYTES, ah, udQpn);
    }

    /** Closes a connection's QP and takes back its send buffers (lock held); the entry stays, FAILED. */
    private void teardown(TxConn c) {
        QueuePair q = c.qp;
        if (q != null) {
            c.qp = null;
            try {
                q.close(); // under the device's engine lock: nothing of the QP touches memory afterwards
            } catch (VerbsException ex) {
                res.log.accept("ipoib: close: " + ex.getMessage());
            }
            res.disown(q);
            for (int k = 0; k < TX_SLOTS; k++) {
                if (txOwner[k] == c) {
                    releaseTx(k);
                }
            }
        }
        c.state = TxConn.State.FAILED;
    }

    private void dropTx(TxConn c) {
        teardown(c);
        txConns.remove(c);
    }

    /** Forgets our connection to a neighbour, if we have one (lock held; nothing in datagram mode). */
    void dropTx(int ip) {
        if (res.connected) {
            TxConn c = findTx(ip);
            if (c != null) {
                dropTx(c);
            }
        }
    }

    private void releaseTx(int slot) {
        res.dma.unmap(txDma[slot], txMapped[slot].byteSize(), DmaDirection.TO_DEVICE);
        txOwner[slot] = null;
        txFree[txFreeCount++] = slot;
    }

    private QpAttributes rtr(Gid dgid, int destQpn, int rqPsn) {
        return new QpAttributes().state(QpState.RTR).pathMtu(pathMtu).destQpNum(destQpn).rqPsn(rqPsn)
                .av(res.av(dgid)).maxDestRdAtomic(0).minRnrTimer(12);
    }

    private static QpAttributes rts(int sqPsn) {
        // timeout 14 (about 67 ms) x 7 retries: a vanished peer shows as an error completion in about half a
        // second; RNR retry 7 (infinite): an empty SRQ makes the sender wait, never drop
        return new QpAttributes().state(QpState.RTS).sqPsn(sqPsn).timeout(14).retryCnt(7).rnrRetry(7).maxRdAtomic(0);
    }

    /**
     * Posts a big send buffer holding an IPv4 packet as one RC SEND on a connection (lock held).
     *
     * @param c    a CONNECTED connection
     * @param slot the buffer
     * @param n    the packet's length
     * @return whether the send was posted (it owns the buffer now); false leaves the buffer with the caller
     */
    boolean send(TxConn c, int slot, int n) {
        assert res.lock.isHeldByCurrentThread();
        Ipoib.writeHeader(txSlots[slot], 0, Ipoib.TYPE_IPV4);
        int len = Ipoib.HEADER_BYTES + n;
        MemorySegment seg = txMapped[slot];
        if (seg == null || seg.byteSize() != len) {
            seg = txSlots[slot].asSlice(0, len); // kept: bulk traffic repeats the same lengths, so this is rare
            txMapped[slot] = seg;
        }
        long a = res.dma.map(seg, DmaDirection.TO_DEVICE);
        if (res.dma.mappingError(a)) {
            res.count(IpoibCounter.TX_DROP_DMA);
            return false;
        }
        // every RC send is signalled: one completion per 64 KiB is cheap, and each frees exactly its buffer (RC
        // completions of different QPs do not come in one order)
        swr.clear().wrId(((long) c.serial << SLOT_BITS) | slot).opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                .numSge(1);
        swr.sge(0).dma(a, len, res.dmaLkey, seg);
        if (!c.qp.postSend(swr)) {
            res.dma.unmap(a, len, DmaDirection.TO_DEVICE);
            res.count(IpoibCounter.TX_ERRORS);
            return false;
        }
        txDma[slot] = a;
        txOwner[slot] = c;
        res.count(IpoibCounter.TX_PACKETS);
        res.count(IpoibCounter.TX_CM_PACKETS);
        res.add(IpoibCounter.TX_BYTES, n);
        return true;
    }

    /** Reaps RC send completions (lock held): each frees its buffer; an error tears the connection down. */
    void reapSends() {
        if (sendCq == null) {
            return;
        }
        int n = sendCq.poll(wcs, POLL_BATCH);
        for (int k = 0; k < n; k++) {
            WorkCompletion wc = wcs[k];
            long id = wc.wrId();
            int slot = (int) (id & ((1 << SLOT_BITS) - 1));
            int serial = (int) (id >>> SLOT_BITS);
            TxConn c = txOwner[slot];
            if (c == null || c.serial != serial) {
                continue; // a send of a connection already torn down: its buffer was taken back then
            }
            releaseTx(slot);
            if (wc.status() != WcStatus.SUCCESS && c.qp != null) {
                // Linux ipoib_cm_handle_tx_wc: the connection is destroyed and made again on the next packet
                res.count(IpoibCounter.CM_TX_ERRORS);
                res.log.accept("neighbour " + IpoibResources.ipString(c.ip) + " connection failed (" + wc.status()
                        + "), reconnecting");
                teardown(c);
                c.deadlineNs = res.clock().nanoTime() + ERROR_RETRY_NS;
            }
        }
    }

    /** Retries unanswered requests, once a second, and falls back to datagrams after three (lock held). */
    void tick() {
        if (!res.connected) {
            return;
        }
        long now = res.clock().nanoTime();
        for (int k = 0; k < txConns.size(); k++) {
            TxConn c = txConns.get(k);
            if (c.state != TxConn.State.CONNECTING || now - c.deadlineNs < 0) {
                continue;
            }
            if (c.tries < MAX_REQS) {
                sendReq(c);
            } else {
                teardown(c);
                c.fallback = true;
                c.deadlineNs = now + RETRY_NS;
                res.count(IpoibCounter.CM_FALLBACK);
                res.log.accept("neighbour " + IpoibResources.ipString(c.ip)
                        + " did not answer connected-mode requests: datagram mode");
            }
        }
    }

    /** {@return how a neighbour's packets travel, for the neighbour table's lines (lock held)} */
    String describe(int ip) {
        TxConn c = findTx(ip);
        return c == null ? " datagram" : switch (c.state) {
            case CONNECTING -> " connecting";
            case CONNECTED -> " connected";
            case FAILED -> c.fallback ? " datagram" : " reconnecting";
        };
    }

    // ------------------------------------------------------------------ connection messages

    /**
     * A connection message from a neighbour's UD QP (receive thread; takes the lock).
     *
     * @param ring    the receive buffer
     * @param p       where the message starts (after the IPoIB header)
     * @param payload bytes that came for it
     * @param srcQp   the sender's UD QPN (the DETH's)
     * @param sgidHi  the sender's GID (the GRH's), high half
     * @param sgidLo  low half
     */
    void receiveCm(MemorySegment ring, long p, int payload, int srcQp, long sgidHi, long sgidLo) {
        CmMessage m = rxCm;
        // the private data's UD QPN must be the QP the datagram came from (the fabric's DETH says who sent it)
        if (m.read(ring, p, payload) != CmMessage.Verdict.OK || m.udQpn != srcQp
                || m.mtu < Ipoib.HEADER_BYTES + 576) {
            res.count(IpoibCounter.RX_DROP_BAD_CM);
            return;
        }
        res.lock.lock();
        try {
            switch (m.op) {
                case CmMessage.OP_REQ -> onReq(m, new Gid(sgidHi, sgidLo));
                case CmMessage.OP_REP -> onRep(m, sgidHi, sgidLo);
                case CmMessage.OP_RTU -> onRtu(m, sgidHi, sgidLo);
                default -> onRej(m, sgidHi, sgidLo);
            }
        } finally {
            res.lock.unlock();
        }
    }

    private void onReq(CmMessage m, Gid g) {
        if (m.serviceId != CmMessage.serviceId(res.self.qpn())) {
            res.count(IpoibCounter.RX_DROP_BAD_CM); // not our service: a REQ for another interface's UD QPN
            return;
        }
        for (int k = 0; k < rxConns.size(); k++) {
            RxConn r = rxConns.get(k);
            if (r.peerUdQpn() == m.udQpn && r.remoteId() == m.localId && r.peerGid().equals(g)) {
                sendRep(r); // a retransmitted REQ: our REP was lost
                return;
            }
        }
        if (!res.connected) {
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
        if (rxConns.size() >= MAX_CONNS) {
            reject(m, g);
            return;
        }
        AddressHandle ah = null;
        QueuePair q = null;
        try {
            ah = res.pd.createAh(res.av(g));
            q = res.pd.createQp(new QpInitAttributes().type(QpType.RC).sendCq(sendCq).recvCq(res.recvCq).srq(srq)
                    .cap(new QpCapabilities(1, 0, 1, 1, 0)));
            int psn = ids.nextInt() & 0xFF_FFFF;
            q.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1)
                    .accessFlags(AccessFlag.of(AccessFlag.LOCAL_WRITE)));
            q.modify(rtr(g, m.rcQpn, m.psn));
            q.modify(rts(psn));
            RxConn r = new RxConn(g, m.udQpn, m.localId, newId(), psn, m.rcQpn, res.own(q), res.own(ah));
            rxConns.add(r);
            sendRep(r);
            res.count(IpoibCounter.CM_ACCEPTED);
            res.log.accept("connection from " + g + " qpn 0x" + Integer.toHexString(m.udQpn) + " accepted (RC QPN 0x"
                    + Integer.toHexString(q.qpNum()) + ")");
        } catch (VerbsException ex) {
            res.log.accept("ipoib: cannot accept a connection from " + g + ": " + ex.getMessage());
            if (q != null) {
                res.disown(q);
                q.close();
            }
            if (ah != null) {
                res.disown(ah);
                ah.close();
            }
            reject(m, g);
        }
    }

    private void sendRep(RxConn r) {
        sendCm(CmMessage.OP_REP, r.localId(), r.remoteId(), CmMessage.serviceId(res.self.qpn()), r.qp().qpNum(),
                r.psn(), r.ah(), r.peerUdQpn());
    }

    private void reject(CmMessage m, Gid g) {
        AddressHandle ah;
        try {
            ah = res.own(res.pd.createAh(res.av(g)));
        } catch (VerbsException ex) {
            return;
        }
        if (sendCm(CmMessage.OP_REJ, newId(), m.localId, m.serviceId, 0, 0, ah, m.udQpn)) {
            res.count(IpoibCounter.CM_REJ_SENT);
        }
        ud.retire(ah); // closed once the REJ has left
    }

    private void closeRx(RxConn r) {
        try {
            r.qp().close();
        } catch (VerbsException ex) {
            res.log.accept("ipoib: close: " + ex.getMessage());
        }
        res.disown(r.qp());
        ud.retire(r.ah());
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
            res.count(IpoibCounter.RX_DROP_BAD_CM);
            return;
        }
        if (c.state == TxConn.State.CONNECTED) {
            if (m.rcQpn == c.remoteQpn && m.localId == c.remoteId) {
                sendCm(CmMessage.OP_RTU, c.localId, c.remoteId, m.serviceId, c.qp.qpNum(), c.psn, c.ah, c.peer.qpn());
            } else {
                res.count(IpoibCounter.RX_DROP_BAD_CM);
            }
            return;
        }
        try {
            c.qp.modify(rtr(c.peer.gid(), m.rcQpn, m.psn));
            c.qp.modify(rts(c.psn));
        } catch (VerbsException ex) {
            res.log.accept("ipoib: connection to " + IpoibResources.ipString(c.ip) + " failed: " + ex.getMessage());
            teardown(c);
            c.fallback = true;
            c.deadlineNs = res.clock().nanoTime() + RETRY_NS;
            return;
        }
        c.remoteQpn = m.rcQpn;
        c.remoteId = m.localId;
        c.remoteMtu = Math.min(m.mtu, Ipoib.HEADER_BYTES + res.mtu);
        c.state = TxConn.State.CONNECTED;
        res.count(IpoibCounter.CM_CONNECTED);
        res.log.accept("neighbour " + IpoibResources.ipString(c.ip) + " connected (RC QPN 0x"
                + Integer.toHexString(c.qp.qpNum()) + " to 0x" + Integer.toHexString(m.rcQpn) + ", mtu "
                + (c.remoteMtu - Ipoib.HEADER_BYTES) + ")");
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
        res.count(IpoibCounter.RX_DROP_BAD_CM);
    }

    private void onRej(CmMessage m, long sgidHi, long sgidLo) {
        TxConn c = txById(m.remoteId, sgidHi, sgidLo, m.udQpn);
        if (c == null || c.state != TxConn.State.CONNECTING) {
            res.count(IpoibCounter.RX_DROP_BAD_CM);
            return;
        }
        teardown(c);
        c.fallback = true;
        c.deadlineNs = res.clock().nanoTime() + RETRY_NS;
        res.count(IpoibCounter.CM_REJ_RECEIVED);
        res.log.accept("neighbour " + IpoibResources.ipString(c.ip) + " refused connected mode: datagram mode");
    }

    // ------------------------------------------------------------------ SRQ receives (receive thread, no lock)

    /** {@return whether a receive completion is one of the SRQ's buffers (a message on an RC connection)} */
    static boolean ownsRecv(long wrId) {
        return (wrId & RX_BIT) != 0;
    }

    /**
     * An SRQ completion (receive thread): the buffer is synced for the CPU, its packet handed to the stack, and the
     * buffer queued for {@link #refill()}.
     */
    void received(WorkCompletion wc, IpoibReceiver rx) throws java.io.IOException {
        int slot = (int) (wc.wrId() & 0xFFFF);
        long size = rxSlots[slot].byteSize();
        if (wc.status() == WcStatus.SUCCESS) {
            res.dma.syncForCpu(rxDma[slot], size, DmaDirection.FROM_DEVICE);
            int len = wc.byteLen();
            long h = (long) slot * slotBytes;
            if (len < Ipoib.HEADER_BYTES || len > Ipoib.HEADER_BYTES + res.mtu) {
                res.count(IpoibCounter.RX_DROP_MALFORMED);
            } else if (Ipoib.readType(rxRing, h) != Ipoib.TYPE_IPV4) {
                res.count(IpoibCounter.RX_DROP_UNKNOWN_TYPE); // RFC 4755 section 3: ARP and multicast stay on UD
            } else {
                rx.deliver(rxRing, h + Ipoib.HEADER_BYTES, len - Ipoib.HEADER_BYTES, rxPayload[slot], true);
            }
        } else if (wc.status() != WcStatus.WR_FLUSH_ERR) {
            res.count(IpoibCounter.RX_ERRORS);
        }
        res.dma.syncForDevice(rxDma[slot], size, DmaDirection.FROM_DEVICE);
        refill[refillCount++] = rxWrs[slot];
    }

    /**
     * Reposts the SRQ buffers of the last receive batch as one chain (receive thread).
     *
     * @param post false at close: the buffers are forgotten instead
     */
    void refill(boolean post) {
        int c = refillCount;
        refillCount = 0;
        if (c > 0 && post && srq.postRecv(refill, c) != c) {
            res.count(IpoibCounter.RX_ERRORS);
        }
    }

    /** At close, once the QPs and the SRQ are gone: unmaps the sends in flight and the SRQ ring. */
    void unmapAll() {
        if (txOwner != null) {
            for (int k = 0; k < TX_SLOTS; k++) {
                if (txOwner[k] != null) {
                    releaseTx(k);
                }
            }
        }
        for (int k = 0; k < rxMapped; k++) {
            res.dma.unmap(rxDma[k], rxSlots[k].byteSize(), DmaDirection.FROM_DEVICE);
        }
        rxMapped = 0;
    }
}
