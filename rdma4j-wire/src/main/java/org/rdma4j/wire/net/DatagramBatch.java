package org.rdma4j.wire.net;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * A reusable set of datagram slots for {@link UdpSocket#sendBatch} and
 * {@link UdpSocket#receiveBatch} ({@code sendmmsg}/{@code recvmmsg}): per slot a buffer, a length
 * and a peer address, all laid out once in native memory so a batch call allocates nothing.
 *
 * <p>Each slot starts with a buffer of {@code slotSize} bytes that the batch owns;
 * {@link #setBuffer} points a slot at any other native segment instead (for example a packet
 * built in place by the engine). Not thread-safe: one batch per thread.
 */
public final class DatagramBatch {
    private static final long MSG_NAME = 0;
    private static final long MSG_NAMELEN = 8;
    private static final long MSG_IOV = 16;
    private static final long MSG_IOVLEN = 24;
    private static final long MSG_FLAGS = 48;
    private static final long MMSG_LEN = 56;

    private final int capacity;
    final MemorySegment msgs;
    private final MemorySegment iovs;
    private final MemorySegment[] buffers;
    private final SockAddr[] addresses;
    private final int[] lengths;
    private final int[] flags;

    /**
     * @param capacity number of slots, 1..1024 (the kernel's UIO_MAXIOV caps one call at 1024)
     * @param slotSize bytes of the buffer each slot owns, at least 1
     */
    public DatagramBatch(int capacity, int slotSize) {
        if (capacity < 1 || capacity > 1024) {
            throw new IllegalArgumentException("capacity " + capacity + " (expected 1..1024)");
        }
        if (slotSize < 1) {
            throw new IllegalArgumentException("slotSize " + slotSize + " (expected >= 1)");
        }
        this.capacity = capacity;
        Arena arena = Arena.ofAuto();
        this.msgs = arena.allocate(Libc.MMSGHDR_SIZE * capacity, 8);
        this.iovs = arena.allocate(Libc.IOVEC_SIZE * capacity, 8);
        MemorySegment names = arena.allocate((long) Libc.SOCKADDR_SIZE * capacity, 8);
        MemorySegment data = arena.allocate((long) slotSize * capacity, 64);
        this.buffers = new MemorySegment[capacity];
        this.addresses = new SockAddr[capacity];
        this.lengths = new int[capacity];
        this.flags = new int[capacity];
        for (int i = 0; i < capacity; i++) {
            MemorySegment name = names.asSlice((long) Libc.SOCKADDR_SIZE * i, Libc.SOCKADDR_SIZE);
            addresses[i] = new SockAddr(name);
            buffers[i] = data.asSlice((long) slotSize * i, slotSize);
            MemorySegment iov = iovs.asSlice(Libc.IOVEC_SIZE * i, Libc.IOVEC_SIZE);
            MemorySegment msg = msgs.asSlice(Libc.MMSGHDR_SIZE * i, Libc.MMSGHDR_SIZE);
            msg.set(ValueLayout.ADDRESS, MSG_NAME, name);
            msg.set(ValueLayout.ADDRESS, MSG_IOV, iov);
            msg.set(ValueLayout.JAVA_LONG, MSG_IOVLEN, 1L);
            iov.set(ValueLayout.ADDRESS, 0, buffers[i]);
        }
    }

    /** @return the number of slots */
    public int capacity() {
        return capacity;
    }

    /**
     * @param i slot index
     * @return the slot's buffer: fill it before a send; a receive writes into it
     */
    public MemorySegment buffer(int i) {
        return buffers[i];
    }

    /**
     * Points slot {@code i} at another native buffer (kept until replaced).
     *
     * @param i slot index
     * @param buffer a native segment; receives write at most its size, sends use {@link #length}
     */
    public void setBuffer(int i, MemorySegment buffer) {
        if (!buffer.isNative()) {
            throw new IllegalArgumentException("buffer must be native memory (the kernel writes into it)");
        }
        buffers[i] = buffer;
        iovs.set(ValueLayout.ADDRESS, Libc.IOVEC_SIZE * i, buffer);
    }

    /**
     * @param i slot index
     * @return after a receive, the datagram's length; before a send, what {@link #setLength} set
     */
    public int length(int i) {
        return lengths[i];
    }

    /**
     * @param i slot index
     * @param length bytes of {@link #buffer} to send, at most its size
     */
    public void setLength(int i, int length) {
        if (length < 0 || length > buffers[i].byteSize()) {
            throw new IllegalArgumentException("length " + length + " for a slot of " + buffers[i].byteSize() + " B");
        }
        lengths[i] = length;
    }

    /**
     * @param i slot index
     * @return true if the received datagram was longer than the slot's buffer and was cut (MSG_TRUNC)
     */
    public boolean truncated(int i) {
        return (flags[i] & Libc.MSG_TRUNC) != 0;
    }

    /**
     * @param i slot index
     * @return the slot's peer: the destination of a send, the source of a received datagram
     */
    public SockAddr address(int i) {
        return addresses[i];
    }

    /** Writes lengths and address lengths of slots [0, count) before sendmmsg. */
    void prepareSend(int count) {
        for (int i = 0; i < count; i++) {
            int alen = addresses[i].length();
            if (alen == 0) {
                throw new IllegalArgumentException("slot " + i + " has no destination address");
            }
            long m = Libc.MMSGHDR_SIZE * i;
            msgs.set(ValueLayout.JAVA_INT, m + MSG_NAMELEN, alen);
            msgs.set(ValueLayout.JAVA_INT, m + MSG_FLAGS, 0);
            iovs.set(ValueLayout.JAVA_LONG, Libc.IOVEC_SIZE * i + 8, lengths[i]);
        }
    }

    /** Resets every slot's buffer length and address room before recvmmsg. */
    void prepareReceive(int count) {
        for (int i = 0; i < count; i++) {
            long m = Libc.MMSGHDR_SIZE * i;
            msgs.set(ValueLayout.JAVA_INT, m + MSG_NAMELEN, Libc.SOCKADDR_SIZE);
            msgs.set(ValueLayout.JAVA_INT, m + MSG_FLAGS, 0);
            iovs.set(ValueLayout.JAVA_LONG, Libc.IOVEC_SIZE * i + 8, buffers[i].byteSize());
        }
    }

    /** Reads back lengths and flags of the first {@code received} slots after recvmmsg. */
    void completeReceive(int received) {
        for (int i = 0; i < received; i++) {
            long m = Libc.MMSGHDR_SIZE * i;
            lengths[i] = msgs.get(ValueLayout.JAVA_INT, m + MMSG_LEN);
            flags[i] = msgs.get(ValueLayout.JAVA_INT, m + MSG_FLAGS);
        }
    }
}
