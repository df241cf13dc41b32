// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.Inet4Address;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import org.rdma4j.libc.Errors;
import org.rdma4j.libc.Libc;
import org.rdma4j.libc.NativeFd;

/**
 * A Linux TUN interface (Documentation/networking/tuntap.rst) opened through FFM: {@code /dev/net/tun},
 * {@code ioctl(TUNSETIFF)} with {@code IFF_TUN | IFF_NO_PI} (IP packets with no extra header, layer 3:
 * there is no Ethernet, so address resolution is the daemon's job), then MTU, IPv4 address, netmask and
 * the up flag set with the {@code SIOCSIF*} ioctls on an AF_INET socket, as {@code ip link}/{@code ip addr}
 * would. Needs CAP_NET_ADMIN. The interface lives as long as the descriptor is open.
 *
 * <p>Threads: one reader, one waiter ({@link #awaitReadable}) and one writer may work at once (each has its own
 * native scratch), plus {@link #writeControl} from another thread; the descriptor is non-blocking and reads wait
 * with {@code poll}, bounded by the caller's timeout.
 */
public final class TunDevice implements PacketPort {
    /** _IOW('T', 202, int) from linux/if_tun.h. */
    static final long TUNSETIFF = 0x400454CAL;
    static final short IFF_TUN = 0x0001;
    static final short IFF_NO_PI = 0x1000;
    static final long SIOCGIFFLAGS = 0x8913;
    static final long SIOCSIFFLAGS = 0x8914;
    static final long SIOCSIFADDR = 0x8916;
    static final long SIOCSIFNETMASK = 0x891C;
    static final long SIOCSIFMTU = 0x8922;
    static final short IFF_UP = 0x1;
    static final short IFF_RUNNING = 0x40;
    /** struct ifreq: 16-byte name, then a 24-byte union (sockaddr, short flags, int mtu). */
    static final int IFREQ_SIZE = 40;
    static final int IFNAMSIZ = 16;

    private static final ValueLayout.OfShort SHORT_BE = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private final Arena arena = Arena.ofShared();
    private final int fd;
    /** The descriptor's use count: close waits for a reader or writer inside a call (bounded by its timeout). */
    private final NativeFd handle;
    private final String name;
    private final MemorySegment readState = Libc.newCallState(arena);
    private final MemorySegment writeState = Libc.newCallState(arena);
    private final MemorySegment controlState = Libc.newCallState(arena);
    private final MemorySegment pollFd = arena.allocate(8, 8);
    private final MemorySegment waitState = Libc.newCallState(arena);
    private final MemorySegment waitFd = arena.allocate(8, 8);

    private TunDevice(int fd, String name) {
        this.fd = fd;
        this.handle = new NativeFd(fd);
        this.name = name;
    }

    /**
     * Creates (or attaches to) a TUN interface.
     *
     * @param requestedName the interface name (at most 15 characters; "" lets the kernel pick tunN)
     * @return the open device, down and unconfigured
     * @throws IOException with the errno if /dev/net/tun is missing or the caller lacks CAP_NET_ADMIN
     */
    public static TunDevice open(String requestedName) throws IOException {
        byte[] nameBytes = requestedName.getBytes(StandardCharsets.US_ASCII);
        if (nameBytes.length >= IFNAMSIZ) {
            throw new IllegalArgumentException("interface name '" + requestedName + "' is longer than 15 characters");
        }
        try (Arena tmp = Arena.ofConfined()) {
            MemorySegment st = Libc.newCallState(tmp);
            int fd = Libc.open(st, tmp.allocateFrom("/dev/net/tun"), Libc.O_RDWR | Libc.O_NONBLOCK | Libc.O_CLOEXEC);
            if (fd < 0) {
                throw new IOException("open(/dev/net/tun) failed: " + Errors.describe(Libc.errno(st))
                        + " (needs the tun module and root or CAP_NET_ADMIN)");
            }
            MemorySegment ifr = tmp.allocate(IFREQ_SIZE, 8);
            MemorySegment.copy(nameBytes, 0, ifr, ValueLayout.JAVA_BYTE, 0, nameBytes.length);
            ifr.set(ValueLayout.JAVA_SHORT, IFNAMSIZ, (short) (IFF_TUN | IFF_NO_PI));
            if (Libc.ioctl(st, fd, TUNSETIFF, ifr) != 0) {
                IOException e = Libc.error("ioctl(TUNSETIFF, " + requestedName + ")", st, "");
                Libc.close(st, fd);
                throw e;
            }
            return new TunDevice(fd, ifr.getString(0, StandardCharsets.US_ASCII));
        }
    }

