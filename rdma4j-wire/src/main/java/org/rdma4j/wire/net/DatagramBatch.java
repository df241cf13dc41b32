// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire.net;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.rdma4j.libc.Libc;

/**
 * A reusable set of datagram slots for {@link UdpSocket#sendBatch} and
 * {@link UdpSocket#receiveBatch} ({@code sendmmsg}/{@code recvmmsg}): per slot a buffer, a length
 * and a peer address, all laid out once in native memory so a batch call allocates nothing.
 *
 * <p>Each slot starts with a buffer of {@code slotSize} bytes that the batch owns;
 * {@link #setBuffer} points a slot at any other native segment instead (for example a packet
 * built in place by the engine), {@link #setSlice} at a region of one without allocating.
 *
 * <p>Segmentation offload (Linux 4.18+ UDP GSO, 5.0+ UDP GRO; udp(7)): a send slot with a
 * {@link #setSegmentSize segment size} carries a {@code UDP_SEGMENT} control message, and the kernel
 * cuts its buffer into datagrams of that size (the last may be shorter), one system call and one pass
 * down the stack for up to 64 datagrams. After a receive on a socket with
 * {@link UdpSocket#setGroReceive GRO} on, {@link #segmentSize} gives the size of the datagrams the kernel
 * coalesced into the slot (0 when it holds one datagram). Not thread-safe: one batch per thread.
 */
public final class DatagramBatch {
    private static final long MSG_NAME = 0;
    private static final long MSG_NAMELEN = 8;
    private static final long MSG_IOV = 16;
    private static final long MSG_IOVLEN = 24;
    private static final long MSG_FLAGS = 48;
    private static final long MSG_CONTROL = 32;
    private static final long MSG_CONTROLLEN = 40;
    private static final long MMSG_LEN = 56;
    /** Control bytes per slot: CMSG_SPACE(sizeof(int)) = 24 for UDP_SEGMENT / UDP_GRO, with room to spare. */
    static final int CONTROL_SPACE = 64;
    /** UDP GSO's limit on datagrams per send (linux/udp.h UDP_MAX_SEGMENTS). */
    public static final int MAX_SEGMENTS = 64;

    private final int capacity;
    final MemorySegment msgs;
    private final MemorySegment iovs;
    private final MemorySegment[] buffers;
    private final SockAddr[] addresses;
    private final int[] lengths;
    private final int[] flags;
    private final int[] segmentSizes;
    private final boolean[] sliced;
    private final MemorySegment controls;
    /**
     * Slots [0, dirty) may differ from their prepared receive state (a receive or send wrote them); the rest
     * still hold it, so a busy poller's empty receives do not rewrite every slot each time.
     */
    private int dirty;

    /**
     * Creates a batch with its buffers in native memory that the garbage collector frees once the batch is
     * unreachable ({@link Arena#ofAuto}): fine for a few long-lived batches; a batch made and dropped often, or a
     * large one (a GRO receive batch is about 1 MiB), should use {@link #DatagramBatch(Arena, int, int)}.
     *
     * @param capacity number of slots, 1..1024 (the kernel's UIO_MAXIOV caps one call at 1024)
     * @param slotSize bytes of the buffer each slot owns, at least 1
     */
    public DatagramBatch(int capacity, int slotSize) {
        this(Arena.ofAuto(), capacity, slotSize);
    }

