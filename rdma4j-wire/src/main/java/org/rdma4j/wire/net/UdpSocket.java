// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire.net;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.nio.channels.ClosedChannelException;
import org.rdma4j.libc.Errors;
import org.rdma4j.libc.Libc;
import org.rdma4j.libc.NativeFd;
import org.rdma4j.wire.Roce;

/**
 * A UDP socket called through FFM (libc {@code socket}, {@code bind}, {@code sendto},
 * {@code recvfrom}, {@code sendmmsg}, {@code recvmmsg}, {@code poll}) for the RoCEv2 link.
 *
 * <p>What it adds over {@link java.nio.channels.DatagramChannel}, each needed for interop with
 * Linux rdma_rxe (measurements in docs/roce-udp.md):
 * <ul>
 * <li><b>A known IPv4 Identification.</b> The ICRC covers the IPv4 ID (RoCEv2 A17.4.5.1; rxe
 * {@code rxe_icrc_hdr} masks only TOS, TTL and checksum). An IPv4 socket is opened with
 * {@code IP_MTU_DISCOVER = IP_PMTUDISC_DO} and is never connected; Linux then writes ID 0 with DF
 * ({@code ip_select_ident_segs}: unconnected, DF and not {@code ignore_df}), which
 * {@link #ipv4Identification()} reports. A connected socket would use a per-socket counter, and
 * the default PMTU mode a hashed ID, which is why this class offers no {@code connect}.</li>
 * <li><b>Zero-checksum IPv6 receive.</b> rxe sends IPv6 UDP with checksum 0 ({@code prepare_udp_hdr}),
 * which Linux drops unless {@code UDP_NO_CHECK6_RX} is set: {@link #setZeroChecksumReceive}.</li>
 * <li>Traffic class and hop limit (the GRH fields RoCEv2 maps onto IP), receive/send into
 * native {@link MemorySegment}s with no per-packet allocation, batches, and the source address of
 * every datagram (the peer's GID).</li>
 * </ul>
 *
 * <p>Threads: one sending thread, one receiving thread and one thread waiting in {@link #awaitReadable}
 * may use a socket at the same time (each has its own native scratch). {@link #close()} may be called from any thread: it shuts the
 * socket down first, which wakes a receiver blocked in {@link #receive} or {@link #awaitReadable},
 * and closes the descriptor only after every call in progress has returned, so a descriptor
 * number is never used after the kernel could reuse it.
 */
public final class UdpSocket implements AutoCloseable {
    private final int fd;
    /** The descriptor's use count: it is closed only after every call in progress has returned. */
    private final NativeFd handle;
    private final boolean ipv6;
    private final SockAddr local;
    private final Arena arena = Arena.ofShared();
    /** errno capture, one per side so sender, receiver and waiter threads never share one. */
    private final MemorySegment sendState;
    private final MemorySegment recvState;
    private final MemorySegment pollState;
    private final MemorySegment optState;
    private final MemorySegment addrLen;
    private final MemorySegment pollFd;
    private final MemorySegment optVal;
    private volatile boolean blocking = true;
    private volatile boolean dontFragment;

    private UdpSocket(int fd, boolean ipv6, MemorySegment st) {
        this.fd = fd;
        this.handle = new NativeFd(fd);
        this.ipv6 = ipv6;
        this.sendState = Libc.newCallState(arena);
        this.recvState = Libc.newCallState(arena);
        this.pollState = Libc.newCallState(arena);
        this.optState = st;
        this.addrLen = arena.allocate(ValueLayout.JAVA_INT);
        this.pollFd = arena.allocate(8, 8);
        this.optVal = arena.allocate(32, 8);
        this.local = new SockAddr();
    }

    /**
     * Opens a blocking UDP socket bound to {@code address} and the RoCEv2 port 4791 (A17.4.2).
     *
     * @param address a local IPv4 or IPv6 address
     * @return the socket
     * @throws IOException if the socket cannot be created or bound (EADDRINUSE when rdma_rxe is
     *     loaded in this network namespace: its kernel socket owns 4791)
     */
    public static UdpSocket open(InetAddress address) throws IOException {
        return open(address, Roce.UDP_PORT);
    }