    /** {@return the interface name the kernel gave} */
    @Override
    public String name() {
        return name;
    }

    /**
     * Sets the MTU, the IPv4 address and prefix, and brings the interface up (SIOCSIFMTU, SIOCSIFADDR,
     * SIOCSIFNETMASK, SIOCSIFFLAGS with IFF_UP).
     *
     * @param mtu       interface MTU
     * @param address   IPv4 address
     * @param prefixLen prefix length 0..32
     * @throws IOException with the failing ioctl and its errno
     */
    public void configure(int mtu, Inet4Address address, int prefixLen) throws IOException {
        if (prefixLen < 0 || prefixLen > 32) {
            throw new IllegalArgumentException("prefix length " + prefixLen);
        }
        try (Arena tmp = Arena.ofConfined()) {
            MemorySegment st = Libc.newCallState(tmp);
            int s = Libc.socket(st, Libc.AF_INET, Libc.SOCK_DGRAM | Libc.SOCK_CLOEXEC, 0);
            if (s < 0) {
                throw Libc.error("socket(AF_INET)", st, "");
            }
            try {
                MemorySegment ifr = ifreq(tmp);
                ifr.set(ValueLayout.JAVA_INT, IFNAMSIZ, mtu);
                ioctl(tmp, st, s, SIOCSIFMTU, ifr, "SIOCSIFMTU " + mtu);
                ifr = ifreq(tmp);
                sockaddrIn(ifr, address.getAddress());
                ioctl(tmp, st, s, SIOCSIFADDR, ifr, "SIOCSIFADDR " + address.getHostAddress());
                ifr = ifreq(tmp);
                int mask = prefixLen == 0 ? 0 : -1 << (32 - prefixLen);
                sockaddrIn(ifr, new byte[] {(byte) (mask >>> 24), (byte) (mask >>> 16), (byte) (mask >>> 8), (byte) mask});
                ioctl(tmp, st, s, SIOCSIFNETMASK, ifr, "SIOCSIFNETMASK /" + prefixLen);
                ifr = ifreq(tmp);
                ioctl(tmp, st, s, SIOCGIFFLAGS, ifr, "SIOCGIFFLAGS");
                short flags = ifr.get(ValueLayout.JAVA_SHORT, IFNAMSIZ);
                ifr.set(ValueLayout.JAVA_SHORT, IFNAMSIZ, (short) (flags | IFF_UP | IFF_RUNNING));
                ioctl(tmp, st, s, SIOCSIFFLAGS, ifr, "SIOCSIFFLAGS up");
            } finally {
                Libc.close(st, s);
            }
        }
    }

    private MemorySegment ifreq(Arena tmp) {
        MemorySegment ifr = tmp.allocate(IFREQ_SIZE, 8);
        byte[] n = name.getBytes(StandardCharsets.US_ASCII);
        MemorySegment.copy(n, 0, ifr, ValueLayout.JAVA_BYTE, 0, n.length);
        return ifr;
    }

    private static void sockaddrIn(MemorySegment ifr, byte[] addr) {
        ifr.set(ValueLayout.JAVA_SHORT, IFNAMSIZ, (short) Libc.AF_INET); // sin_family, host order
        ifr.set(SHORT_BE, IFNAMSIZ + 2, (short) 0);
        MemorySegment.copy(addr, 0, ifr, ValueLayout.JAVA_BYTE, IFNAMSIZ + 4, 4);
    }

    private static void ioctl(Arena tmp, MemorySegment st, int s, long req, MemorySegment ifr, String what)
            throws IOException {
        if (Libc.ioctl(st, s, req, ifr) != 0) {
            throw Libc.error("ioctl(" + what + ")", st, "");
        }
    }

    /**
     * Reads one IP packet, waiting at most {@code timeoutMs} for one.
     *
     * @param into      a native segment at least MTU bytes long
     * @param timeoutMs how long to wait; 0 does not wait
     * @return the packet length, 0 if none arrived in time, -1 if the device is closed
     * @throws IOException on a read error
     */
    @Override
    public int read(MemorySegment into, int timeoutMs) throws IOException {
        if (!handle.tryEnter()) {
            return -1;
        }
        try {
            return readEntered(into, timeoutMs);
        } finally {
            handle.exit();
        }
    }

