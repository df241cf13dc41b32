// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.foreign.MemorySegment;

import org.rdma4j.verbs.Gid;

/**
 * One IB transport packet as the engine sees it: the BTH and extension-header fields (IBA 9.2–9.3)
 * plus a payload that refers to memory. A link either hands it to the peer device as is (in-process)
 * or encodes it on the wire (RoCEv2). Reused: valid only for the duration of a delivery call; its payload
 * bytes beyond the call only as {@link #payloadStable} says (docs/engine.md, "Packets between QPs").
 */
final class Packet {
    // Routing (GRH / IP)
    /** The destination device when the sender has resolved it already (in-process fast path), else null. */
    SoftDevice route;
    Gid sgid;
    Gid dgid;
    int hopLimit;
    int trafficClass;
    // BTH
    int opcode;
    boolean solicited;
    int pkey = 0xFFFF;
    int destQpn;
    boolean ackReq;
    int psn;
    // RETH / AtomicETH
    long va;
    int rkey;
    int dmaLen;
    long swapAdd;
    long compare;
    // ImmDt
    int imm;
    // AETH
    int syndrome;
    int msn;
    // AtomicAckETH
    long origValue;
    // DETH
    int qkey;
    int srcQpn;
    // Payload: payloadLen bytes starting at payloadOff of payload
    Sgl payload;
    long payloadOff;
    int payloadLen;
    /**
     * Whether the payload's memory stays valid and unchanged after the delivery call returns, until the packet
     * is answered: an RC request's (its WQE cannot complete before the ACK) and a READ response's (the
     * responder's MR). Not for UC/UD, whose WQEs complete when sent, nor for a receive buffer (RoCE). An inbox
     * keeps a snapshot of a stable payload's pieces and copies an unstable one.
     */
    boolean payloadStable;
    /**
     * The QP whose owner is sending this packet now, on this thread: set by {@link SoftQp#transmit} on the
     * packet objects of the QP's own requester and responder, which only that QP's owner sends, and left set
     * (a reference store per packet would cost a GC barrier); never copied: a held, queued or received packet
     * has none. Lets an in-process delivery keep the target's executor for the rest of the sender's burst
     * ({@link SoftQp#deliver}).
     */
    SoftQp sender;

    /**
     * Sets the routing fields, each reference stored only when it changes: a sender's own packet object is
     * reused for every packet of its QP, whose route rarely changes, and a reference store into an old object
     * costs a GC card-marking barrier.
     *
     * @param to   the destination device, or null
     * @param from the source GID
     * @param dest the destination GID
     */
    void setRoute(SoftDevice to, Gid from, Gid dest) {
        if (route != to) {
            route = to;
        }
        if (sgid != from) {
            sgid = from;
        }
        if (dgid != dest) {
            dgid = dest;
        }
    }

    int mask() {
        return Opcodes.mask(opcode);
    }

    boolean is(int m) {
        return (Opcodes.mask(opcode) & m) != 0;
    }

    /**
     * Copies the payload bytes out of the memory they refer to (a wire link's transmit, or a link
     * that must hold the packet beyond the sender's call).
     *
     * @param dst    destination, at least {@link #payloadLen} bytes from {@code dstOff}
     * @param dstOff offset in {@code dst}
     */
    void copyPayloadTo(MemorySegment dst, long dstOff) {
        if (payloadLen > 0) {
            Sgl to = new Sgl(1);
            to.set(dst, dstOff, payloadLen);
            Sgl.transfer(payload, payloadOff, to, 0, payloadLen);
        }
    }

    /**
     * {@return a packet with the same header fields and a private copy of the payload, valid after the sender's
     * call has returned (what a wire would carry). Allocates: for links that hold packets (fault injection), not
     * for the fast path.}
     *
     */
    Packet deepCopy() {
        Packet c = new Packet();
        c.route = route;
        c.sgid = sgid;
        c.dgid = dgid;
        c.hopLimit = hopLimit;
        c.trafficClass = trafficClass;
        c.opcode = opcode;
        c.solicited = solicited;
        c.pkey = pkey;
        c.destQpn = destQpn;
        c.ackReq = ackReq;
        c.psn = psn;
        c.va = va;
        c.rkey = rkey;
        c.dmaLen = dmaLen;
        c.swapAdd = swapAdd;
        c.compare = compare;
        c.imm = imm;
        c.syndrome = syndrome;
        c.msn = msn;
        c.origValue = origValue;
        c.qkey = qkey;
        c.srcQpn = srcQpn;
        c.payloadStable = true; // the copy belongs to whoever holds it
        if (payloadLen > 0) {
            MemorySegment buf = MemorySegment.ofArray(new byte[payloadLen]);
            copyPayloadTo(buf, 0);
            c.payload = new Sgl(1);
            c.payload.set(buf, 0, payloadLen);
            c.payloadLen = payloadLen;
        }
        return c;
    }

    Packet clearPayload() {
        payload = null;
        payloadOff = 0;
        payloadLen = 0;
        payloadStable = false;
        return this;
    }

    @Override
    public String toString() {
        return Opcodes.name(opcode) + " qpn=0x" + Integer.toHexString(destQpn) + " psn=0x" + Integer.toHexString(psn)
                + (ackReq ? " A" : "") + " len=" + payloadLen;
    }
}
