// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools.impair;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.channels.ClosedChannelException;

import org.rdma4j.libc.Errors;
import org.rdma4j.libc.Libc;
import org.rdma4j.libc.NativeFd;

/**
 * One netfilter queue (nfnetlink_queue), spoken to directly over a netlink socket: the packets an
 * {@code iptables ... -j NFQUEUE --queue-num N} rule queues come to {@link #receive} with their
 * payload, and each waits in the kernel until {@link Sender#verdict} accepts it (possibly with a new
 * payload) or drops it, in any order. Messages as in {@code linux/netfilter/nfnetlink_queue.h}.
 * Needs CAP_NET_ADMIN; the queue belongs to the network namespace of the thread that opens it.
 *
 * <p>The queue is configured to copy whole packets and to let the kernel cut GSO packets into their
 * segments first (no {@code NFQA_CFG_F_GSO}), so each RoCE packet of a UDP GSO train is queued, and
 * impaired, on its own, with the IPv4 ID the segmentation gave it. Verdicts may be sent from several
 * threads, each with its own {@link Sender}; one thread receives.
 */
public final class NfQueue implements AutoCloseable {
    static final int AF_NETLINK = 16;
    static final int NETLINK_NETFILTER = 12;
    static final int SOL_NETLINK = 270;
    static final int NETLINK_NO_ENOBUFS = 5;
    static final int NLMSG_ERROR = 2;
    static final int NLM_F_REQUEST = 1;
    static final int NLM_F_ACK = 4;
    static final int NFNL_SUBSYS_QUEUE = 3;
    static final int NFQNL_MSG_PACKET = 0;
    static final int NFQNL_MSG_VERDICT = 1;
    static final int NFQNL_MSG_CONFIG = 2;
    static final int NFQA_PACKET_HDR = 1;
    static final int NFQA_VERDICT_HDR = 2;
    static final int NFQA_MARK = 3;
    static final int NFQA_PAYLOAD = 10;
    static final int NFQA_CFG_CMD = 1;
    static final int NFQA_CFG_PARAMS = 2;
    static final int NFQA_CFG_QUEUE_MAXLEN = 3;
    static final int NFQNL_CFG_CMD_BIND = 1;
    static final int NFQNL_COPY_PACKET = 2;
    /** Verdicts (linux/netfilter.h). */
    static final int NF_DROP = 0;
    static final int NF_ACCEPT = 1;

    private static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED;
    private static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT_UNALIGNED;
    private static final ValueLayout.OfInt BE32 = U32.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfShort BE16 = U16.withOrder(ByteOrder.BIG_ENDIAN);

    /** A queued packet, valid until the next {@link #receive}. */
    public static final class Packet {
        /** An empty packet, filled by {@link #receive}. */
        public Packet() {
        }

        /** The kernel's id of the packet, for the verdict. */
        public int id;
        /** Its netfilter mark (0 if none). */
        public int mark;
        /** Its bytes, from the IP header on. */
        public MemorySegment payload;
    }

    /** What receives the packets of one {@link #receive} call. */
    @FunctionalInterface
    public interface Handler {
        /**
         * Decides one queued packet.
         *
         * @param p a packet, valid only during the call
         * @throws IOException if a verdict could not be sent
         */
        void packet(Packet p) throws IOException;
    }

    private final int queue;
    private final NativeFd fd;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment rxState = Libc.newCallState(arena);
    private final MemorySegment rxBuf;
    private final Packet packet = new Packet();
    private long overruns;

    private NfQueue(int queue, int fd, int rxBytes) {
        this.queue = queue;
        this.fd = new NativeFd(fd);
        this.rxBuf = arena.allocate(rxBytes, 8);
    }

