// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

/**
 * Where a device's engine sends its packets, and what delivers packets to a peer's
 * {@link SoftDevice#receive} (the "links" of the design: in-process, RoCEv2/UDP, and decorators such
 * as {@link FaultInjectingLink}).
 *
 * <p>Contract: {@link #send} is called under the fabric's engine lock. The {@link Packet} and the
 * memory its payload refers to (the sender's registered memory, through an {@link Sgl}) are valid only
 * for the duration of the call: the sender reuses the object for its next packet and the user may
 * change or deregister the memory once the work request completes. A link therefore either delivers
 * the packet before returning (the in-process fast path passes the object itself, so a WRITE is one
 * copy) or copies it out before returning: the header fields, and the payload bytes with
 * {@link Packet#copyPayloadTo} or {@link Packet#deepCopy} (a wire link encodes them to bytes; a link
 * that holds packets keeps deep copies). A link may drop a packet (the protocol recovers on RC) but
 * must count why. It may deliver packets of its own later, from {@link #send} or from a timer, always
 * with the engine lock held.
 */
interface Link {
    /**
     * Sends a packet on behalf of a device. Engine lock held.
     *
     * @param from the sending device
     * @param p    the packet, valid only during this call
     */
    void send(SoftDevice from, Packet p);

    /** Releases what the link holds (sockets, timers, held packets). Idempotent. */
    default void close() {
    }
}