    /**
     * Creates a batch with its buffers allocated from {@code arena}: they are freed when the arena closes, and
     * the batch must not be used after that (every access then fails with {@link IllegalStateException}, never
     * touching freed memory). A socket call on the batch needs the arena alive for the whole call: close it
     * only when no thread can be in such a call (for example under the lock its users hold).
     *
     * @param arena    where the slots, addresses, control buffers and slot buffers live; a shared arena when
     *                 more than one thread uses the batch (one at a time)
     * @param capacity number of slots, 1..1024 (the kernel's UIO_MAXIOV caps one call at 1024)
     * @param slotSize bytes of the buffer each slot owns, at least 1
     */
    public DatagramBatch(Arena arena, int capacity, int slotSize) {
        if (capacity < 1 || capacity > 1024) {
            throw new IllegalArgumentException("capacity " + capacity + " (expected 1..1024)");
        }
        if (slotSize < 1) {
            throw new IllegalArgumentException("slotSize " + slotSize + " (expected >= 1)");
        }
        java.util.Objects.requireNonNull(arena, "arena");
        this.capacity = capacity;
        this.msgs = arena.allocate(Libc.MMSGHDR_SIZE * capacity, 8);
        this.iovs = arena.allocate(Libc.IOVEC_SIZE * capacity, 8);
        MemorySegment names = arena.allocate((long) Libc.SOCKADDR_SIZE * capacity, 8);
        MemorySegment data = arena.allocate((long) slotSize * capacity, 64);
        this.buffers = new MemorySegment[capacity];
        this.addresses = new SockAddr[capacity];
        this.lengths = new int[capacity];
        this.flags = new int[capacity];
        this.segmentSizes = new int[capacity];
        this.sliced = new boolean[capacity];
        this.controls = arena.allocate((long) CONTROL_SPACE * capacity, 8);
        this.dirty = capacity;
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

    /**
     * Points slot {@code i} at {@code length} bytes of {@code base} from {@code offset} for a send, without
     * allocating a slice; also sets the slot's length. Kept until the next {@code setSlice}, {@link #setBuffer}
     * or receive (which goes back to the slot's own buffer).
     *
     * @param i      slot index
     * @param base   a native segment
     * @param offset where the datagram (or the run of GSO segments) starts
     * @param length its bytes
     */
    public void setSlice(int i, MemorySegment base, long offset, int length) {
        if (!base.isNative()) {
            throw new IllegalArgumentException("buffer must be native memory");
        }
        java.util.Objects.checkFromIndexSize(offset, length, base.byteSize());
        iovs.set(ValueLayout.JAVA_LONG, Libc.IOVEC_SIZE * i, base.address() + offset);
        sliced[i] = true;
        lengths[i] = length;
        dirty = capacity;
    }

    /**
     * Asks the kernel to cut slot {@code i}'s datagram into datagrams of {@code size} bytes (UDP GSO): all
     * of that size but the last, which may be shorter; at most {@link #MAX_SEGMENTS} of them.
     *
     * @param i    slot index
     * @param size 1..65535, or 0 for one datagram (no control message)
     */
    public void setSegmentSize(int i, int size) {
        if (size < 0 || size > 0xFFFF) {
            throw new IllegalArgumentException("segment size " + size + " (expected 0..65535)");
        }
        segmentSizes[i] = size;
    }

    /**
     * {@return after a receive with GRO on, the size of the datagrams coalesced into the slot (the last may be
     * shorter), 0 when the slot holds a single datagram; before a send, what {@link #setSegmentSize} set}
     *
     * @param i slot index
     */
    public int segmentSize(int i) {
        return segmentSizes[i];
    }

    /** {@return the number of slots} */
    public int capacity() {
        return capacity;
    }

    /**
     * {@return the slot's buffer: fill it before a send; a receive writes into it}
     *
     * @param i slot index
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
        dirty = capacity;
    }

    /**
     * {@return after a receive, the datagram's length; before a send, what {@link #setLength} set}
     *
     * @param i slot index
     */
    public int length(int i) {
        return lengths[i];
    }

    /**
     * Sets how many bytes of slot {@code i} a send takes.
     *
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
     * {@return true if the received datagram was longer than the slot's buffer and was cut (MSG_TRUNC)}
     *
     * @param i slot index
     */
    public boolean truncated(int i) {
        return (flags[i] & Libc.MSG_TRUNC) != 0;
    }

    /**
     * {@return the slot's peer: the destination of a send, the source of a received datagram}
     *
     * @param i slot index
     */
    public SockAddr address(int i) {
        return addresses[i];
    }

    /**
     * Writes lengths, address lengths and the UDP_SEGMENT control messages of slots [first, first + count)
     * before sendmmsg.
     */
    void prepareSend(int first, int count) {
        dirty = capacity;
        for (int i = first; i < first + count; i++) {
            int alen = addresses[i].length();
            if (alen == 0) {
                throw new IllegalArgumentException("slot " + i + " has no destination address");
            }
            long m = Libc.MMSGHDR_SIZE * i;
            msgs.set(ValueLayout.JAVA_INT, m + MSG_NAMELEN, alen);
            msgs.set(ValueLayout.JAVA_INT, m + MSG_FLAGS, 0);
            iovs.set(ValueLayout.JAVA_LONG, Libc.IOVEC_SIZE * i + 8, lengths[i]);
            int gso = segmentSizes[i];
            if (gso == 0) {
                msgs.set(ValueLayout.ADDRESS, m + MSG_CONTROL, MemorySegment.NULL);
                msgs.set(ValueLayout.JAVA_LONG, m + MSG_CONTROLLEN, 0L);
            } else {
                // struct cmsghdr { size_t cmsg_len = CMSG_LEN(2); int level = SOL_UDP; int type = UDP_SEGMENT; } u16
                long c = (long) CONTROL_SPACE * i;
                controls.set(ValueLayout.JAVA_LONG, c, Libc.CMSGHDR_SIZE + 2);
                controls.set(ValueLayout.JAVA_INT, c + 8, Libc.SOL_UDP);
                controls.set(ValueLayout.JAVA_INT, c + 12, Libc.UDP_SEGMENT);
                controls.set(ValueLayout.JAVA_LONG, c + 16, 0L);
                controls.set(ValueLayout.JAVA_SHORT, c + 16, (short) gso);
                msgs.set(ValueLayout.JAVA_LONG, m + MSG_CONTROL, controls.address() + c);
                msgs.set(ValueLayout.JAVA_LONG, m + MSG_CONTROLLEN, Libc.CMSGHDR_SIZE + 8); // CMSG_SPACE(2)
            }
        }
    }

    /** Resets every slot's buffer, length, address room and control room before recvmmsg. */
    void prepareReceive(int count) {
        int n = Math.min(count, dirty);
        dirty = dirty > count ? dirty : 0; // slots past count stay as they were
        for (int i = 0; i < n; i++) {
            long m = Libc.MMSGHDR_SIZE * i;
            msgs.set(ValueLayout.JAVA_INT, m + MSG_NAMELEN, Libc.SOCKADDR_SIZE);
            msgs.set(ValueLayout.JAVA_INT, m + MSG_FLAGS, 0);
            msgs.set(ValueLayout.JAVA_LONG, m + MSG_CONTROL, controls.address() + (long) CONTROL_SPACE * i);
            msgs.set(ValueLayout.JAVA_LONG, m + MSG_CONTROLLEN, (long) CONTROL_SPACE);
            if (sliced[i]) {
                iovs.set(ValueLayout.ADDRESS, Libc.IOVEC_SIZE * i, buffers[i]);
                sliced[i] = false;
            }
            iovs.set(ValueLayout.JAVA_LONG, Libc.IOVEC_SIZE * i + 8, buffers[i].byteSize());
        }
    }

    /** Reads back lengths, flags and the GRO segment size of the first {@code received} slots after recvmmsg. */
    void completeReceive(int received) {
        dirty = Math.max(dirty, received); // the kernel wrote the name length, control length and flags of these
        for (int i = 0; i < received; i++) {
            long m = Libc.MMSGHDR_SIZE * i;
            lengths[i] = msgs.get(ValueLayout.JAVA_INT, m + MMSG_LEN);
            flags[i] = msgs.get(ValueLayout.JAVA_INT, m + MSG_FLAGS);
            segmentSizes[i] = groSize(i, msgs.get(ValueLayout.JAVA_LONG, m + MSG_CONTROLLEN));
        }
    }

    /** The UDP_GRO control message's segment size among the slot's control messages, else 0. */
    private int groSize(int i, long controlLen) {
        long base = (long) CONTROL_SPACE * i;
        long end = Math.min(controlLen, CONTROL_SPACE);
        long c = 0;
        while (c + Libc.CMSGHDR_SIZE <= end) {
            long len = controls.get(ValueLayout.JAVA_LONG, base + c);
            if (len < Libc.CMSGHDR_SIZE || c + len > end) {
                return 0;
            }
            if (controls.get(ValueLayout.JAVA_INT, base + c + 8) == Libc.SOL_UDP
                    && controls.get(ValueLayout.JAVA_INT, base + c + 12) == Libc.UDP_GRO && len >= Libc.CMSGHDR_SIZE + 4) {
                int size = controls.get(ValueLayout.JAVA_INT, base + c + 16);
                return size > 0 && size < 0x10000 ? size : 0;
            }
            c += (len + 7) & ~7L; // CMSG_NXTHDR: aligned to size_t
        }
        return 0;
    }
}