    /**
     * Binds queue {@code queue} of this thread's network namespace.
     *
     * @param queue        the queue number of the NFQUEUE rule
     * @param maxQueued    how many packets the kernel may hold waiting for a verdict (more are dropped)
     * @param socketBuffer receive buffer of the netlink socket, bytes
     * @param timeoutMs    how long {@link #receive} waits for a packet before it returns 0
     * @return the bound queue
     * @throws IOException if the socket or the binding fails (EPERM without CAP_NET_ADMIN, EBUSY when
     *                     another process has the queue)
     */
    public static NfQueue open(int queue, int maxQueued, int socketBuffer, int timeoutMs) throws IOException {
        if (queue < 0 || queue > 0xFFFF) {
            throw new IllegalArgumentException("queue " + queue + " (0..65535)");
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Libc.newCallState(a);
            int fd = Libc.socket(st, AF_NETLINK, Libc.SOCK_RAW | Libc.SOCK_CLOEXEC, NETLINK_NETFILTER);
            if (fd < 0) {
                throw Libc.error("socket(AF_NETLINK, NETLINK_NETFILTER)", st, "");
            }
            NfQueue q = new NfQueue(queue, fd, 1 << 18);
            try {
                MemorySegment addr = a.allocate(12, 4);
                addr.set(U16, 0, (short) AF_NETLINK); // nl_pid 0: the kernel assigns one
                if (Libc.bind(st, fd, addr, 12) != 0) {
                    throw Libc.error("bind(AF_NETLINK)", st, "");
                }
                MemorySegment v = a.allocate(8, 8);
                v.set(ValueLayout.JAVA_INT, 0, socketBuffer);
                if (Libc.setsockopt(st, fd, Libc.SOL_SOCKET, Libc.SO_RCVBUFFORCE, v, 4) != 0
                        && Libc.setsockopt(st, fd, Libc.SOL_SOCKET, Libc.SO_RCVBUF, v, 4) != 0) {
                    throw Libc.error("setsockopt(SO_RCVBUF)", st, "");
                }
                MemorySegment tv = a.allocate(16, 8);
                tv.set(ValueLayout.JAVA_LONG, 0, timeoutMs / 1000);
                tv.set(ValueLayout.JAVA_LONG, 8, (timeoutMs % 1000) * 1000L);
                if (Libc.setsockopt(st, fd, Libc.SOL_SOCKET, Libc.SO_RCVTIMEO, tv, 16) != 0) {
                    throw Libc.error("setsockopt(SO_RCVTIMEO)", st, "");
                }
                q.configure(a, st, maxQueued);
                return q;
            } catch (IOException | RuntimeException e) {
                q.close();
                throw e;
            }
        }
    }

    /** {@return the queue number} */
    public int queue() {
        return queue;
    }

    /** {@return times the kernel could not queue a packet message on our socket (ENOBUFS): lost packets} */
    public long overruns() {
        return overruns;
    }

    private void configure(Arena a, MemorySegment st, int maxQueued) throws IOException {
        MemorySegment m = a.allocate(256, 8);
        // bind the queue
        int len = header(m, NFQNL_MSG_CONFIG, NLM_F_REQUEST | NLM_F_ACK, 1);
        len = attr(m, len, NFQA_CFG_CMD, 4);
        m.set(ValueLayout.JAVA_BYTE, len - 4, (byte) NFQNL_CFG_CMD_BIND);
        m.set(ValueLayout.JAVA_BYTE, len - 3, (byte) 0);
        m.set(BE16, len - 2, (short) 0);
        request(a, st, m, len, "bind queue " + queue);
        // copy whole packets (struct nfqnl_msg_config_params is packed: 5 bytes)
        len = header(m, NFQNL_MSG_CONFIG, NLM_F_REQUEST | NLM_F_ACK, 2);
        int at = len;
        len = attr(m, len, NFQA_CFG_PARAMS, 5);
        m.set(BE32, at + 4, 0xFFFF);
        m.set(ValueLayout.JAVA_BYTE, at + 8, (byte) NFQNL_COPY_PACKET);
        at = len;
        len = attr(m, len, NFQA_CFG_QUEUE_MAXLEN, 4);
        m.set(BE32, at + 4, maxQueued);
        request(a, st, m, len, "configure queue " + queue);
    }

    /** Writes nlmsghdr + nfgenmsg for this queue; returns the length so far. */
    private int header(MemorySegment m, int msg, int flags, int seq) {
        m.asSlice(0, 20).fill((byte) 0);
        m.set(U16, 4, (short) (NFNL_SUBSYS_QUEUE << 8 | msg));
        m.set(U16, 6, (short) flags);
        m.set(U32, 8, seq);
        m.set(BE16, 18, (short) queue); // nfgenmsg: family AF_UNSPEC, version 0, res_id
        return 20;
    }

    /** Appends an attribute header for {@code dataLen} bytes; returns the aligned end. */
    private static int attr(MemorySegment m, int at, int type, int dataLen) {
        m.set(U16, at, (short) (4 + dataLen));
        m.set(U16, at + 2, (short) type);
        m.asSlice(at + 4, align(dataLen)).fill((byte) 0);
        return at + 4 + align(dataLen);
    }

    private static int align(int n) {
        return (n + 3) & ~3;
    }

    /** Sends a request that asks for an ACK and reads the ACK (netlink's NLMSG_ERROR, 0 = success). */
    private void request(Arena a, MemorySegment st, MemorySegment m, int len, String what) throws IOException {
        m.set(U32, 0, len);
        if (Libc.sendto(st, fd.fd(), m, len, 0, MemorySegment.NULL, 0) != len) {
            throw Libc.error("sendto(netlink)", st, what);
        }
        MemorySegment r = a.allocate(4096, 8);
        for (int tries = 0; tries < 100; tries++) {
            long n = Libc.recvfrom(st, fd.fd(), r, r.byteSize(), 0, MemorySegment.NULL, MemorySegment.NULL);
            if (n < 0) {
                throw Libc.error("recv(netlink)", st, what);
            }
            for (int off = 0; off + 16 <= n; ) {
                int mlen = r.get(U32, off);
                int type = r.get(U16, off + 4) & 0xFFFF;
                if (mlen < 16) {
                    break;
                }
                if (type == NLMSG_ERROR && r.get(U32, off + 8) == m.get(U32, 8)) {
                    int err = -r.get(U32, off + 16);
                    if (err != 0) {
                        throw Errors.newIOException("nfnetlink_queue", err, what);
                    }
                    return;
                }
                off += align(mlen);
            }
        }
        throw new IOException("nfnetlink_queue: no answer to " + what);
    }

