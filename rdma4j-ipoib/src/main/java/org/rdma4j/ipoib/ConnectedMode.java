// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.DmaDirection;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
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
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.CmOption;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.IbSocketAddress;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RejectReason;

/**
 * Connected mode (RFC 4755), as Linux's {@code ipoib_cm.c}: an RC connection per neighbour and direction,
 * {@link TxConn}s we open ({@code ipoib_cm_tx}) and {@link RxConn}s neighbours open to us ({@code ipoib_cm_rx}),
 * one SRQ shared by every receiving QP, and a pool of big send buffers.
 * <ul>
 *   <li><b>Resources</b> ({@code ipoib_cm_dev_init}): one SRQ of 256 buffers of header + MTU (64 KiB), mapped
 *   FROM_DEVICE once and synced around each use; its completions land on the UD receive CQ, so one receive thread
 *   serves both. A send CQ for the RC QPs. 128 big send buffers, each mapped TO_DEVICE for exactly the packet's
 *   length when posted as one signalled RC SEND, unmapped and freed at its completion.</li>
 *   <li><b>Connections</b>: the InfiniBand CM, through the CM API ({@code org.rdma4j.verbs.cm}) with IB addresses (AF_IB: the
 *   service ID as it is on the wire, no rdma_cm header). The interface listens on service ID
 *   {@code 0x1000000000000000 | UD QPN} (Linux {@code IPOIB_CM_IETF_ID}, {@code ipoib_cm_dev_open}); a connection
 *   to a neighbour is a REQ to its service, the REP and RTU follow (Linux {@code ipoib_cm_send_req},
 *   {@code ipoib_cm_send_rep}). REQ and REP carry RFC 4755's 8 bytes of private data ({@code struct ipoib_cm_data}):
 *   the sender's UD QPN and its receive size, header included (Linux {@code IPOIB_CM_BUF_SIZE}). Events are
 *   handled by the thread {@code ipoib-cm-<if>} with the interface lock, as Linux's CM handlers take
 *   {@code priv->lock}.</li>
 *   <li><b>Errors</b> ({@code ipoib_cm_handle_tx_wc}, {@code ipoib_cm_tx_handler}): a send completing in error,
 *   a DREQ or a stale-connection REJ tears the connection down and the next packet after a second reconnects; a
 *   neighbour that refuses, or does not answer the CM, gets datagrams for 60 s.</li>
 * </ul>
 *
 * <p>Threads: the transmit thread (connections, sends, reaping), the receive thread (SRQ completions, the guard
 * timer) and {@code ipoib-cm-<if>} (CM events), with the interface lock except where a method says otherwise. In
 * datagram mode nothing of this runs: the interface does not listen, so the CM answers a neighbour's REQ with a
 * REJ (invalid service ID) and that neighbour falls back at once.
 */
final class ConnectedMode {
    /** SRQ buffers, on the UD receive CQ too. */
    static final int RX_RING = 256;
    /** Linux ipoib_cm.c IPOIB_CM_IETF_ID: RFC 4755's service ID prefix, the UD QPN in the low 24 bits. */
    static final long IETF_ID = 0x1000_0000_0000_0000L;
    /** RFC 4755 / Linux {@code struct ipoib_cm_data}: {@code be32 qpn; be32 mtu;}. */
    static final int PRIVATE_DATA_BYTES = 8;
    private static final int TX_SLOTS = 128;
    private static final int MAX_CONNS = 64;
    private static final int POLL_BATCH = 32;
    private static final int LISTEN_BACKLOG = MAX_CONNS;
    private static final Duration RESOLVE_TIMEOUT = Duration.ofSeconds(2);
    /**
     * REQ retransmission: 4.096 us x 2^18 (about 1.07 s) between REQs, 2 retransmissions, so a neighbour whose CM
     * does not answer falls back to datagrams after about 3 s. Linux sends 20 and 15 (about 64 s, during which it
     * sends the neighbour nothing); here the neighbour gets datagrams meanwhile, so waiting less costs nothing.
     */
    private static final int CM_RESPONSE_TIMEOUT = 18;
    private static final int MAX_CM_RETRIES = 2;
    /** A connection still CONNECTING after this long is given up (the CM owes an event long before). */
    private static final long CONNECT_GUARD_NS = 30_000_000_000L;
    private static final long RETRY_NS = 60_000_000_000L;
    private static final long ERROR_RETRY_NS = 1_000_000_000L;
    /** Work request IDs of SRQ buffers, on the receive CQ shared with the UD ring. */
    private static final long RX_BIT = 1L << 61;
    private static final int SLOT_BITS = 20;

