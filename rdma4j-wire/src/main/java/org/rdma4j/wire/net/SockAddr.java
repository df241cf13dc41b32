// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire.net;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteOrder;
import org.rdma4j.libc.Libc;

/**
 * A mutable IPv4 or IPv6 socket address held in native memory as a {@code sockaddr_in} /
 * {@code sockaddr_in6}, so that sends and receives pass it to the kernel without copying or
 * allocating. Receive calls overwrite it with the datagram's source; reuse one instance per
 * thread on hot paths. Not thread-safe.
 */
public final class SockAddr {
    private static final ValueLayout.OfShort FAMILY = ValueLayout.JAVA_SHORT;
    private static final ValueLayout.OfShort PORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfInt ADDR4 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfLong WORD = ValueLayout.JAVA_LONG_UNALIGNED;
    private static final int IN4_LEN = 16;
    private static final int IN6_LEN = 28;
    private static final int IN4_ADDR = 4;
    private static final int IN6_ADDR = 8;
    private static final int IN6_SCOPE = 24;

    final MemorySegment seg;

    /** An empty address (family 0) in GC-managed native memory. */
    public SockAddr() {
        this(Arena.ofAuto().allocate(Libc.SOCKADDR_SIZE, 8));
    }

    /** A view of native memory that a batch owns (one slot's address). */
    SockAddr(MemorySegment seg) {
        this.seg = seg;
    }

    /**
     * {@return a new address}
     *
     * @param address an IPv4 or IPv6 address
     * @param port 0..65535
     */
    public static SockAddr of(InetAddress address, int port) {
        SockAddr a = new SockAddr();
        a.set(address, port);
        return a;
    }

    /**
     * {@return a new address}
     *
     * @param address address and port
     */
    public static SockAddr of(InetSocketAddress address) {
        if (address.isUnresolved()) {
            throw new IllegalArgumentException("unresolved address " + address);
        }
        return of(address.getAddress(), address.getPort());
    }

    /**
     * Sets this to an address and port. An IPv4-mapped IPv6 address is stored as IPv4, as the kernel
     * would report it on an IPv4 socket.
     *
     * @param address IPv4 or IPv6
     * @param port 0..65535
     * @return this
     */
    public SockAddr set(InetAddress address, int port) {
        checkPort(port);
        if (address instanceof Inet4Address v4) {
            byte[] b = v4.getAddress();
            setIpv4(((b[0] & 0xFF) << 24) | ((b[1] & 0xFF) << 16) | ((b[2] & 0xFF) << 8) | (b[3] & 0xFF), port);
        } else if (address instanceof Inet6Address v6) {
            seg.fill((byte) 0);
            seg.set(FAMILY, 0, (short) Libc.AF_INET6);
            seg.set(PORT, 2, (short) port);
            MemorySegment.copy(MemorySegment.ofArray(v6.getAddress()), 0, seg, IN6_ADDR, 16);
            seg.set(ValueLayout.JAVA_INT_UNALIGNED, IN6_SCOPE, v6.getScopeId());
        } else {
            throw new IllegalArgumentException("not an IP address: " + address);
        }
        return this;
    }

    /**
     * Sets this to an IPv4 address without allocating.
     *
     * @param address the address as a big-endian int (10.0.0.1 = 0x0A000001)
     * @param port 0..65535
     * @return this
     */
    public SockAddr setIpv4(int address, int port) {
        checkPort(port);
        seg.fill((byte) 0);
        seg.set(FAMILY, 0, (short) Libc.AF_INET);
        seg.set(PORT, 2, (short) port);
        seg.set(ADDR4, IN4_ADDR, address);
        return this;
    }

    /**
     * Sets this to an IPv6 address without allocating.
     *
     * @param address 16 bytes at {@code off}
     * @param off offset in {@code address}
     * @param port 0..65535
     * @return this
     */
    public SockAddr setIpv6(byte[] address, int off, int port) {
        checkPort(port);
        seg.fill((byte) 0);
        seg.set(FAMILY, 0, (short) Libc.AF_INET6);
        seg.set(PORT, 2, (short) port);
        MemorySegment.copy(address, off, seg, ValueLayout.JAVA_BYTE, IN6_ADDR, 16);
        return this;
    }

    /**
     * Copies another address into this one.
     *
     * @param other the source
     * @return this
     */
    public SockAddr set(SockAddr other) {
        MemorySegment.copy(other.seg, 0, seg, 0, Libc.SOCKADDR_SIZE);
        return this;
    }

    private static void checkPort(int port) {
        if (port < 0 || port > 0xFFFF) {
            throw new IllegalArgumentException("port " + port + " (expected 0..65535)");
        }
    }