    /**
     * Opens a blocking UDP socket bound to {@code address:port}, with DF on (IPv4: ID 0, see the class
     * comment) and, for IPv6, {@code IPV6_V6ONLY}.
     *
     * @param address a local IPv4 or IPv6 address; a wildcard works but then a receiver cannot
     *     tell which local address (the ICRC's destination) a datagram was sent to
     * @param port the UDP port: {@code Roce.UDP_PORT} (4791) to talk to rxe, 0 for any free port
     * @return the socket
     * @throws IOException if the socket cannot be created or bound, with the errno (e.g. EADDRINUSE)
     */
    public static UdpSocket open(InetAddress address, int port) throws IOException {
        return open(SockAddr.of(address, port));
    }

    /**
     * {@return a blocking, bound socket (see {@link #open(InetAddress, int)})}
     *
     * @param bindAddress the local address and port (port 0 for any)
     * @throws IOException if the socket cannot be created or bound
     */
    public static UdpSocket open(SockAddr bindAddress) throws IOException {
        boolean v6 = bindAddress.isIpv6();
        if (!v6 && !bindAddress.isIpv4()) {
            throw new IllegalArgumentException("no bind address");
        }
        Arena tmp = Arena.ofAuto();
        MemorySegment st = Libc.newCallState(tmp);
        int fd = Libc.socket(st, v6 ? Libc.AF_INET6 : Libc.AF_INET, Libc.SOCK_DGRAM | Libc.SOCK_CLOEXEC, Libc.IPPROTO_UDP);
        if (fd < 0) {
            throw Libc.error("socket(" + (v6 ? "AF_INET6" : "AF_INET") + ", SOCK_DGRAM)", st, "");
        }
        UdpSocket s = new UdpSocket(fd, v6, st);
        try {
            if (v6) {
                s.setInt(Libc.IPPROTO_IPV6, Libc.IPV6_V6ONLY, 1, "IPV6_V6ONLY");
            }
            s.setDontFragment(true);
            if (Libc.bind(st, fd, bindAddress.seg, bindAddress.length()) != 0) {
                throw Libc.error("bind", st, bindAddress.toString());
            }
            MemorySegment len = s.arena.allocate(ValueLayout.JAVA_INT);
            len.set(ValueLayout.JAVA_INT, 0, Libc.SOCKADDR_SIZE);
            if (Libc.getsockname(st, fd, s.local.seg, len) != 0) {
                throw Libc.error("getsockname", st, "");
            }
        } catch (IOException | RuntimeException e) {
            s.close();
            throw e;
        }
        return s;
    }

    /**
     * Opens a socket that receives a multicast group's datagrams: {@code SO_REUSEADDR} (several devices of
     * one host may join the same group), bound to {@code group:port} (a socket bound to a unicast address
     * does not see multicast datagrams), {@code IP_MULTICAST_ALL} off (it receives only while it is itself
     * a member), and joined to the group on the interface that owns {@code iface}
     * ({@code IP_ADD_MEMBERSHIP} / {@code IPV6_JOIN_GROUP}).
     *
     * @param group a multicast address
     * @param port  the UDP port
     * @param iface a local address naming the interface to join on
     * @return the bound, joined socket
     * @throws IOException if a call fails, with its errno
     */
    public static UdpSocket openGroup(InetAddress group, int port, InetAddress iface) throws IOException {
        if (!group.isMulticastAddress()) {
            throw new IllegalArgumentException(group + " is not a multicast address");
        }
        SockAddr bindAddress = SockAddr.of(group, port);
        boolean v6 = bindAddress.isIpv6();
        Arena tmp = Arena.ofAuto();
        MemorySegment st = Libc.newCallState(tmp);
        int fd = Libc.socket(st, v6 ? Libc.AF_INET6 : Libc.AF_INET, Libc.SOCK_DGRAM | Libc.SOCK_CLOEXEC, Libc.IPPROTO_UDP);
        if (fd < 0) {
            throw Libc.error("socket(" + (v6 ? "AF_INET6" : "AF_INET") + ", SOCK_DGRAM)", st, "");
        }
        UdpSocket s = new UdpSocket(fd, v6, st);
        try {
            s.setInt(Libc.SOL_SOCKET, Libc.SO_REUSEADDR, 1, "SO_REUSEADDR");
            // only the groups this socket joined: by default Linux gives a socket bound to a group address
            // that group's datagrams whenever any socket of the host joined it on the interface
            if (v6) {
                s.setInt(Libc.IPPROTO_IPV6, Libc.IPV6_V6ONLY, 1, "IPV6_V6ONLY");
                s.setInt(Libc.IPPROTO_IPV6, Libc.IPV6_MULTICAST_ALL, 0, "IPV6_MULTICAST_ALL");
            } else {
                s.setInt(Libc.IPPROTO_IP, Libc.IP_MULTICAST_ALL, 0, "IP_MULTICAST_ALL");
            }
            if (Libc.bind(st, fd, bindAddress.seg, bindAddress.length()) != 0) {
                throw Libc.error("bind", st, bindAddress.toString());
            }
            s.local.set(bindAddress);
            s.membership(group, iface, true);
        } catch (IOException | RuntimeException e) {
            s.close();
            throw e;
        }
        return s;
    }

