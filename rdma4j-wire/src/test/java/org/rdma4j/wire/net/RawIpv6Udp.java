// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire.net;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.rdma4j.libc.Libc;

/**
 * Test-only raw IPv6 socket with protocol UDP: sends a UDP header and payload exactly as given
 * (IPv6 raw sockets fill in no UDP checksum unless IPV6_CHECKSUM is set), and receives a copy of
 * each inbound IPv6 UDP datagram starting at its UDP header, before the UDP layer checks the
 * checksum. Needs CAP_NET_RAW.
 */
final class RawIpv6Udp implements AutoCloseable {
    private final Arena arena = Arena.ofShared();
    private final MemorySegment st = Libc.newCallState(arena);
    private final MemorySegment pollFd = arena.allocate(8, 8);
    private final int fd;

    RawIpv6Udp() throws IOException {
        fd = Libc.socket(st, Libc.AF_INET6, Libc.SOCK_RAW | Libc.SOCK_CLOEXEC, Libc.IPPROTO_UDP);
        if (fd < 0) {
            throw Libc.error("socket(AF_INET6, SOCK_RAW, IPPROTO_UDP)", st, "");
        }
    }

    /** Sends {@code udp} (UDP header + payload, checksum as given) to {@code to}'s address. */
    void send(byte[] udp, SockAddr to) throws IOException {
        MemorySegment buf = arena.allocate(udp.length);
        MemorySegment.copy(udp, 0, buf, java.lang.foreign.ValueLayout.JAVA_BYTE, 0, udp.length);
        SockAddr dst = new SockAddr().set(to.toInetSocketAddress().getAddress(), 0); // raw: port must be 0
        if (Libc.sendto(st, fd, buf, udp.length, 0, dst.seg, dst.length()) != udp.length) {
            throw Libc.error("sendto(raw IPv6)", st, to.toString());
        }
    }

    /** @return the next captured UDP datagram (header first), or null after {@code timeoutMs} */
    byte[] receive(int timeoutMs) throws IOException {
        pollFd.set(java.lang.foreign.ValueLayout.JAVA_INT, 0, fd);
        pollFd.set(java.lang.foreign.ValueLayout.JAVA_SHORT, 4, Libc.POLLIN);
        if (Libc.poll(st, pollFd, 1, timeoutMs) <= 0) {
            return null;
        }
        MemorySegment buf = arena.allocate(70_000);
        long n = Libc.recvfrom(st, fd, buf, buf.byteSize(), Libc.MSG_DONTWAIT, MemorySegment.NULL, MemorySegment.NULL);
        if (n < 0) {
            throw Libc.error("recvfrom(raw IPv6)", st, "");
        }
        return buf.asSlice(0, n).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
    }

    @Override
    public void close() {
        Libc.close(st, fd);
        arena.close();
    }
}