    /** {@return true for IPv4 (AF_INET)} */
    public boolean isIpv4() {
        return seg.get(FAMILY, 0) == Libc.AF_INET;
    }

    /** {@return true for IPv6 (AF_INET6)} */
    public boolean isIpv6() {
        return seg.get(FAMILY, 0) == Libc.AF_INET6;
    }

    /** {@return the port, 0..65535} */
    public int port() {
        return seg.get(PORT, 2) & 0xFFFF;
    }

    /**
     * {@return the IPv4 address as a big-endian int}
     *
     * @throws IllegalStateException if this is not IPv4
     */
    public int ipv4() {
        if (!isIpv4()) {
            throw new IllegalStateException("not IPv4: " + this);
        }
        return seg.get(ADDR4, IN4_ADDR);
    }

    /**
     * Writes the address as a 16-byte RoCEv2 GID: the IPv6 address, or the IPv4-mapped form
     * {@code ::ffff:a.b.c.d} for IPv4 (RoCEv2 annex A17.4.5.1; rxe maps received IPv4 addresses the
     * same way with {@code ipv6_addr_set_v4mapped}).
     *
     * @param dst destination
     * @param off offset of 16 bytes in {@code dst}
     */
    public void copyGidTo(byte[] dst, int off) {
        if (isIpv4()) {
            java.util.Arrays.fill(dst, off, off + 10, (byte) 0);
            dst[off + 10] = (byte) 0xFF;
            dst[off + 11] = (byte) 0xFF;
            MemorySegment.copy(seg, ValueLayout.JAVA_BYTE, IN4_ADDR, dst, off + 12, 4);
        } else if (isIpv6()) {
            MemorySegment.copy(seg, ValueLayout.JAVA_BYTE, IN6_ADDR, dst, off, 16);
        } else {
            throw new IllegalStateException("no address set");
        }
    }

    /** {@return the length the kernel expects for this family (16 or 28), or 0 if none is set} */
    int length() {
        return isIpv4() ? IN4_LEN : isIpv6() ? IN6_LEN : 0;
    }

    /** {@return a Java socket address (allocates; not for hot paths)} */
    public InetSocketAddress toInetSocketAddress() {
        try {
            if (isIpv4()) {
                byte[] b = new byte[4];
                MemorySegment.copy(seg, ValueLayout.JAVA_BYTE, IN4_ADDR, b, 0, 4);
                return new InetSocketAddress(InetAddress.getByAddress(b), port());
            }
            if (isIpv6()) {
                byte[] b = new byte[16];
                MemorySegment.copy(seg, ValueLayout.JAVA_BYTE, IN6_ADDR, b, 0, 16);
                int scope = seg.get(ValueLayout.JAVA_INT_UNALIGNED, IN6_SCOPE);
                InetAddress a = scope != 0 ? Inet6Address.getByAddress(null, b, scope) : InetAddress.getByAddress(b);
                return new InetSocketAddress(a, port());
            }
        } catch (UnknownHostException e) {
            throw new IllegalStateException(e);
        }
        throw new IllegalStateException("no address set");
    }

    /** Two addresses are equal when family, address, port (and IPv6 scope) are. */
    @Override
    public boolean equals(Object o) {
        if (!(o instanceof SockAddr other)) {
            return false;
        }
        int len = length();
        if (len != other.length()) {
            return false;
        }
        if (len == 0) {
            return true; // no family: nothing to compare
        }
        // A RoCE receive compares every datagram's source with the last one's: word compares, not a
        // MemorySegment.mismatch, whose set-up cost more than the 16 or 28 bytes it looked at.
        MemorySegment a = seg;
        MemorySegment b = other.seg;
        if (a.get(WORD, 0) != b.get(WORD, 0) || a.get(WORD, 8) != b.get(WORD, 8)) {
            return false;
        }
        return len == IN4_LEN || a.get(WORD, 16) == b.get(WORD, 16)
                && a.get(ValueLayout.JAVA_INT_UNALIGNED, 24) == b.get(ValueLayout.JAVA_INT_UNALIGNED, 24);
    }

    @Override
    public int hashCode() {
        int h = 0;
        for (int i = 0; i < length(); i++) {
            h = 31 * h + seg.get(ValueLayout.JAVA_BYTE, i);
        }
        return h;
    }

    @Override
    public String toString() {
        if (!isIpv4() && !isIpv6()) {
            return "SockAddr[unset]";
        }
        InetSocketAddress a = toInetSocketAddress();
        String host = a.getAddress().getHostAddress();
        return (isIpv6() ? "[" + host + "]" : host) + ":" + a.getPort();
    }
}
