// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.BlockingDeque;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingDeque;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/** An in-memory {@link PacketPort}: the test plays the IP stack (queues of packets in and out). */
final class MemoryPort implements PacketPort {
    private final String name;
    /** Packets the "stack" sends out through the interface. */
    final BlockingDeque<byte[]> toInterface = new LinkedBlockingDeque<>();
    /** Packets the interface delivered to the "stack". */
    final BlockingQueue<byte[]> fromInterface = new LinkedBlockingQueue<>();
    private volatile boolean closed;

    MemoryPort(String name) {
        this.name = name;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public int read(MemorySegment into, int timeoutMs) throws java.io.IOException {
        if (closed) {
            return -1;
        }
        try {
            byte[] p = toInterface.poll(timeoutMs, TimeUnit.MILLISECONDS);
            if (p == null) {
                return closed ? -1 : 0;
            }
            MemorySegment.copy(p, 0, into, ValueLayout.JAVA_BYTE, 0, p.length);
            return p.length;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return -1;
        }
    }

    @Override
    public boolean awaitReadable(int timeoutMs) {
        if (closed || !toInterface.isEmpty()) {
            return true;
        }
        try {
            byte[] p = toInterface.poll(timeoutMs, TimeUnit.MILLISECONDS);
            if (p == null) {
                return closed;
            }
            toInterface.putFirst(p); // back in front: awaiting does not take it
            return true;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return true;
        }
    }

    @Override
    public boolean write(MemorySegment packet, int length) {
        fromInterface.add(packet.asSlice(0, length).toArray(ValueLayout.JAVA_BYTE));
        return true;
    }

    @Override
    public void close() {
        closed = true;
    }
}
