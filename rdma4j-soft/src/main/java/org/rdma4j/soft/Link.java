// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

/**
 * Where a device's engine sends its packets, and what delivers packets to a peer's
 * {@link SoftDevice#receive} (the "links" of the design: in-process, RoCEv2/UDP, and decorators such
 * as {@link FaultInjectingLink}).
 *
 * <p>Contract: {@link #send} is called by the owner of the sending QP's executor (docs/engine.md), from any
 * thread, possibly by several threads at once for different QPs, so a link guards its own state. The
 * {@link Packet} object is valid only for the duration of the call: the sender reuses it for its next packet.
 * The memory its payload refers to (the sender's registered memory, through an {@link Sgl}) outlives the
 * call only as {@link Packet#payloadStable} says. A link therefore either delivers the packet before
 * returning (the in-process fast path passes the object itself, so a WRITE is one copy; the receiving QP may
 * keep a snapshot of a stable payload in its inbox) or copies it out before returning: the header fields, and
 * the payload bytes with {@link Packet#copyPayloadTo} or {@link Packet#deepCopy} (a wire link encodes them to
 * bytes; a link that holds packets keeps deep copies). A link may drop a packet (the protocol recovers on RC)
 * but must count why. It may deliver packets of its own later, from {@link #send} or from a timer; a delivery
 * never waits for a QP ({@link SoftQp#deliver}), so a link's lock may be held across one.
 */
interface Link {
    /**
     * Sends a packet on behalf of a device. Called by the sending QP's owner.
     *
     * @param from the sending device
     * @param p    the packet, valid only during this call
     */
    void send(SoftDevice from, Packet p);

    /**
     * Sends what the link batched for the calling thread's burst now, not at the burst's end: a QP that paces a
     * long operation flushes each burst before it builds the next (docs/engine.md, "Pacing"). Any thread.
     */
    default void flush() {
    }

    /** Releases what the link holds (sockets, timers, held packets). Idempotent. */
    default void close() {
    }
}