    /**
     * Joins or leaves a multicast group on the interface owning {@code iface}.
     *
     * @param group multicast address, of this socket's family
     * @param iface a local address of the interface
     * @param join  true for IP_ADD_MEMBERSHIP / IPV6_JOIN_GROUP, false to drop it
     * @throws IOException if setsockopt fails
     */
    public synchronized void membership(InetAddress group, InetAddress iface, boolean join) throws IOException {
        byte[] g = group.getAddress();
        if ((g.length == 16) != ipv6) {
            throw new IllegalArgumentException(group + " is not of this socket's family");
        }
        optVal.fill((byte) 0);
        if (!ipv6) {
            // struct ip_mreq { struct in_addr imr_multiaddr; struct in_addr imr_interface; }
            MemorySegment.copy(g, 0, optVal, ValueLayout.JAVA_BYTE, 0, 4);
            MemorySegment.copy(iface.getAddress(), 0, optVal, ValueLayout.JAVA_BYTE, 4, 4);
            setRaw(Libc.IPPROTO_IP, join ? Libc.IP_ADD_MEMBERSHIP : Libc.IP_DROP_MEMBERSHIP, 8,
                    join ? "IP_ADD_MEMBERSHIP " + group : "IP_DROP_MEMBERSHIP " + group);
        } else {
            // struct ipv6_mreq { struct in6_addr ipv6mr_multiaddr; unsigned int ipv6mr_interface; }
            MemorySegment.copy(g, 0, optVal, ValueLayout.JAVA_BYTE, 0, 16);
            optVal.set(ValueLayout.JAVA_INT, 16, interfaceIndex(iface));
            setRaw(Libc.IPPROTO_IPV6, join ? Libc.IPV6_JOIN_GROUP : Libc.IPV6_LEAVE_GROUP, 20,
                    join ? "IPV6_JOIN_GROUP " + group : "IPV6_LEAVE_GROUP " + group);
        }
    }

    /**
     * Sends multicast datagrams out of the interface owning {@code iface} (IP_MULTICAST_IF /
     * IPV6_MULTICAST_IF) rather than the one the routing table picks for the group.
     *
     * @param iface a local address of this socket's family
     * @throws IOException if setsockopt fails
     */
    public synchronized void setMulticastInterface(InetAddress iface) throws IOException {
        byte[] a = iface.getAddress();
        if ((a.length == 16) != ipv6) {
            throw new IllegalArgumentException(iface + " is not of this socket's family");
        }
        optVal.fill((byte) 0);
        if (!ipv6) {
            MemorySegment.copy(a, 0, optVal, ValueLayout.JAVA_BYTE, 0, 4); // struct in_addr
            setRaw(Libc.IPPROTO_IP, Libc.IP_MULTICAST_IF, 4, "IP_MULTICAST_IF " + iface);
        } else {
            setInt(Libc.IPPROTO_IPV6, Libc.IPV6_MULTICAST_IF, interfaceIndex(iface), "IPV6_MULTICAST_IF " + iface);
        }
    }

    private static int interfaceIndex(InetAddress iface) throws IOException {
        java.net.NetworkInterface ni = java.net.NetworkInterface.getByInetAddress(iface);
        return ni == null ? 0 : ni.getIndex(); // 0: the kernel picks by route
    }

    /** {@return true for an AF_INET6 socket} */
    public boolean isIpv6() {
        return ipv6;
    }

