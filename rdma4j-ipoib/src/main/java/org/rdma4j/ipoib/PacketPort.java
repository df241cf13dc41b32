// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.io.IOException;
import java.lang.foreign.MemorySegment;

/**
 * Where an {@link IpoibInterface} exchanges IP packets with the host's IP stack: a {@link TunDevice} in the
 * daemon; an in-memory port in tests that need no root. Reads are serialised by the caller (one at a time, from
 * either data-path thread), one thread waits in {@link #awaitReadable}, one thread writes, and
 * {@link #writeControl} may write from another.
 */
public interface PacketPort extends AutoCloseable {
    /** {@return the interface name} */
    String name();

    /**
     * Reads one IP packet from the stack, waiting at most {@code timeoutMs}.
     *
     * @param into      where the packet goes (its size is the interface MTU)
     * @param timeoutMs how long to wait
     * @return the packet length, 0 if none came in time, -1 once closed
     * @throws IOException on a read error
     */
    int read(MemorySegment into, int timeoutMs) throws IOException;

    /**
     * Waits until a packet can be read, at most {@code timeoutMs}, without reading it: a thread waits here outside
     * the lock under which whoever reads (this thread, or one that also writes) calls {@link #read} with timeout 0.
     *
     * @param timeoutMs how long to wait
     * @return whether a packet waits (or the port was closed: the next read returns -1)
     * @throws IOException on a wait error
     */
    boolean awaitReadable(int timeoutMs) throws IOException;

    /**
     * Hands one IP packet to the stack.
     *
     * @param packet a segment holding it at offset 0
     * @param length its length
     * @return false if the stack did not take it (counted by the caller as a drop)
     * @throws IOException on another error
     */
    boolean write(MemorySegment packet, int length) throws IOException;

    /**
     * Hands a packet the interface makes itself (ICMP) to the stack from the transmit thread, while the
     * receive thread may be in {@link #write}: the default is {@link #write}, for ports that allow that.
     *
     * @param packet a segment holding it at offset 0
     * @param length its length
     * @return false if the stack did not take it
     * @throws IOException on another error
     */
    default boolean writeControl(MemorySegment packet, int length) throws IOException {
        return write(packet, length);
    }

    /** Releases the port; a reader waiting in {@link #read} returns -1 within its timeout. */
    @Override
    void close();
}