    private final IpoibResources res;
    /** Connections we opened, one per neighbour (lock). */
    private final List<TxConn> txConns = new ArrayList<>();
    /** Connections neighbours opened to us (lock). */
    private final List<RxConn> rxConns = new ArrayList<>();
    private int connSerial;
    private CmEventChannel events;
    private CmId listener;
    private Thread thread;
    private volatile boolean running;

    // resources, connected mode only (else null)
    private final CompletionQueue sendCq;
    private final SharedReceiveQueue srq;
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
     * SRQ's, {@link #listen} starts the CM side); in datagram mode nothing.
     *
     * @param events the CM event channel of the interface (connected mode; null in datagram mode), closed here
     */
    ConnectedMode(IpoibResources res, CmEventChannel events) {
        this.res = res;
        this.events = events;
        if (!res.connected) {
            sendCq = null;
            srq = null;
            slotBytes = 0;
            rxRing = txRing = null;
            rxSlots = rxPayload = txSlots = txPayload = txMapped = null;
            rxDma = txDma = null;
            rxWrs = null;
            txOwner = null;
            txFree = null;
            return;
        }
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

    /**
     * Listens on our service ID and starts {@code ipoib-cm-<if>} (connected mode; Linux {@code ipoib_cm_dev_open}).
     *
     * @param ifname the interface name, for the thread's
     * @throws VerbsException if the CM has no device for our GID, or the service is taken
     */
    void listen(String ifname) {
        if (!res.connected) {
            return;
        }
        listener = events.createId(PortSpace.IB, QpType.RC);
        listener.bindAddr(new IbSocketAddress(res.gid, serviceId(res.self.qpn())));
        listener.listen(LISTEN_BACKLOG);
        running = true;
        thread = Thread.ofPlatform().name("ipoib-cm-" + ifname).daemon().start(this::run);
    }

    /** @return the service ID of an interface: RFC 4755 section 6.1, Linux {@code IPOIB_CM_IETF_ID | qpn} */
    static long serviceId(int udQpn) {
        return IETF_ID | (udQpn & 0xFF_FFFFL);
    }

    /** Asks {@code ipoib-cm-<if>} to stop; it does within its wait. */
    void stop() {
        running = false;
    }

    /** Waits (bounded) for {@code ipoib-cm-<if>} to end. */
    void join() throws InterruptedException {
        if (thread != null) {
            thread.join(2_000);
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
            connect(c);
        } else if (c.state == TxConn.State.FAILED && res.clock().nanoTime() - c.deadlineNs >= 0) {
            connect(c);
        }
        return c;
    }

    /**
     * Starts a connection (lock held; Linux {@code ipoib_cm_tx_init}): a CM ID resolves the neighbour's IB address
     * (its GID and service ID); the QP and the REQ follow on ROUTE_RESOLVED.
     */
    private void connect(TxConn c) {
        CmId id = null;
        try {
            id = events.createId(PortSpace.IB, QpType.RC);
            id.attach(c);
            setOptional(id, CmOption.CM_RESPONSE_TIMEOUT, CM_RESPONSE_TIMEOUT);
            setOptional(id, CmOption.MAX_CM_RETRIES, MAX_CM_RETRIES);
            // timeout 14 (about 67 ms) x 7 transmissions (retry_cnt 6, sendReq): a vanished peer shows as an error
            // completion in about half a second (perftest and rping set 14 too)
            id.setOption(CmOption.ACK_TIMEOUT, 14);
            c.id = id;
            c.serial = ++connSerial & 0x3FF_FFFF;
            c.state = TxConn.State.CONNECTING;
            c.fallback = false;
            c.deadlineNs = res.clock().nanoTime() + CONNECT_GUARD_NS;
            id.resolveAddr(new IbSocketAddress(res.gid, 0), new IbSocketAddress(c.peer.gid(), serviceId(c.peer.qpn())),
                    RESOLVE_TIMEOUT);
            res.count(IpoibCounter.CM_REQ_SENT);
        } catch (VerbsException ex) {
            res.log.accept("ipoib: cannot open a connection to " + IpoibResources.ipString(c.ip) + ": "
                    + ex.getMessage());
            c.id = null;
            closeId(id);
            failed(c, RETRY_NS);
        }
    }

    private static <T> void setOptional(CmId id, CmOption<T> option, T value) {
        try {
            id.setOption(option, value);
        } catch (VerbsException ex) {
            if (ex.errno() != Errno.EOPNOTSUPP) {
                throw ex;
            }
            // a librdmacm provider keeps Linux's timing: the neighbour gets datagrams meanwhile anyway
        }
    }

    /** ROUTE_RESOLVED: the RC QP (receiving from the SRQ, as Linux's tx QPs do) and the REQ (lock held). */
    private void sendReq(TxConn c) {
        QueuePair q = c.id.createQp(res.pd, new QpInitAttributes().type(QpType.RC).sendCq(sendCq).recvCq(res.recvCq)
                .srq(srq).cap(new QpCapabilities(TX_SLOTS, 0, 1, 1, 0)));
        c.qp = q;
        // Linux ipoib_cm_send_req (6.1): responder resources 4, initiator depth 0, no flow control, the SRQ flag,
        // retry_count 0 and rnr_retry_count 0 ("RFC draft warns against retries"); the CM puts both into each
        // side's RTS attributes (cm.c cm_init_qp_rts_attr), and on RETRY_EXC_ERR ipoib_cm_handle_tx_wc destroys
        // the connection, made again on the next packet. Here: transport retry 6 where Linux has 0, because this
        // device runs over UDP, which drops under load, and 0 would turn every lost packet into a reconnection;
        // 6, not 7, because 7 means "retry for ever" on rxe and on the soft device, so a neighbour that died
        // without a DREQ would hold its connection, and every packet queued on it, for ever: with 6 the send
        // fails after seven ack timeouts (about half a second at the timeout 14 connect sets) and reconnecting
        // finds the neighbour gone. RNR retry 7 (infinite) where Linux has 0: a dead neighbour sends no RNR NAK, so it
        // cannot make this hang, and a live one whose receive thread refills the SRQ late makes the sender
        // wait instead of dropping the connection.
        c.id.connect(new ConnParam().privateData(privateData()).responderResources(4).initiatorDepth(0)
                .retryCount(6).rnrRetryCount(7).srq(true).flowControl(false));
    }

    /** The 8 bytes of RFC 4755 private data: our UD QPN and the receive size one SRQ buffer holds (header + MTU). */
    private byte[] privateData() {
        byte[] d = new byte[PRIVATE_DATA_BYTES];
        putBe32(d, 0, res.self.qpn());
        putBe32(d, 4, Ipoib.HEADER_BYTES + res.mtu); // Linux IPOIB_CM_BUF_SIZE
        return d;
    }

    private static void putBe32(byte[] b, int off, int v) {
        b[off] = (byte) (v >>> 24);
        b[off + 1] = (byte) (v >>> 16);
        b[off + 2] = (byte) (v >>> 8);
        b[off + 3] = (byte) v;
    }

    private static int be32(byte[] b, int off) {
        return ((b[off] & 0xFF) << 24) | ((b[off + 1] & 0xFF) << 16) | ((b[off + 2] & 0xFF) << 8) | (b[off + 3] & 0xFF);
    }

    /**
     * The receive size in a REQ's or REP's private data, or -1 when the data cannot be RFC 4755's: shorter than 8
     * bytes, or a size below a header and IPv4's 576.
     */
    private static int remoteSize(byte[] d) {
        if (d == null || d.length < PRIVATE_DATA_BYTES) {
            return -1;
        }
        int mtu = be32(d, 4);
        return mtu < Ipoib.HEADER_BYTES + 576 ? -1 : mtu;
    }

    /**
     * Closes a connection's CM ID (lock held): a DREQ if it was connected, the QP destroyed with it, the send
     * buffers it held taken back. The entry stays, FAILED.
     */
    private void teardown(TxConn c) {
        CmId id = c.id;
        if (id != null) {
            c.id = null;
            c.qp = null;
            closeId(id); // the QP goes with it: nothing of it touches memory afterwards
            for (int k = 0; k < TX_SLOTS; k++) {
                if (txOwner[k] == c) {
                    releaseTx(k);
                }
            }
        }
        c.state = TxConn.State.FAILED;
    }

    private void failed(TxConn c, long retryNs) {
        teardown(c);
        c.fallback = retryNs >= RETRY_NS;
        c.deadlineNs = res.clock().nanoTime() + retryNs;
    }

    private void closeId(CmId id) {
        if (id == null) {
            return;
        }
        try {
            id.close();
        } catch (VerbsException ex) {
            res.log.accept("ipoib: close: " + ex.getMessage());
        }
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
                failed(c, ERROR_RETRY_NS);
            }
        }
    }

    /** Gives up connections the CM has left CONNECTING for too long (lock held; the receive thread's timer). */
    void tick() {
        if (!res.connected) {
            return;
        }
        long now = res.clock().nanoTime();
        for (int k = 0; k < txConns.size(); k++) {
            TxConn c = txConns.get(k);
            if (c.state == TxConn.State.CONNECTING && now - c.deadlineNs >= 0) {
                res.count(IpoibCounter.CM_FALLBACK);
                res.log.accept("neighbour " + IpoibResources.ipString(c.ip) + ": no connection after "
                        + CONNECT_GUARD_NS / 1_000_000_000L + " s: datagram mode");
                failed(c, RETRY_NS);
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

    // ------------------------------------------------------------------ CM events (ipoib-cm-<if>)

    private void run() {
        while (running) {
            try (CmEvent e = events.getEvent(Duration.ofMillis(100))) {
                if (e == null) {
                    continue;
                }
                e.ack(); // what the handlers need is in the event; an acked ID may be closed
                res.lock.lock();
                try {
                    handle(e); // also while stopping: a request's new ID must be answered and closed
                } finally {
                    res.lock.unlock();
                }
            } catch (RuntimeException ex) {
                if (running) {
                    res.log.accept("ipoib: connection event failed: " + ex); // the thread goes on
                }
            }
        }
    }

    /** One CM event (lock held), as Linux's ipoib_cm_tx_handler and ipoib_cm_rx_handler. */
    private void handle(CmEvent e) {
        CmId id = e.id();
        Object owner = id.attachment();
        switch (e.type()) {
            case CONNECT_REQUEST -> onRequest(e);
            case ADDR_RESOLVED, ROUTE_RESOLVED, ESTABLISHED, REJECTED, UNREACHABLE, CONNECT_ERROR, ADDR_ERROR,
                 ROUTE_ERROR, DISCONNECTED -> {
                if (owner instanceof TxConn c) {
                    if (c.id == id) {
                        try {
                            onTxEvent(c, e);
                        } catch (VerbsException ex) {
                            res.log.accept("ipoib: connection to " + IpoibResources.ipString(c.ip) + " failed: "
                                    + ex.getMessage());
                            failed(c, RETRY_NS);
                        }
                    }
                } else if (owner instanceof RxConn r) {
                    onRxEvent(r, e);
                }
            }
            default -> {
                // TIMEWAIT_EXIT and the rest: nothing to do
            }
        }
    }

    private void onTxEvent(TxConn c, CmEvent e) {
        String who = "neighbour " + IpoibResources.ipString(c.ip);
        switch (e.type()) {
            case ADDR_RESOLVED -> c.id.resolveRoute(RESOLVE_TIMEOUT);
            case ROUTE_RESOLVED -> sendReq(c);
            case ESTABLISHED -> {
                // Linux ipoib_cm_rep_handler: the REP's private data gives the peer's receive size
                int mtu = remoteSize(e.privateData());
                if (mtu < 0) {
                    res.count(IpoibCounter.RX_DROP_BAD_CM);
                    res.log.accept(who + " answered with a bad receive size: datagram mode");
                    failed(c, RETRY_NS);
                    return;
                }
                c.remoteMtu = Math.min(mtu, Ipoib.HEADER_BYTES + res.mtu);
                c.state = TxConn.State.CONNECTED;
                res.count(IpoibCounter.CM_CONNECTED);
                res.log.accept(who + " connected (RC QPN 0x" + Integer.toHexString(c.qp.qpNum()) + " to 0x"
                        + Integer.toHexString(e.connParam().qpNum()) + ", mtu " + (c.remoteMtu - Ipoib.HEADER_BYTES) + ")");
            }
            case REJECTED -> {
                res.count(IpoibCounter.CM_REJ_RECEIVED);
                if (e.rejectReason() == RejectReason.STALE_CONN) {
                    // the peer's CM still held a connection with our QP's number (we restarted): it drops that
                    // one with a DREQ, and our next packet after a second connects anew
                    res.log.accept(who + " rejected a stale connection, reconnecting");
                    failed(c, ERROR_RETRY_NS);
                } else {
                    res.log.accept(who + " refused connected mode (" + e.rejectReason() + "): datagram mode");
                    failed(c, RETRY_NS);
                }
            }
            case DISCONNECTED -> {
                res.log.accept(who + " disconnected, reconnecting");
                failed(c, ERROR_RETRY_NS);
            }
            default -> { // UNREACHABLE, CONNECT_ERROR, ADDR_ERROR, ROUTE_ERROR
                res.count(IpoibCounter.CM_FALLBACK);
                res.log.accept(who + " did not answer connected-mode requests (" + e.type() + "): datagram mode");
                failed(c, RETRY_NS);
            }
        }
    }

    // ------------------------------------------------------------------ connections neighbours open (≈ ipoib_cm_rx)

    /**
     * A REQ for our service (lock held; Linux {@code ipoib_cm_req_handler}): the QP, receiving from the SRQ, and the
     * REP with our private data; the CM moves the QP to RTR and RTS before the REP leaves.
     */
    private void onRequest(CmEvent e) {
        CmId id = e.id();
        Gid g = id.remoteAddress() instanceof IbSocketAddress a ? a.gid() : null;
        byte[] d = e.privateData();
        if (remoteSize(d) < 0 || g == null) {
            res.count(IpoibCounter.RX_DROP_BAD_CM);
            reject(id);
            return;
        }
        int udQpn = be32(d, 0) & 0xFF_FFFF; // RFC 4755: the high byte is reserved and ignored on receive
        // a new REQ from the same interface replaces its old connection (it restarted, or reconnects after an error)
        for (int k = rxConns.size() - 1; k >= 0; k--) {
            RxConn r = rxConns.get(k);
            if (r.peerUdQpn() == udQpn && r.peerGid().equals(g)) {
                rxConns.remove(k);
                closeId(r.id());
            }
        }
        if (rxConns.size() >= MAX_CONNS) {
            reject(id);
            return;
        }
        try {
            QueuePair q = id.createQp(res.pd, new QpInitAttributes().type(QpType.RC).sendCq(sendCq)
                    .recvCq(res.recvCq).srq(srq).cap(new QpCapabilities(1, 0, 1, 1, 0)));
            RxConn r = new RxConn(g, udQpn, id, q);
            id.attach(r);
            // Linux ipoib_cm_send_rep: the REQ's RNR retry count, no flow control, the SRQ flag
            id.accept(new ConnParam().privateData(privateData()).rnrRetryCount(e.connParam().rnrRetryCount())
                    .srq(true).flowControl(false));
            rxConns.add(r);
            res.count(IpoibCounter.CM_ACCEPTED);
            res.log.accept("connection from " + g + " qpn 0x" + Integer.toHexString(udQpn) + " accepted (RC QPN 0x"
                    + Integer.toHexString(q.qpNum()) + ")");
        } catch (VerbsException ex) {
            res.log.accept("ipoib: cannot accept a connection from " + g + ": " + ex.getMessage());
            reject(id);
        }
    }

    private void reject(CmId id) {
        try {
            id.reject(null);
            res.count(IpoibCounter.CM_REJ_SENT);
        } catch (VerbsException ex) {
            res.log.accept("ipoib: reject: " + ex.getMessage());
        }
        closeId(id);
    }

    private void onRxEvent(RxConn r, CmEvent e) {
        switch (e.type()) {
            case ESTABLISHED -> {
                // the RTU came; the QP was ready since the REP
            }
            case DISCONNECTED, REJECTED, UNREACHABLE, CONNECT_ERROR -> {
                // Linux ipoib_cm_rx_handler: a DREQ (or a REP the peer never took) ends the connection
                if (rxConns.remove(r)) {
                    closeId(r.id());
                }
            }
            default -> {
                // nothing else comes for a passive ID
            }
        }
    }

    // ------------------------------------------------------------------ SRQ receives (receive thread, no lock)

    /** {@return whether a receive completion is one of the SRQ's buffers (a message on an RC connection)} */
    static boolean ownsRecv(long wrId) {
        return (wrId & RX_BIT) != 0;
    }

    /**
     * An SRQ completion (receive thread): the buffer is synced for the CPU, its packet handed to the stack, and the
     * buffer queued for {@link #refill}.
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

    /**
     * At close, once the threads stopped: closes every CM ID (connected ones send a DREQ; their QPs go with them),
     * the listener and the event channel. Before the SRQ and the CQs are released.
     */
    void closeConnections() {
        res.lock.lock();
        try {
            for (TxConn c : txConns) {
                teardown(c);
            }
            txConns.clear();
            for (RxConn r : rxConns) {
                closeId(r.id());
            }
            rxConns.clear();
            closeId(listener);
            listener = null;
            if (events != null) {
                // requests that came after the thread stopped: their IDs are ours to refuse and close
                for (CmEvent e = events.pollEvent(); e != null; e = events.pollEvent()) {
                    CmEvent ev = e;
                    try (ev) {
                        ev.ack();
                        if (ev.type() == CmEventType.CONNECT_REQUEST) {
                            reject(ev.id());
                        }
                    }
                }
                try {
                    events.close();
                } catch (VerbsException ex) {
                    res.log.accept("ipoib: close: " + ex.getMessage());
                }
                events = null;
            }
        } finally {
            res.lock.unlock();
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
