// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.lang.foreign.MemorySegment;

import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.DmaDirection;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WrOpcode;

/**
 * A ring of UD send buffers, as Linux's {@code priv->tx_ring} with {@code tx_head} and {@code tx_tail}: slot
 * {@code posted % slots} is the next to fill; a slot holds the 4-byte IPoIB header and up to the UD MTU. A slot is
 * DMA-mapped TO_DEVICE when it is posted (after the CPU wrote it: a bounce device copies at map time) and unmapped
 * when a completion at or after it arrives. A UD send queue completes in order, so a signalled completion frees
 * every earlier slot: only one send in {@code signalEvery} asks for a completion. The work request ID is the
 * ring's tag or'ed with the send's sequence number plus one, so completions of two rings on one CQ are told apart.
 *
 * <p>Used for the data ring (TUN packets, read straight into the slot) and the control ring (ARP, connection
 * messages, packets copied from elsewhere) of {@link UdSender}. Not thread-safe: the interface lock guards it.
 */
final class SendRing {
    private final IpoibResources res;
    private final MemorySegment memory;
    private final MemorySegment[] slots;
    private final MemorySegment[] payload;
    private final long[] dmaAddr;
    private final int stride;
    private final long tag;
    private final int signalEvery;
    private final SendWorkRequest swr = new SendWorkRequest(1);
    private long posted;
    private long done;

    /**
     * @param slots       number of buffers
     * @param tag         work request ID bits that name this ring (none of the low 62 bits)
     * @param signalEvery one send in this many is signalled (1: every send)
     */
    SendRing(IpoibResources res, int slots, long tag, int signalEvery) {
        this.res = res;
        int size = Ipoib.HEADER_BYTES + res.udMtu;
        this.stride = IpoibResources.align(size, 64);
        this.memory = res.arena.allocate((long) stride * slots, 4096);
        this.slots = IpoibResources.slots(memory, slots, stride, size);
        this.payload = new MemorySegment[slots];
        for (int k = 0; k < slots; k++) {
            payload[k] = memory.asSlice((long) k * stride + Ipoib.HEADER_BYTES, res.udMtu);
        }
        this.dmaAddr = new long[slots];
        this.tag = tag;
        this.signalEvery = signalEvery;
    }

    /** {@return the ring's memory, which {@link #offset()} indexes} */
    MemorySegment memory() {
        return memory;
    }

    /** {@return whether every slot waits for its completion} */
    boolean full() {
        return posted - done >= slots.length;
    }

    /** {@return the byte offset in {@link #memory()} of the next slot to fill (its header)} */
    long offset() {
        return (posted % slots.length) * stride;
    }

    /** {@return the IP payload (after the header) of the next slot to fill, UD MTU bytes} */
    MemorySegment nextPayload() {
        return payload[(int) (posted % slots.length)];
    }

    /** {@return how many sends were posted so far (the next one's sequence number)} */
    long posted() {
        return posted;
    }

    /** {@return how many of them are known complete} */
    long done() {
        return done;
    }

    /**
     * Posts the next slot, whose payload the caller wrote, as one UD send; counts a failed mapping
     * (TX_DROP_DMA) or a refused post (TX_ERRORS), and the slot stays free for the next packet.
     *
     * @param type the payload's EtherType, written into the header here
     * @param len  payload bytes
     * @param ah   destination
     * @param qpn  destination QPN (0xFFFFFF for the group)
     * @return whether the send was posted
     */
    boolean post(int type, int len, AddressHandle ah, int qpn) {
        long seq = posted;
        int slot = (int) (seq % slots.length);
        Ipoib.writeHeader(slots[slot], 0, type);
        long a = res.dma.map(slots[slot], DmaDirection.TO_DEVICE);
        if (res.dma.mappingError(a)) {
            res.count(IpoibCounter.TX_DROP_DMA);
            return false;
        }
        boolean signal = (seq % signalEvery) == signalEvery - 1;
        swr.clear().wrId(tag | (seq + 1)).opcode(WrOpcode.SEND).sendFlags(signal ? SendFlags.SIGNALED : 0).numSge(1)
                .ah(ah).remoteQpn(qpn).remoteQkey(res.cfg.qkey());
        swr.sge(0).dma(a, Ipoib.HEADER_BYTES + len, res.dmaLkey, slots[slot]);
        if (!res.qp.postSend(swr)) {
            res.dma.unmap(a, slots[slot].byteSize(), DmaDirection.TO_DEVICE);
            res.count(IpoibCounter.TX_ERRORS);
            return false;
        }
        dmaAddr[slot] = a;
        posted = seq + 1;
        return true;
    }

    /** {@return whether a completion's work request ID is one of this ring's sends} */
    boolean owns(long wrId) {
        return (wrId & UdSender.TAG_MASK) == tag;
    }

    /** A completion of this ring: every send up to it is done (in order), so their slots are unmapped. */
    void complete(long wrId) {
        long upTo = wrId & ~UdSender.TAG_MASK;
        for (long q = done; q < upTo; q++) {
            int slot = (int) (q % slots.length);
            res.dma.unmap(dmaAddr[slot], slots[slot].byteSize(), DmaDirection.TO_DEVICE);
        }
        done = Math.max(done, upTo);
    }

    /** At close, once the QP is gone: unmaps what the device still held. */
    void unmapOutstanding() {
        for (long q = done; q < posted; q++) {
            int slot = (int) (q % slots.length);
            res.dma.unmap(dmaAddr[slot], slots[slot].byteSize(), DmaDirection.TO_DEVICE);
        }
        done = posted;
    }
}