    /** {@return the bound address and the real port (a copy)} */
    public SockAddr localAddress() {
        return new SockAddr().set(local);
    }

    /** {@return the bound port (the kernel's choice if 0 was asked for)} */
    public int localPort() {
        return local.port();
    }

    /**
     * The IPv4 Identification the kernel writes into this socket's datagrams, as the ICRC needs it.
     *
     * @return 0 for an IPv4 socket with DF on (the default; Linux {@code ip_select_ident_segs} uses 0
     *     for unconnected DF datagrams, measured in docs/roce-udp.md), -1 when the kernel picks a
     *     varying ID (DF off) or for IPv6 (which has no ID)
     */
    public int ipv4Identification() {
        return !ipv6 && dontFragment ? 0 : -1;
    }

    // ------------------------------------------------------------------------------------ options

    /**
     * Blocking mode: receives wait (bounded by {@link #setReceiveTimeout}); non-blocking: receives
     * and sends return -1 / 0 at once when nothing can be done.
     *
     * @param on true for blocking (the default)
     * @throws IOException if fcntl fails
     */
    public synchronized void setBlocking(boolean on) throws IOException {
        enter();
        try {
            int fl = Libc.fcntl(optState, fd, Libc.F_GETFL, 0);
            if (fl < 0) {
                throw Libc.error("fcntl(F_GETFL)", optState, "");
            }
            int nfl = on ? fl & ~Libc.O_NONBLOCK : fl | Libc.O_NONBLOCK;
            if (Libc.fcntl(optState, fd, Libc.F_SETFL, nfl) < 0) {
                throw Libc.error("fcntl(F_SETFL)", optState, "");
            }
            blocking = on;
        } finally {
            exit();
        }
    }

    /** {@return true in blocking mode} */
    public boolean isBlocking() {
        return blocking;
    }

    /**
     * Bounds how long a blocking receive waits (SO_RCVTIMEO), so a receive thread notices a stop
     * request within that time. 0 waits forever (the default; {@link #close()} still wakes it).
     *
     * @param millis 0 or more
     * @throws IOException if setsockopt fails
     */
    public synchronized void setReceiveTimeout(long millis) throws IOException {
        if (millis < 0) {
            throw new IllegalArgumentException("timeout " + millis + " ms (expected >= 0)");
        }
        optVal.set(ValueLayout.JAVA_LONG, 0, millis / 1000);
        optVal.set(ValueLayout.JAVA_LONG, 8, (millis % 1000) * 1000);
        setRaw(Libc.SOL_SOCKET, Libc.SO_RCVTIMEO, 16, "SO_RCVTIMEO");
    }

    /**
     * Turns DF on or off. On (the default): IPv4 {@code IP_PMTUDISC_DO}, which also gives ID 0
     * ({@link #ipv4Identification()}); IPv6 {@code IPV6_PMTUDISC_DO}. A datagram larger than the
     * path MTU then fails with EMSGSIZE instead of being fragmented; rxe never fragments either
     * ({@code prepare_ipv4_hdr} sets DF). Off: {@code IP_PMTUDISC_WANT}, the Linux default.
     *
     * @param on true for DF
     * @throws IOException if setsockopt fails
     */
    public synchronized void setDontFragment(boolean on) throws IOException {
        int mode = on ? Libc.IP_PMTUDISC_DO : Libc.IP_PMTUDISC_WANT;
        if (ipv6) {
            setInt(Libc.IPPROTO_IPV6, Libc.IPV6_MTU_DISCOVER, mode, "IPV6_MTU_DISCOVER");
        } else {
            setInt(Libc.IPPROTO_IP, Libc.IP_MTU_DISCOVER, mode, "IP_MTU_DISCOVER");
        }
        dontFragment = on;
    }

    /**
     * Sets the IPv4 TOS / IPv6 traffic class of sent datagrams (the RoCE GRH traffic class:
     * DSCP in the upper 6 bits, ECN in the lower 2).
     *
     * @param trafficClass 0..255
     * @throws IOException if setsockopt fails
     */
    public synchronized void setTrafficClass(int trafficClass) throws IOException {
        checkByte(trafficClass, "traffic class");
        if (ipv6) {
            setInt(Libc.IPPROTO_IPV6, Libc.IPV6_TCLASS, trafficClass, "IPV6_TCLASS");
        } else {
            setInt(Libc.IPPROTO_IP, Libc.IP_TOS, trafficClass, "IP_TOS");
        }
    }