    /**
     * Waits for queued packets (at most the timeout given to {@link #open}) and hands each to the
     * handler. Receiving thread only.
     *
     * @param h the handler
     * @return how many packets were handled; 0 on a timeout
     * @throws IOException on a socket error
     * @throws ClosedChannelException once closed
     */
    public int receive(Handler h) throws IOException {
        long n;
        fd.enter();
        try {
            n = Libc.recvfrom(rxState, fd.fd(), rxBuf, rxBuf.byteSize(), 0, MemorySegment.NULL, MemorySegment.NULL);
        } finally {
            fd.exit();
        }
        if (n < 0) {
            int e = Libc.errno(rxState);
            if (e == Errors.EAGAIN || e == Errors.EINTR) {
                return 0;
            }
            if (e == Errors.ENOBUFS) {
                overruns++; // the kernel dropped packets it could not hand us
                return 0;
            }
            throw Libc.error("recv(nfnetlink_queue)", rxState, "queue " + queue);
        }
        int handled = 0;
        for (int off = 0; off + 20 <= n; ) {
            int mlen = rxBuf.get(U32, off);
            if (mlen < 16 || off + mlen > n) {
                break;
            }
            int type = rxBuf.get(U16, off + 4) & 0xFFFF;
            if (type == (NFNL_SUBSYS_QUEUE << 8 | NFQNL_MSG_PACKET) && parse(off, mlen)) {
                h.packet(packet);
                handled++;
            }
            off += align(mlen);
        }
        return handled;
    }

    private boolean parse(int off, int mlen) {
        packet.id = -1;
        packet.mark = 0;
        packet.payload = null;
        boolean haveId = false;
        for (int a = off + 20; a + 4 <= off + mlen; ) {
            int alen = rxBuf.get(U16, a) & 0xFFFF;
            int type = rxBuf.get(U16, a + 2) & 0x3FFF; // without NLA_F_NESTED / NLA_F_NET_BYTEORDER
            if (alen < 4 || a + alen > off + mlen) {
                break;
            }
            switch (type) {
                case NFQA_PACKET_HDR -> {
                    packet.id = rxBuf.get(BE32, a + 4);
                    haveId = true;
                }
                case NFQA_MARK -> packet.mark = rxBuf.get(BE32, a + 4);
                case NFQA_PAYLOAD -> packet.payload = rxBuf.asSlice(a + 4, alen - 4);
                default -> {
                }
            }
            a += align(alen);
        }
        return haveId && packet.payload != null;
    }

    /** Sends verdicts; one per thread. */
    public final class Sender {
        private final MemorySegment st;
        private final MemorySegment msg;

        Sender(Arena a) {
            st = Libc.newCallState(a);
            msg = a.allocate(20 + 12 + 4 + 65536 + 4, 8);
        }

        /**
         * Accepts or drops a queued packet.
         *
         * @param id      the packet's id
         * @param accept  accept (true) or drop
         * @param payload the packet's new bytes (accept only), or null to leave it as it is
         * @throws IOException if the kernel refused the message
         */
        public void verdict(int id, boolean accept, MemorySegment payload) throws IOException {
            int len = header(msg, NFQNL_MSG_VERDICT, NLM_F_REQUEST, 0);
            int at = len;
            len = attr(msg, len, NFQA_VERDICT_HDR, 8);
            msg.set(BE32, at + 4, accept ? NF_ACCEPT : NF_DROP);
            msg.set(BE32, at + 8, id);
            if (payload != null) {
                at = len;
                len = attr(msg, len, NFQA_PAYLOAD, (int) payload.byteSize());
                MemorySegment.copy(payload, 0, msg, at + 4, payload.byteSize());
            }
            msg.set(U32, 0, len);
            fd.enter();
            try {
                if (Libc.sendto(st, fd.fd(), msg, len, 0, MemorySegment.NULL, 0) != len) {
                    throw Libc.error("sendto(nfnetlink_queue verdict)", st, "queue " + queue);
                }
            } finally {
                fd.exit();
            }
        }
    }

    /**
     * {@return a verdict sender for the calling thread (its buffers live as long as the queue)}
     */
    public Sender sender() {
        return new Sender(arena);
    }

    /**
     * Unbinds the queue (closing the socket does it; the kernel drops the packets still waiting for a
     * verdict). Waits for a {@link #receive} in progress to time out; call it after the threads that send
     * verdicts have stopped.
     */
    @Override
    public void close() {
        if (fd.close()) {
            arena.close();
        }
    }
}