    /**
     * Waits with {@code poll(POLLIN)} until a packet can be read, at most {@code timeoutMs}; a reader of its own
     * (another thread may be in {@link #read} with timeout 0 meanwhile).
     *
     * @param timeoutMs how long to wait
     * @return whether the descriptor is readable, or closed
     * @throws IOException on a poll error other than EINTR
     */
    @Override
    public boolean awaitReadable(int timeoutMs) throws IOException {
        if (!handle.tryEnter()) {
            return true;
        }
        try {
            waitFd.set(ValueLayout.JAVA_INT, 0, fd);
            waitFd.set(ValueLayout.JAVA_SHORT, 4, Libc.POLLIN);
            waitFd.set(ValueLayout.JAVA_SHORT, 6, (short) 0);
            int r = Libc.poll(waitState, waitFd, 1, timeoutMs);
            if (r < 0 && Libc.errno(waitState) != Errors.EINTR) {
                throw new IOException("poll(" + name + ") failed: " + Errors.describe(Libc.errno(waitState)));
            }
            return r > 0 || handle.isClosed();
        } finally {
            handle.exit();
        }
    }

    private int readEntered(MemorySegment into, int timeoutMs) throws IOException {
        long n = Libc.read(readState, fd, into, into.byteSize());
        if (n >= 0) {
            return (int) n;
        }
        int e = Libc.errno(readState);
        if (e != Errors.EAGAIN && e != Errors.EINTR) {
            if (handle.isClosed()) {
                return -1;
            }
            throw new IOException("read(" + name + ") failed: " + Errors.describe(e));
        }
        if (timeoutMs == 0) {
            return 0;
        }
        pollFd.set(ValueLayout.JAVA_INT, 0, fd);
        pollFd.set(ValueLayout.JAVA_SHORT, 4, Libc.POLLIN);
        pollFd.set(ValueLayout.JAVA_SHORT, 6, (short) 0);
        int r = Libc.poll(readState, pollFd, 1, timeoutMs);
        if (r <= 0 || handle.isClosed()) {
            return handle.isClosed() ? -1 : 0;
        }
        n = Libc.read(readState, fd, into, into.byteSize());
        return n < 0 ? 0 : (int) n;
    }

    /**
     * Writes one IP packet to the interface (the kernel receives it as if from the wire).
     *
     * @param packet the packet
     * @param length its length
     * @return whether the kernel took it (false when its queue is full: the packet is dropped, as a NIC
     *     would drop on a full ring)
     * @throws IOException on another error
     */
    @Override
    public boolean write(MemorySegment packet, int length) throws IOException {
        return write(writeState, packet, length);
    }

    /** As {@link #write}, with its own call state, for a second writer thread (one at a time). */
    @Override
    public synchronized boolean writeControl(MemorySegment packet, int length) throws IOException {
        return write(controlState, packet, length);
    }

    private boolean write(MemorySegment state, MemorySegment packet, int length) throws IOException {
        if (length < 0 || length > packet.byteSize()) {
            throw new IndexOutOfBoundsException("length " + length + " outside a " + packet.byteSize() + "-byte segment");
        }
        if (!handle.tryEnter()) {
            return false;
        }
        long n;
        try {
            n = Libc.write(state, fd, packet, length);
        } finally {
            handle.exit();
        }
        if (n == length) {
            return true;
        }
        if (n < 0) {
            int e = Libc.errno(state);
            if (e == Errors.EAGAIN || e == Errors.EINTR) {
                return false;
            }
            if (e == Errors.EINVAL) {
                return false; // EINVAL: the kernel refused the packet as malformed; counted by the caller
            }
            throw new IOException("write(" + name + ") failed: " + Errors.describe(e));
        }
        return false;
    }

    /**
     * Closes the descriptor (the interface disappears with it) once a reader or writer inside a call has
     * returned: a reader waits at most its poll timeout, so close waits no longer than that.
     */
    @Override
    public void close() {
        if (handle.close(null, NativeFd.DEFAULT_CLOSE_WAIT_NS)) {
            arena.close();
        }
    }

    @Override
    public String toString() {
        return "tun " + name;
    }
}