    /**
     * Sets the IPv4 TTL / IPv6 hop limit of sent datagrams (the RoCE GRH hop limit).
     *
     * @param hopLimit 1..255
     * @throws IOException if setsockopt fails
     */
    public synchronized void setHopLimit(int hopLimit) throws IOException {
        if (hopLimit < 1 || hopLimit > 255) {
            throw new IllegalArgumentException("hop limit " + hopLimit + " (expected 1..255)");
        }
        if (ipv6) {
            setInt(Libc.IPPROTO_IPV6, Libc.IPV6_UNICAST_HOPS, hopLimit, "IPV6_UNICAST_HOPS");
        } else {
            setInt(Libc.IPPROTO_IP, Libc.IP_TTL, hopLimit, "IP_TTL");
        }
    }

    /**
     * Accepts IPv6 UDP datagrams whose checksum is 0 ({@code UDP_NO_CHECK6_RX}). rxe sends RoCEv2
     * over IPv6 with checksum 0 ({@code prepare_udp_hdr}); Linux drops those by default (RFC 8200
     * requires a checksum; RFC 6936 allows the exception per socket). Integrity then rests on the
     * ICRC, which the receiver must check.
     *
     * @param on true to accept them
     * @throws IOException if setsockopt fails
     * @throws IllegalStateException on an IPv4 socket (IPv4 always accepts checksum 0)
     */
    public synchronized void setZeroChecksumReceive(boolean on) throws IOException {
        requireIpv6("UDP_NO_CHECK6_RX");
        setInt(Libc.SOL_UDP, Libc.UDP_NO_CHECK6_RX, on ? 1 : 0, "UDP_NO_CHECK6_RX");
    }

    /**
     * Sends UDP with checksum 0, as rxe does for both families: IPv6 {@code UDP_NO_CHECK6_TX}, IPv4
     * {@code SO_NO_CHECK} (RFC 768 allows 0 for IPv4). Off by default: a Linux receiver without
     * {@code UDP_NO_CHECK6_RX} drops such IPv6 datagrams, and rxe's own socket accepts both. Linux refuses
     * UDP GSO on such a socket (EINVAL).
     *
     * @param on true to send checksum 0
     * @throws IOException if setsockopt fails
     */
    public synchronized void setZeroChecksumSend(boolean on) throws IOException {
        if (ipv6) {
            setInt(Libc.SOL_UDP, Libc.UDP_NO_CHECK6_TX, on ? 1 : 0, "UDP_NO_CHECK6_TX");
        } else {
            setInt(Libc.SOL_SOCKET, Libc.SO_NO_CHECK, on ? 1 : 0, "SO_NO_CHECK");
        }
    }

    /**
     * Lets the kernel coalesce datagrams of one flow into one receive ({@code UDP_GRO}, Linux 5.0+): a
     * {@link #receiveBatch} slot may then hold several equal-sized datagrams back to back (the last may be
     * shorter), and {@link DatagramBatch#segmentSize} tells their size. Slots should hold 64 KiB, or a
     * coalesced receive is cut ({@link DatagramBatch#truncated}). The datagrams that a sender's UDP GSO
     * send made reach such a socket on loopback as the one buffer the sender wrote.
     *
     * @param on true to receive coalesced
     * @throws IOException if setsockopt fails (ENOPROTOOPT before Linux 5.0)
     */
    public synchronized void setGroReceive(boolean on) throws IOException {
        setInt(Libc.SOL_UDP, Libc.UDP_GRO, on ? 1 : 0, "UDP_GRO");
    }

    /**
     * Sets the receive buffer size.
     *
     * @param bytes SO_RCVBUF (the kernel doubles it and caps it at net.core.rmem_max)
     * @throws IOException if setsockopt fails
     */
    public synchronized void setReceiveBufferSize(int bytes) throws IOException {
        setInt(Libc.SOL_SOCKET, Libc.SO_RCVBUF, bytes, "SO_RCVBUF");
    }

