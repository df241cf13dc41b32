// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;

/**
 * The UD QP's send side, as Linux's {@code ipoib_send}, {@code poll_tx} and {@code ipoib_reap_ah}
 * ({@code ipoib_ib.c}): two {@link SendRing}s on the UD QP and the reaping of its send CQ.
 * <ul>
 *   <li>The <b>data ring</b> (128 slots, one send in 16 signalled): only the transmit thread fills it, reading a
 *   TUN packet straight into its next slot.</li>
 *   <li>The <b>control ring</b> (64 slots, every send signalled): ARP, connection messages, packets that waited for
 *   address resolution and, in connected mode, packets copied out of a big send buffer to go as datagrams.</li>
 * </ul>
 * An address handle that is replaced or forgotten may still be named by sends in flight; it is closed once both
 * rings have completed every send posted before it was retired (Linux keeps {@code ah->last_send} for that).
 *
 * <p>Lock held for every method (the interface lock).
 */
final class UdSender {
    static final int DATA_SLOTS = 128;
    static final int CONTROL_SLOTS = 64;
    /** Send queue depth of the UD QP, and entries of its send CQ. */
    static final int SEND_WRS = DATA_SLOTS + CONTROL_SLOTS;
    private static final int SIGNAL_EVERY = 16;
    private static final int POLL_BATCH = 32;
    /** Work request ID bits naming the ring; the low bits are a sequence number. */
    static final long TAG_MASK = 0b11L << 62;
    private static final long DATA_TAG = 0;
    private static final long CONTROL_TAG = 1L << 62;

    private final IpoibResources res;
    private final SendRing data;
    private final SendRing control;
    private final WorkCompletion[] wcs = IpoibResources.newWcs(POLL_BATCH);
    /** Address handles retired, with the sends of each ring that may still use them. */
    private final List<Retired> retired = new ArrayList<>();

    private record Retired(AddressHandle ah, long dataSeq, long controlSeq) {
    }

    UdSender(IpoibResources res) {
        this.res = res;
        this.data = new SendRing(res, DATA_SLOTS, DATA_TAG, SIGNAL_EVERY);
        this.control = new SendRing(res, CONTROL_SLOTS, CONTROL_TAG, 1);
    }

    /** {@return the data ring; only the transmit thread fills it (it reads TUN packets into its next slot)} */
    SendRing data() {
        return data;
    }

    /**
     * Posts the data ring's next slot, which holds an IPv4 packet, as a UD send (lock held).
     *
     * @param n   the packet's length
     * @param ah  destination
     * @param qpn destination QPN
     */
    void sendData(int n, AddressHandle ah, int qpn) {
        assert res.lock.isHeldByCurrentThread();
        if (data.post(Ipoib.TYPE_IPV4, n, ah, qpn)) {
            res.count(IpoibCounter.TX_PACKETS);
            res.add(IpoibCounter.TX_BYTES, n);
        }
    }

    /**
     * Takes the control ring's next slot (lock held), after reaping completions; counts TX_DROP_RING_FULL when
     * every slot is in flight.
     *
     * @return the byte offset of the slot's header in {@link #controlMemory()}, or -1 when the ring is full
     */
    long controlSlot() {
        assert res.lock.isHeldByCurrentThread();
        reap();
        if (control.full()) {
            res.count(IpoibCounter.TX_DROP_RING_FULL);
            return -1;
        }
        return control.offset();
    }

    /** {@return the control ring's memory, which {@link #controlSlot()} indexes} */
    MemorySegment controlMemory() {
        return control.memory();
    }

    /**
     * Posts the control slot the caller filled after {@link #controlSlot()} (lock held).
     *
     * @param type the payload's EtherType
     * @param len  payload bytes (after the 4-byte header)
     * @return whether the send was posted
     */
    boolean sendControl(int type, int len, AddressHandle ah, int qpn) {
        assert res.lock.isHeldByCurrentThread();
        return control.post(type, len, ah, qpn);
    }

    /**
     * Copies an IPv4 packet into a control slot and sends it (lock held): a packet that waited for resolution, or
     * in connected mode one that goes as a datagram from a big send buffer.
     *
     * @param src memory holding the packet
     * @param off where it starts
     * @param n   its length (at most the UD MTU)
     */
    void sendCopy(MemorySegment src, long off, int n, AddressHandle ah, int qpn) {
        long b = controlSlot();
        if (b < 0) {
            return;
        }
        MemorySegment.copy(src, off, control.memory(), b + Ipoib.HEADER_BYTES, n);
        if (control.post(Ipoib.TYPE_IPV4, n, ah, qpn)) {
            res.count(IpoibCounter.TX_PACKETS);
            res.add(IpoibCounter.TX_BYTES, n);
        }
    }

    /** Polls the send CQ and frees each ring's slots up to its signalled completions (lock held). */
    void reap() {
        assert res.lock.isHeldByCurrentThread();
        int n = res.sendCq.poll(wcs, POLL_BATCH);
        for (int k = 0; k < n; k++) {
            WorkCompletion wc = wcs[k];
            if (wc.status() != WcStatus.SUCCESS) {
                res.count(IpoibCounter.TX_ERRORS);
            }
            long id = wc.wrId();
            (control.owns(id) ? control : data).complete(id);
        }
        if (!retired.isEmpty()) {
            closeRetired();
        }
    }

    /** Closes an address handle once every send posted so far has completed (lock held). */
    void retire(AddressHandle ah) {
        if (ah != null) {
            retired.add(new Retired(ah, data.posted(), control.posted()));
        }
    }

    private void closeRetired() {
        for (int k = retired.size() - 1; k >= 0; k--) {
            Retired r = retired.get(k);
            if (data.done() >= r.dataSeq() && control.done() >= r.controlSeq()) {
                retired.remove(k);
                r.ah().close();
                res.disown(r.ah());
            }
        }
    }

    /** At close, once the QP is gone: unmaps the sends the device still held. */
    void unmapOutstanding() {
        data.unmapOutstanding();
        control.unmapOutstanding();
    }
}
