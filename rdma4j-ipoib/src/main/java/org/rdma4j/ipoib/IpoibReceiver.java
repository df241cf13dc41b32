// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;

import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.DmaDirection;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;

/**
 * Fabric to stack, as Linux's {@code ipoib_ib_handle_rx_wc} and {@code ipoib_poll} ({@code ipoib_ib.c}) and, for
 * connected mode, {@code ipoib_cm_handle_rx_wc}: the thread {@code ipoib-rx-<if>} polls the receive CQ (UD receives
 * and the SRQ's), hands IPv4 packets to the TUN interface and ARP to {@link ArpNeighbours}, and reposts each batch
 * of buffers as one chain; when the CQ is empty it arms it and sleeps on the completion channel. It also runs the interface's timers at most every 100 ms of the configured clock (neighbour
 * aging, ARP retries, the connection guard, send reaping), with the interface lock.
 *
 * <p>The UD receive ring: 1024 buffers of the 40-byte GRH area + header + UD MTU, mapped FROM_DEVICE once for the
 * ring's life (Linux keeps its rx ring mapped too), {@code syncForCpu} before a buffer is read and
 * {@code syncForDevice} before it is reposted. The source GID comes from the GRH area: an IPv6 header, or 20 zero
 * bytes and an IPv4 header for RoCEv2 over IPv4, told apart by the version nibble as
 * {@code ib_get_rdma_header_version} does.
 *
 * <p>After a batch that wrote packets to the TUN interface, this thread also sends, through
 * {@link IpoibTransmitter#transmitFromReceiver}, the few packets the stack queued in answer inside those writes (an
 * echo reply, TCP ACKs): Linux's stack does the same in its receive softirq, and here it saves a wake-up of the
 * transmit thread per request and answer.
 *
 * <p>Threads: the ring and the TUN writes are this thread's alone; it takes the interface lock and the TUN read lock
 * only through the parts it calls.
 */
final class IpoibReceiver {
    /** UD receive buffers. */
    static final int RX_RING = 1024;
    private static final int POLL_BATCH = 32;
    private static final int IDLE_WAIT_MS = 100;
    private static final long TICK_NS = 100_000_000L;
    /** Most packets sent from this thread after a batch of TUN writes (the transmit thread sends the rest). */
    private static final int TRANSMIT_AFTER_WRITES = 4;

    private final IpoibResources res;
    private final UdSender ud;
    private final ArpNeighbours neighbours;
    private final ConnectedMode cm;
    private final IpoibTransmitter transmitter;
    private final int slotBytes;
    private final MemorySegment ring;
    /** Each receive slot (GRH area, header, UD MTU) and its DMA address. */
    private final MemorySegment[] slots;
    private final long[] dma;
    private int mapped;
    private final RecvWorkRequest[] wrs;
    /** Each receive slot's IP payload (after GRH and header), made once so the data path slices nothing. */
    private final MemorySegment[] payload;
    private final RecvWorkRequest[] refill = new RecvWorkRequest[POLL_BATCH];
    private final WorkCompletion[] wcs = IpoibResources.newWcs(POLL_BATCH);
    private PacketPort tun;
    private volatile boolean running;
    private Thread thread;
    private long nextTickNs;
    /** Packets this batch wrote to the TUN interface. */
    private int written;

    IpoibReceiver(IpoibResources res, UdSender ud, ArpNeighbours neighbours, ConnectedMode cm,
                  IpoibTransmitter transmitter) {
        this.res = res;
        this.ud = ud;
        this.neighbours = neighbours;
        this.cm = cm;
        this.transmitter = transmitter;
        int size = Ipoib.GRH_BYTES + Ipoib.HEADER_BYTES + res.udMtu;
        this.slotBytes = IpoibResources.align(size, 64);
        this.ring = res.arena.allocate((long) slotBytes * RX_RING, 4096);
        this.slots = IpoibResources.slots(ring, RX_RING, slotBytes, size);
        this.dma = new long[RX_RING];
        this.payload = new MemorySegment[RX_RING];
        for (int k = 0; k < RX_RING; k++) {
            payload[k] = ring.asSlice((long) k * slotBytes + Ipoib.GRH_BYTES + Ipoib.HEADER_BYTES, res.udMtu);
        }
        this.wrs = new RecvWorkRequest[RX_RING];
    }