    /**
     * Asks for buffers of at least this size beyond {@code net.core.rmem_max}/{@code wmem_max} where the
     * process may ({@code SO_RCVBUFFORCE}/{@code SO_SNDBUFFORCE}, CAP_NET_ADMIN), else as far as the
     * limits allow: a RoCE receiver must absorb a whole RC window of MTU-sized packets, and the default
     * limit (208 KiB) holds fewer than 52 of 4 KiB.
     *
     * @param receive receive buffer bytes
     * @param send    send buffer bytes
     * @return the receive buffer size the kernel granted (it doubles what was asked, as socket(7) says)
     * @throws IOException if even the plain options fail
     */
    public synchronized int setBufferSizesForced(int receive, int send) throws IOException {
        try {
            setInt(Libc.SOL_SOCKET, Libc.SO_RCVBUFFORCE, receive, "SO_RCVBUFFORCE");
            setInt(Libc.SOL_SOCKET, Libc.SO_SNDBUFFORCE, send, "SO_SNDBUFFORCE");
        } catch (IOException notPermitted) {
            setInt(Libc.SOL_SOCKET, Libc.SO_RCVBUF, receive, "SO_RCVBUF");
            setInt(Libc.SOL_SOCKET, Libc.SO_SNDBUF, send, "SO_SNDBUF");
        }
        return getIntOption(Libc.SOL_SOCKET, Libc.SO_RCVBUF);
    }

    /**
     * Sets the send buffer size.
     *
     * @param bytes SO_SNDBUF (the kernel doubles it and caps it at net.core.wmem_max)
     * @throws IOException if setsockopt fails
     */
    public synchronized void setSendBufferSize(int bytes) throws IOException {
        setInt(Libc.SOL_SOCKET, Libc.SO_SNDBUF, bytes, "SO_SNDBUF");
    }

    /**
     * Reads an integer socket option (for tests and diagnostics).
     *
     * @param level e.g. 17 (SOL_UDP)
     * @param name e.g. 102 (UDP_NO_CHECK6_RX)
     * @return its value
     * @throws IOException if getsockopt fails
     */
    public synchronized int getIntOption(int level, int name) throws IOException {
        enter();
        try {
            MemorySegment len = optVal.asSlice(8, 4);
            len.set(ValueLayout.JAVA_INT, 0, 4);
            if (Libc.getsockopt(optState, fd, level, name, optVal, len) != 0) {
                throw Libc.error("getsockopt(" + level + ", " + name + ")", optState, "");
            }
            return optVal.get(ValueLayout.JAVA_INT, 0);
        } finally {
            exit();
        }
    }

    private void requireIpv6(String what) {
        if (!ipv6) {
            throw new IllegalStateException(what + " applies to IPv6 sockets only");
        }
    }

    private static void checkByte(int v, String what) {
        if (v < 0 || v > 255) {
            throw new IllegalArgumentException(what + " " + v + " (expected 0..255)");
        }
    }

    private void setInt(int level, int name, int value, String what) throws IOException {
        optVal.set(ValueLayout.JAVA_INT, 0, value);
        setRaw(level, name, 4, what);
    }

    private void setRaw(int level, int name, int len, String what) throws IOException {
        enter();
        try {
            if (Libc.setsockopt(optState, fd, level, name, optVal, len) != 0) {
                throw Libc.error("setsockopt(" + what + ")", optState, "");
            }
        } finally {
            exit();
        }
    }

    // ------------------------------------------------------------------------------------ data path

    /**
     * Sends one datagram.
     *
     * @param data a native segment; all of it is sent
     * @param to the destination, of this socket's family
     * @return the bytes sent, or -1 if the socket is non-blocking and the send buffer is full
     * @throws IOException on any other error (e.g. EMSGSIZE above the path MTU with DF on)
     */
    public int send(MemorySegment data, SockAddr to) throws IOException {
        requireNative(data);
        requireFamily(to);
        enter();
        try {
            while (true) {
                long n = Libc.sendto(sendState, fd, data, data.byteSize(), 0, to.seg, to.length());
                if (n >= 0) {
                    return (int) n;
                }
                int e = Libc.errno(sendState);
                if (e == Errors.EAGAIN) {
                    return -1;
                }
                if (e != Errors.EINTR) {
                    throw Libc.error("sendto", sendState, to.toString());
                }
            }
        } finally {
            exit();
        }
    }

