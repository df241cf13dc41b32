// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire.net;

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
 * A raw IPv4 socket (needs CAP_NET_RAW) in one of two roles:
 * <ul>
 * <li>{@link #openSender()}: {@code IPPROTO_RAW} (implies {@code IP_HDRINCL}); {@link #sendUdp}
 * writes the IPv4 and UDP headers itself, so the IPv4 Identification (covered by the RoCEv2
 * ICRC) is whatever the caller chose, independent of the kernel's ID policy. The kernel still
 * fills in the header checksum and total length, and replaces an ID of 0 only when DF is clear
 * ({@code raw_send_hdrinc} calls {@code ip_select_ident}, which keeps 0 for DF packets); this class
 * always sets DF, as rxe does ({@code prepare_ipv4_hdr}).</li>
 * <li>{@link #openCapture()}: {@code IPPROTO_UDP}; receives a copy of every IPv4 UDP datagram
 * delivered to this network namespace, IP header included. It lets a receiver learn the sender's
 * IPv4 ID (rxe picks a hashed one) and lets tests see what was really sent. It costs a copy of
 * all UDP traffic; {@link Ipv4IdSolver} avoids needing it.</li>
 * </ul>
 * The sending side pairs with a {@link UdpSocket} bound to the same address and port: the kernel
 * then delivers the answers to that socket, and does not send ICMP port-unreachable for them.
 * One thread at a time may send or receive; {@link #close()} may be called from any thread, also while
 * another is inside {@link #receive}: it wakes that thread and closes the descriptor only after it
 * has returned ({@link NativeFd}).
 */
public final class RawIpv4Socket implements AutoCloseable {
    /** IPv4 header (20, no options) + UDP header (8). */
    public static final int HEADER_BYTES = 28;
    private static final ValueLayout.OfShort BE16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfInt BE32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private final int fd;
    private final boolean sender;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment state;
    private final MemorySegment header;
    private final MemorySegment iov;
    private final MemorySegment msg;
    private final SockAddr dst = new SockAddr();
    private final MemorySegment pollFd;
    private final NativeFd handle;

    private RawIpv4Socket(int fd, boolean sender) {
        this.fd = fd;
        this.handle = new NativeFd(fd);
        this.sender = sender;
        this.state = Libc.newCallState(arena);
        this.header = arena.allocate(HEADER_BYTES, 8);
        this.iov = arena.allocate(2 * Libc.IOVEC_SIZE, 8);
        this.msg = arena.allocate(Libc.MSGHDR_SIZE, 8);
        this.pollFd = arena.allocate(8, 8);
        iov.set(ValueLayout.ADDRESS, 0, header);
        iov.set(ValueLayout.JAVA_LONG, 8, HEADER_BYTES);
        msg.set(ValueLayout.ADDRESS, 0, dst.seg);
        msg.set(ValueLayout.JAVA_INT, 8, 16);
        msg.set(ValueLayout.ADDRESS, 16, iov);
        msg.set(ValueLayout.JAVA_LONG, 24, 2L);
    }

    /**
     * {@return a socket that sends IPv4/UDP datagrams with caller-chosen headers}
     *
     * @throws IOException EPERM without CAP_NET_RAW, or another socket error
     */
    public static RawIpv4Socket openSender() throws IOException {
        return open(Libc.IPPROTO_RAW, true);
    }

    /**
     * {@return a socket that receives a copy of each inbound IPv4 UDP packet, IP header included}
     *
     * @throws IOException EPERM without CAP_NET_RAW, or another socket error
     */
    public static RawIpv4Socket openCapture() throws IOException {
        return open(Libc.IPPROTO_UDP, false);
    }

    private static RawIpv4Socket open(int protocol, boolean sender) throws IOException {
        MemorySegment st = Libc.newCallState(Arena.ofAuto());
        int fd = Libc.socket(st, Libc.AF_INET, Libc.SOCK_RAW | Libc.SOCK_CLOEXEC, protocol);
        if (fd < 0) {
            throw Libc.error("socket(AF_INET, SOCK_RAW, " + protocol + ")", st, "raw sockets need CAP_NET_RAW");
        }
        return new RawIpv4Socket(fd, sender);
    }

    /**
     * Asks for a receive buffer of {@code bytes} beyond {@code net.core.rmem_max} ({@code SO_RCVBUFFORCE}; a
     * capture holds copies of every IPv4 UDP packet of the namespace, and bursts of 64 KiB messages overflow
     * the default 208 KiB).
     *
     * @param bytes the buffer size to ask for
     * @throws IOException if setsockopt fails
     */
    public void setReceiveBufferForced(int bytes) throws IOException {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(ValueLayout.JAVA_INT);
            v.set(ValueLayout.JAVA_INT, 0, bytes);
            handle.enter();
            try {
                if (Libc.setsockopt(state, fd, Libc.SOL_SOCKET, Libc.SO_RCVBUFFORCE, v, 4) != 0) {
                    throw Libc.error("setsockopt(SO_RCVBUFFORCE)", state, "");
                }
            } finally {
                handle.exit();
            }
        }
    }

    /**
     * Sends one UDP datagram with the given IPv4 header fields; DF is set, fragment offset 0, no
     * options, UDP checksum 0 (allowed for IPv4 by RFC 768; rxe sends 0 too and the ICRC masks it).
     *
     * @param srcIp source address (big-endian int); must be local, the kernel does not check it
     * @param srcPort UDP source port (covered by the ICRC)
     * @param dst destination IPv4 address and UDP port
     * @param ipId the IPv4 Identification, 0..65535
     * @param tos the TOS byte (GRH traffic class)
     * @param ttl the TTL (GRH hop limit), 1..255
     * @param payload the UDP payload (RoCEv2: BTH .. ICRC), a native segment
     * @return bytes sent including the 28 header bytes
     * @throws IOException e.g. EMSGSIZE above the interface MTU
     */
    public int sendUdp(int srcIp, int srcPort, SockAddr dst, int ipId, int tos, int ttl, MemorySegment payload)
            throws IOException {
        if (!sender) {
            throw new IllegalStateException("a capture socket cannot send");
        }
        if (!dst.isIpv4()) {
            throw new IllegalArgumentException("destination " + dst + " is not IPv4");
        }
        if (!payload.isNative()) {
            throw new IllegalArgumentException("payload must be native memory");
        }
        if ((ipId & ~0xFFFF) != 0 || (tos & ~0xFF) != 0 || ttl < 1 || ttl > 255 || (srcPort & ~0xFFFF) != 0) {
            throw new IllegalArgumentException("id " + ipId + ", tos " + tos + ", ttl " + ttl + ", port " + srcPort);
        }
        long udpLen = 8 + payload.byteSize();
        if (udpLen + 20 > 0xFFFF) {
            throw new IllegalArgumentException("payload of " + payload.byteSize() + " B does not fit an IPv4 datagram");
        }
        handle.enter();
        try {
            return writeHeadersAndSend(srcIp, srcPort, dst, ipId, tos, ttl, payload, udpLen);
        } finally {
            handle.exit();
        }
    }

    private int writeHeadersAndSend(int srcIp, int srcPort, SockAddr dst, int ipId, int tos, int ttl, MemorySegment payload,
            long udpLen) throws IOException {
        header.set(ValueLayout.JAVA_BYTE, 0, (byte) 0x45);
        header.set(ValueLayout.JAVA_BYTE, 1, (byte) tos);
        header.set(BE16, 2, (short) (20 + udpLen));
        header.set(BE16, 4, (short) ipId);
        header.set(BE16, 6, (short) 0x4000); // DF, offset 0
        header.set(ValueLayout.JAVA_BYTE, 8, (byte) ttl);
        header.set(ValueLayout.JAVA_BYTE, 9, (byte) Libc.IPPROTO_UDP);
        header.set(BE16, 10, (short) 0); // the kernel computes it
        header.set(BE32, 12, srcIp);
        header.set(BE32, 16, dst.ipv4());
        header.set(BE16, 20, (short) srcPort);
        header.set(BE16, 22, (short) dst.port());
        header.set(BE16, 24, (short) udpLen);
        header.set(BE16, 26, (short) 0);
        this.dst.setIpv4(dst.ipv4(), 0);
        iov.set(ValueLayout.ADDRESS, Libc.IOVEC_SIZE, payload);
        iov.set(ValueLayout.JAVA_LONG, Libc.IOVEC_SIZE + 8, payload.byteSize());
        while (true) {
            long n = Libc.sendmsg(state, fd, msg, 0);
            if (n >= 0) {
                return (int) n;
            }
            if (Libc.errno(state) != Errors.EINTR) {
                throw Libc.error("sendmsg(raw IPv4)", state, dst.toString());
            }
        }
    }

    /**
     * Receives one captured IPv4 packet (IP header first).
     *
     * @param into native buffer
     * @param timeoutMillis how long to wait, 0 to only check
     * @return the packet length (more than {@code into.byteSize()} means it was cut), or -1 if none
     *     arrived in time
     * @throws IOException on a socket error
     */
    public int receive(MemorySegment into, long timeoutMillis) throws IOException {
        if (sender) {
            throw new IllegalStateException("an IPPROTO_RAW socket receives nothing");
        }
        handle.enter();
        try {
            return pollAndReceive(into, (int) Math.min(timeoutMillis, Integer.MAX_VALUE));
        } finally {
            handle.exit();
        }
    }

    private int pollAndReceive(MemorySegment into, int timeoutMillis) throws IOException {
        pollFd.set(ValueLayout.JAVA_INT, 0, fd);
        pollFd.set(ValueLayout.JAVA_SHORT, 4, Libc.POLLIN);
        pollFd.set(ValueLayout.JAVA_SHORT, 6, (short) 0);
        int p = Libc.poll(state, pollFd, 1, timeoutMillis);
        if (p < 0 && Libc.errno(state) != Errors.EINTR) {
            throw Libc.error("poll", state, "");
        }
        if (handle.isClosed()) {
            throw new ClosedChannelException(); // woken by close()'s shutdown
        }
        if (p <= 0) {
            return -1;
        }
        long n = Libc.recvfrom(state, fd, into, into.byteSize(), Libc.MSG_DONTWAIT | Libc.MSG_TRUNC,
                MemorySegment.NULL, MemorySegment.NULL);
        if (n < 0) {
            int e = Libc.errno(state);
            if (e == Errors.EAGAIN || e == Errors.EINTR) {
                return -1;
            }
            throw Libc.error("recvfrom(raw IPv4)", state, "");
        }
        return (int) n;
    }

    /**
     * Closes the socket: wakes a thread waiting in {@link #receive} (shutdown), waits for it to return,
     * then closes the descriptor. Idempotent.
     */
    @Override
    public void close() {
        MemorySegment st = Libc.newCallState(Arena.ofAuto());
        if (handle.close(n -> Libc.shutdown(st, n, Libc.SHUT_RDWR), NativeFd.DEFAULT_CLOSE_WAIT_NS)) {
            arena.close();
        }
    }
}