    /** Maps and posts every UD receive buffer (no thread runs yet); on failure {@link #unmapRing()} undoes it. */
    void postReceives() {
        int size = Ipoib.GRH_BYTES + Ipoib.HEADER_BYTES + res.udMtu;
        for (int k = 0; k < RX_RING; k++) {
            long a = res.dma.map(slots[k], DmaDirection.FROM_DEVICE);
            if (res.dma.mappingError(a)) {
                throw new VerbsException(Errno.ENOMEM, "cannot DMA-map receive buffer " + k + " of " + RX_RING
                        + " (IOMMU window or bounce pool too small for the ring)");
            }
            dma[k] = a;
            mapped = k + 1;
            wrs[k] = new RecvWorkRequest(1).wrId(k).numSge(1);
            wrs[k].sge(0).dma(a, size, res.dmaLkey, slots[k]);
        }
        int posted = res.qp.postRecv(wrs, RX_RING);
        if (posted != RX_RING) {
            throw new VerbsException(Errno.ENOMEM, "could post only " + posted + " of " + RX_RING
                    + " receive buffers: " + wrs[posted].postError());
        }
    }

    /** Arms the CQ and starts {@code ipoib-rx-<if>}, which writes to {@code port}. */
    void start(PacketPort port) {
        tun = port;
        res.recvCq.reqNotify(false);
        running = true;
        nextTickNs = res.clock().nanoTime() + TICK_NS;
        thread = Thread.ofPlatform().name("ipoib-rx-" + port.name()).daemon().start(this::run);
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

    private void run() {
        try {
            while (running) {
                CompletionQueue cq = res.recvCq;
                int n = cq.poll(wcs, POLL_BATCH);
                if (n == 0) {
                    cq.reqNotify(false);
                    n = cq.poll(wcs, POLL_BATCH); // a completion may have come before arming
                    if (n == 0) {
                        CompletionQueue ev = res.channel.getCqEvent(Duration.ofMillis(IDLE_WAIT_MS));
                        if (ev != null) {
                            ev.ackEvents(1);
                        }
                        tick();
                        continue;
                    }
                }
                int k = 0;
                written = 0;
                for (int w = 0; w < n; w++) {
                    WorkCompletion wc = wcs[w];
                    if (wc.status() == WcStatus.WR_FLUSH_ERR && !running) {
                        continue;
                    }
                    if (ConnectedMode.ownsRecv(wc.wrId())) { // an SRQ buffer: a message on one of the RC connections
                        cm.received(wc, this);
                        continue;
                    }
                    int slot = (int) wc.wrId();
                    long size = slots[slot].byteSize();
                    if (wc.status() != WcStatus.SUCCESS) {
                        res.count(IpoibCounter.RX_ERRORS);
                    } else {
                        res.dma.syncForCpu(dma[slot], size, DmaDirection.FROM_DEVICE); // see what the device wrote
                        receive(slot, wc);
                    }
                    res.dma.syncForDevice(dma[slot], size, DmaDirection.FROM_DEVICE); // the device owns it again
                    refill[k++] = wrs[slot];
                }
                if (k > 0 && running) {
                    int posted = res.qp.postRecv(refill, k); // the batch goes back as one chain
                    if (posted != k) {
                        res.count(IpoibCounter.RX_ERRORS);
                    }
                }
                if (res.connected) {
                    cm.refill(running);
                }
                if (written > 0) {
                    // what the stack answered inside those writes leaves now, not after a wake-up of ipoib-tx
                    transmitter.transmitFromReceiver(TRANSMIT_AFTER_WRITES);
                }
                tick();
            }
        } catch (IOException | RuntimeException e) {
            if (running) {
                res.log.accept("ipoib: receive thread stopped: " + e);
            }
        }
    }

    /** A UD receive: GRH area, IPoIB header, payload (this thread). */
    private void receive(int slot, WorkCompletion wc) throws IOException {
        long base = (long) slot * slotBytes;
        int len = wc.byteLen();
        if (len < Ipoib.GRH_BYTES + Ipoib.HEADER_BYTES || len > Ipoib.GRH_BYTES + Ipoib.HEADER_BYTES + res.udMtu) {
            res.count(IpoibCounter.RX_DROP_MALFORMED);
            return;
        }
        // the source GID from the GRH area: an IPv6 header, or 20 zero bytes and an IPv4 header (RoCEv2 over
        // IPv4, as rxe writes it: ib_get_rdma_header_version tells them apart by the version nibble)
        long sgidHi;
        long sgidLo;
        if (((ring.get(ValueLayout.JAVA_BYTE, base) & 0xF0) >>> 4) == 6) {
            sgidHi = ring.get(Ipoib.LONG_BE, base + 8);
            sgidLo = ring.get(Ipoib.LONG_BE, base + 16);
        } else {
            sgidHi = 0;
            sgidLo = 0x0000_FFFF_0000_0000L | (ring.get(Ipoib.INT_BE, base + 32) & 0xFFFF_FFFFL);
        }
        // Linux ipoib_ib_handle_rx_wc: our own multicast copies come back from the group
        if (wc.srcQp() == res.self.qpn() && sgidHi == res.gid.hi() && sgidLo == res.gid.lo()) {
            res.count(IpoibCounter.RX_DROP_OWN);
            return;
        }
        long h = base + Ipoib.GRH_BYTES;
        int bytes = len - Ipoib.GRH_BYTES - Ipoib.HEADER_BYTES;
        long p = h + Ipoib.HEADER_BYTES;
        switch (Ipoib.readType(ring, h)) {
            case Ipoib.TYPE_IPV4 -> deliver(ring, p, bytes, payload[slot], false);
            case Ipoib.TYPE_ARP -> neighbours.receive(ring, p, bytes, wc.srcQp(), sgidHi, sgidLo);
            default -> res.count(IpoibCounter.RX_DROP_UNKNOWN_TYPE);
        }
    }

    /**
     * Checks an IPv4 header against the bytes that came and hands the packet to the stack (this thread).
     *
     * @param seg     the receive buffer
     * @param p       where the packet starts
     * @param bytes   bytes that came for it
     * @param packet  the same packet as a segment from offset 0 (what the TUN write takes)
     * @param rc      whether it came on an RC connection (counted as such too)
     */
    void deliver(MemorySegment seg, long p, int bytes, MemorySegment packet, boolean rc) throws IOException {
        int vihl = bytes >= 20 ? seg.get(ValueLayout.JAVA_BYTE, p) & 0xFF : 0;
        int total = bytes >= 20 ? seg.get(Ipoib.SHORT_BE, p + 2) & 0xFFFF : 0;
        if ((vihl >>> 4) != 4 || (vihl & 0xF) < 5 || total < (vihl & 0xF) * 4 || total > bytes) {
            res.count(IpoibCounter.RX_DROP_MALFORMED);
            return;
        }
        if (tun.write(packet, total)) {
            written++;
            res.count(IpoibCounter.RX_PACKETS);
            if (rc) {
                res.count(IpoibCounter.RX_CM_PACKETS);
            }
            res.add(IpoibCounter.RX_BYTES, total);
        } else {
            res.count(IpoibCounter.RX_DROP_TUN);
        }
    }

    /** The interface's timers, at most every 100 ms of the configured clock. */
    private void tick() {
        long now = res.clock().nanoTime();
        if (now - nextTickNs < 0) {
            return;
        }
        nextTickNs = now + TICK_NS;
        res.lock.lock();
        try {
            ud.reap();
            cm.reapSends();
            neighbours.age();
            cm.tick();
        } finally {
            res.lock.unlock();
        }
    }

    /** At close, once the QP is gone: unmaps the ring. */
    void unmapRing() {
        for (int k = 0; k < mapped; k++) {
            res.dma.unmap(dma[k], slots[k].byteSize(), DmaDirection.FROM_DEVICE);
        }
        mapped = 0;
    }
}