    /**
     * Receives one datagram and its source address.
     *
     * @param into a native segment, written from offset 0
     * @param from overwritten with the datagram's source address and port
     * @return the datagram's full length (more than {@code into.byteSize()} means it was cut to
     *     fit), or -1 if none arrived: non-blocking mode, or the receive timeout expired
     * @throws ClosedChannelException if the socket is (being) closed
     * @throws IOException on any other error
     */
    public int receive(MemorySegment into, SockAddr from) throws IOException {
        requireNative(into);
        enter();
        try {
            while (true) {
                addrLen.set(ValueLayout.JAVA_INT, 0, Libc.SOCKADDR_SIZE);
                long n = Libc.recvfrom(recvState, fd, into, into.byteSize(), Libc.MSG_TRUNC, from.seg, addrLen);
                if (n >= 0) {
                    if (n == 0 && handle.isClosed()) {
                        throw new ClosedChannelException(); // woken by close()'s shutdown
                    }
                    return (int) n;
                }
                int e = Libc.errno(recvState);
                if (e == Errors.EAGAIN) {
                    return -1;
                }
                if (e != Errors.EINTR) {
                    throw Libc.error("recvfrom", recvState, "");
                }
            }
        } finally {
            exit();
        }
    }

    /**
     * Sends slots [0, count) of a batch with one {@code sendmmsg}.
     *
     * @param batch lengths and destination addresses set per slot
     * @param count 1..batch.capacity()
     * @return how many were sent (the first ones); 0 if non-blocking and the buffer is full
     * @throws IOException if the first datagram fails (a later failure shows as a short count)
     */
    public int sendBatch(DatagramBatch batch, int count) throws IOException {
        return sendBatch(batch, 0, count);
    }

    /**
     * Sends slots [first, first + count) of a batch with one {@code sendmmsg}; a slot with a
     * {@link DatagramBatch#setSegmentSize segment size} leaves as that many datagrams (UDP GSO).
     *
     * @param batch lengths, destination addresses and segment sizes set per slot
     * @param first the first slot to send
     * @param count 1..batch.capacity() - first
     * @return how many slots were sent (the first ones); 0 if non-blocking and the buffer is full
     * @throws IOException if the first slot fails (a later failure shows as a short count); a GSO slot the
     *     kernel refuses fails with EINVAL (e.g. IPv6 with {@link #setZeroChecksumSend}, more than 64
     *     segments) or EIO (no checksum offload on the route)
     */
    public int sendBatch(DatagramBatch batch, int first, int count) throws IOException {
        if (first < 0 || count < 1 || first + count > batch.capacity()) {
            throw new IllegalArgumentException("slots [" + first + ", +" + count + ") (batch holds " + batch.capacity() + ")");
        }
        for (int i = first; i < first + count; i++) {
            requireFamily(batch.address(i));
        }
        batch.prepareSend(first, count);
        MemorySegment vec = first == 0 ? batch.msgs : batch.msgs.asSlice(Libc.MMSGHDR_SIZE * first);
        enter();
        try {
            while (true) {
                int n = Libc.sendmmsg(sendState, fd, vec, count, 0);
                if (n >= 0) {
                    return n;
                }
                int e = Libc.errno(sendState);
                if (e == Errors.EAGAIN) {
                    return 0;
                }
                if (e != Errors.EINTR) {
                    throw Libc.error("sendmmsg", sendState, batch.address(first).toString());
                }
            }
        } finally {
            exit();
        }
    }

    /**
     * Receives up to {@code batch.capacity()} datagrams with one {@code recvmmsg}. In blocking mode
     * it waits (bounded by the receive timeout) for the first, then takes what is already queued
     * (MSG_WAITFORONE).
     *
     * @param batch slots to fill: {@link DatagramBatch#length}, {@link DatagramBatch#address},
     *     {@link DatagramBatch#truncated}
     * @return how many slots were filled, 0 if none arrived
     * @throws ClosedChannelException if the socket is (being) closed
     * @throws IOException on any other error
     */
    public int receiveBatch(DatagramBatch batch) throws IOException {
        return receiveBatch(batch, Libc.MSG_WAITFORONE);
    }

    /**
     * Receives what is already queued, up to {@code batch.capacity()} datagrams, without waiting
     * ({@code recvmmsg} with {@code MSG_DONTWAIT}), whatever the socket's blocking mode: for a thread
     * that busy-polls.
     *
     * @param batch slots to fill
     * @return how many slots were filled, 0 if nothing was queued
     * @throws ClosedChannelException if the socket is (being) closed
     * @throws IOException on any other error
     */
    public int receiveBatchNow(DatagramBatch batch) throws IOException {
        return receiveBatch(batch, Libc.MSG_DONTWAIT);
    }

    private int receiveBatch(DatagramBatch batch, int flags) throws IOException {
        int cap = batch.capacity();
        batch.prepareReceive(cap);
        enter();
        try {
            while (true) {
                int n = Libc.recvmmsg(recvState, fd, batch.msgs, cap, flags, MemorySegment.NULL);
                if (n >= 0) {
                    batch.completeReceive(n);
                    if (handle.isClosed() && (n == 0 || batch.length(0) == 0)) {
                        throw new ClosedChannelException();
                    }
                    return n;
                }
                int e = Libc.errno(recvState);
                if (e == Errors.EAGAIN) {
                    return 0;
                }
                if (e != Errors.EINTR) {
                    throw Libc.error("recvmmsg", recvState, "");
                }
            }
        } finally {
            exit();
        }
    }

    /**
     * Waits until a datagram can be received, the timeout passes, or the socket is closed.
     *
     * @param timeoutMillis 0 to check without waiting, at most {@link Integer#MAX_VALUE}
     * @return true if a receive will not block
     * @throws ClosedChannelException if the socket is (being) closed
     * @throws IOException if poll fails
     */
    public boolean awaitReadable(long timeoutMillis) throws IOException {
        if (timeoutMillis < 0) {
            throw new IllegalArgumentException("timeout " + timeoutMillis + " ms (expected >= 0)");
        }
        int ms = (int) Math.min(timeoutMillis, Integer.MAX_VALUE);
        enter();
        try {
            pollFd.set(ValueLayout.JAVA_INT, 0, fd);
            pollFd.set(ValueLayout.JAVA_SHORT, 4, Libc.POLLIN);
            pollFd.set(ValueLayout.JAVA_SHORT, 6, (short) 0);
            int n = Libc.poll(pollState, pollFd, 1, ms);
            if (n < 0) {
                if (Libc.errno(pollState) == Errors.EINTR) {
                    return false;
                }
                throw Libc.error("poll", pollState, "");
            }
            if (handle.isClosed()) {
                throw new ClosedChannelException();
            }
            return n > 0 && (pollFd.get(ValueLayout.JAVA_SHORT, 6) & Libc.POLLIN) != 0;
        } finally {
            exit();
        }
    }

    private void requireFamily(SockAddr to) {
        if (ipv6 ? !to.isIpv6() : !to.isIpv4()) {
            throw new IllegalArgumentException("destination " + to + " is not " + (ipv6 ? "IPv6" : "IPv4"));
        }
    }

    private static void requireNative(MemorySegment s) {
        if (!s.isNative()) {
            throw new IllegalArgumentException("segment must be native memory (passed to the kernel)");
        }
    }

    private void enter() throws ClosedChannelException {
        handle.enter();
    }

    private void exit() {
        handle.exit();
    }

    /** {@return true once {@link #close()} has been called} */
    public boolean isClosed() {
        return handle.isClosed();
    }

    /**
     * Shuts the socket down (waking a blocked receive or poll), waits for calls in progress to
     * return, then closes the descriptor ({@link NativeFd}). Idempotent.
     */
    @Override
    public void close() {
        MemorySegment st = Libc.newCallState(Arena.ofAuto());
        // ENOTCONN on an unconnected UDP socket is expected: the shutdown flag is still set and
        // readers are still woken (inet_shutdown), which is all this is for. Calls in progress
        // return promptly then (receives see the shutdown, sends are not blocked long on UDP).
        boolean closed = handle.close(n -> Libc.shutdown(st, n, Libc.SHUT_RDWR), NativeFd.DEFAULT_CLOSE_WAIT_NS);
        if (closed) {
            arena.close();
        }
        // else already closed, or a call is stuck in the kernel: then the descriptor and the scratch
        // memory that call may touch are left to the process rather than freed under it
    }

    @Override
    public String toString() {
        return "UdpSocket[" + local + (isClosed() ? ", closed" : "") + "]";
    }
}
