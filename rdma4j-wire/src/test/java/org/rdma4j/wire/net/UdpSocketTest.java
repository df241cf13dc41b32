// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.nio.channels.ClosedChannelException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.rdma4j.libc.Libc;
import org.rdma4j.libc.NativeIOException;

/** UdpSocket on loopback, IPv4 and IPv6: data path, addresses, modes, options and errors. */
class UdpSocketTest {
    private final Arena arena = Arena.ofAuto();

    private static InetAddress loopback(String family) throws IOException {
        return InetAddress.getByName(family.equals("4") ? "127.0.0.1" : "::1");
    }

    private MemorySegment bytes(int n, int seed) {
        MemorySegment s = arena.allocate(n);
        for (int i = 0; i < n; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) (seed + i * 31));
        }
        return s;
    }

    @ParameterizedTest
    @ValueSource(strings = {"4", "6"})
    void receivesPayloadAndSourceAddress(String family) throws IOException {
        InetAddress lo = loopback(family);
        try (UdpSocket a = UdpSocket.open(lo, 0); UdpSocket b = UdpSocket.open(lo, 0)) {
            assertEquals(family.equals("6"), a.isIpv6());
            assertTrue(a.localPort() > 0);
            MemorySegment data = bytes(300, 7);
            assertEquals(300, a.send(data, b.localAddress()));
            MemorySegment into = arena.allocate(2048);
            SockAddr from = new SockAddr();
            assertEquals(300, b.receive(into, from));
            assertEquals(-1, into.asSlice(0, 300).mismatch(data));
            assertEquals(a.localPort(), from.port());
            assertEquals(lo, from.toInetSocketAddress().getAddress());
            assertEquals(a.localAddress(), from);
            byte[] gid = new byte[16];
            from.copyGidTo(gid, 0);
            byte[] want = family.equals("4")
                    ? new byte[] {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1, 127, 0, 0, 1}
                    : lo.getAddress();
            assertArrayEquals(want, gid);
            if (family.equals("4")) {
                assertEquals(0x7F000001, from.ipv4());
            }
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"4", "6"})
    void batchesGoOutAndComeBackInOrder(String family) throws IOException {
        InetAddress lo = loopback(family);
        try (UdpSocket a = UdpSocket.open(lo, 0); UdpSocket b = UdpSocket.open(lo, 0)) {
            DatagramBatch out = new DatagramBatch(16, 1500);
            for (int i = 0; i < 16; i++) {
                MemorySegment buf = out.buffer(i);
                for (int j = 0; j < 10 + i; j++) {
                    buf.set(ValueLayout.JAVA_BYTE, j, (byte) (i ^ j));
                }
                out.setLength(i, 10 + i);
                out.address(i).set(b.localAddress());
            }
            assertEquals(16, a.sendBatch(out, 16));
            DatagramBatch in = new DatagramBatch(8, 64);
            int got = 0;
            for (int round = 0; round < 16 && got < 16; round++) {
                int n = b.receiveBatch(in);
                assertTrue(n >= 1, "blocking receiveBatch returns at least one");
                for (int k = 0; k < n; k++, got++) {
                    assertEquals(10 + got, in.length(k));
                    assertFalse(in.truncated(k));
                    assertEquals(a.localAddress(), in.address(k));
                    assertEquals((byte) (got ^ 5), in.buffer(k).get(ValueLayout.JAVA_BYTE, 5));
                }
            }
            assertEquals(16, got);
        }
    }

    /**
     * UDP GSO (udp(7) UDP_SEGMENT): one slot of a send batch, sliced out of caller memory, leaves as datagrams
     * of the segment size (the last shorter), and the slot after it as one datagram. A plain receiver sees
     * each datagram; a receiver with UDP_GRO sees the GSO train as one slot with its segment size.
     */
    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void gsoSendsLeaveAsSegmentsAndGroCoalescesThem(boolean gro) throws IOException {
        InetAddress lo = loopback("4");
        try (UdpSocket a = UdpSocket.open(lo, 0); UdpSocket b = UdpSocket.open(lo, 0)) {
            b.setGroReceive(gro);
            MemorySegment mem = bytes(10_000, 3);
            DatagramBatch out = new DatagramBatch(2, 1);
            out.setSlice(0, mem, 100, 5 * 1000 + 300); // 5 segments of 1000 and one of 300
            out.setSegmentSize(0, 1000);
            out.address(0).set(b.localAddress());
            out.setSlice(1, mem, 6000, 700);
            out.address(1).set(b.localAddress());
            assertEquals(2, a.sendBatch(out, 2));
            DatagramBatch in = new DatagramBatch(16, 65536);
            int[] want = {1000, 1000, 1000, 1000, 1000, 300, 700};
            long[] at = {100, 1100, 2100, 3100, 4100, 5100, 6000};
            int got = 0;
            for (int tries = 0; got < want.length && tries < 100; tries++) {
                if (!b.awaitReadable(2_000)) {
                    break;
                }
                int n = b.receiveBatchNow(in);
                for (int i = 0; i < n; i++) {
                    int len = in.length(i);
                    int seg = in.segmentSize(i);
                    int pieces = seg == 0 ? 1 : (len + seg - 1) / seg;
                    if (gro && got == 0) {
                        assertEquals(1000, seg, "GRO segment size of the GSO train");
                        assertEquals(5300, len);
                    }
                    for (int k = 0; k < pieces; k++) {
                        int l = seg == 0 ? len : Math.min(seg, len - k * seg);
                        assertEquals(want[got], l, "datagram " + got);
                        assertEquals(-1, in.buffer(i).asSlice((long) k * (seg == 0 ? 0 : seg), l).mismatch(mem.asSlice(at[got], l)),
                                "bytes of datagram " + got);
                        got++;
                    }
                }
            }
            assertEquals(want.length, got);
        }
    }

    @Test
    void gsoIsRefusedWithoutAChecksumAndTheErrnoSaysSo() throws IOException {
        // udp_v6_send_skb: GSO needs the UDP checksum; with UDP_NO_CHECK6_TX the kernel answers EINVAL
        try (UdpSocket a = UdpSocket.open(loopback("6"), 0); UdpSocket b = UdpSocket.open(loopback("6"), 0)) {
            a.setZeroChecksumSend(true);
            DatagramBatch out = new DatagramBatch(1, 1);
            out.setSlice(0, bytes(4000, 1), 0, 4000);
            out.setSegmentSize(0, 1000);
            out.address(0).set(b.localAddress());
            NativeIOException e = assertThrows(NativeIOException.class, () -> a.sendBatch(out, 1));
            assertEquals(22, e.errno(), e.getMessage());
        }
    }

    @Test
    void batchSlotsCanPointAtCallerMemory() throws IOException {
        InetAddress lo = loopback("4");
        try (UdpSocket a = UdpSocket.open(lo, 0); UdpSocket b = UdpSocket.open(lo, 0)) {
            DatagramBatch out = new DatagramBatch(2, 1);
            MemorySegment big = bytes(1000, 3);
            out.setBuffer(0, big);
            out.setLength(0, 1000);
            out.address(0).set(b.localAddress());
            assertEquals(1, a.sendBatch(out, 1));
            DatagramBatch in = new DatagramBatch(1, 16);
            MemorySegment target = arena.allocate(1000);
            in.setBuffer(0, target);
            assertEquals(1, b.receiveBatch(in));
            assertEquals(1000, in.length(0));
            assertEquals(-1, target.mismatch(big));
            assertThrows(IllegalArgumentException.class, () -> in.setBuffer(0, MemorySegment.ofArray(new byte[4])));
        }
    }

    @Test
    void nonBlockingModeReturnsAtOnce() throws IOException {
        try (UdpSocket s = UdpSocket.open(loopback("4"), 0)) {
            s.setBlocking(false);
            assertFalse(s.isBlocking());
            assertEquals(-1, s.receive(arena.allocate(64), new SockAddr()));
            assertEquals(0, s.receiveBatch(new DatagramBatch(4, 64)));
            assertFalse(s.awaitReadable(0));
            s.send(bytes(5, 1), s.localAddress());
            assertTrue(s.awaitReadable(10_000));
            assertEquals(5, s.receive(arena.allocate(64), new SockAddr()));
            s.setBlocking(true);
            assertTrue(s.isBlocking());
        }
    }

    @Test
    void blockingReceiveGivesUpAfterTheTimeout() throws IOException {
        try (UdpSocket s = UdpSocket.open(loopback("6"), 0)) {
            s.setReceiveTimeout(20);
            assertEquals(-1, s.receive(arena.allocate(64), new SockAddr()));
            assertEquals(0, s.receiveBatch(new DatagramBatch(2, 64)));
        }
    }

    /** The three ways a receive thread can block; close() must end each of them. */
    enum Wait { RECEIVE, RECEIVE_BATCH, POLL }

    @ParameterizedTest
    @org.junit.jupiter.params.provider.EnumSource(Wait.class)
    void closeWakesABlockedReceiver(Wait how) throws Exception {
        UdpSocket s = UdpSocket.open(loopback("4"), 0);
        MemorySegment buf = arena.allocate(64);
        String name = "udprx-" + how.ordinal() + "-" + Long.toHexString(System.nanoTime() & 0xFFFFF);
        CompletableFuture<Object> outcome = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                outcome.complete(switch (how) { // no timeouts: only close() can end these
                    case RECEIVE -> s.receive(buf, new SockAddr());
                    case RECEIVE_BATCH -> s.receiveBatch(new DatagramBatch(4, 64));
                    case POLL -> s.awaitReadable(Integer.MAX_VALUE);
                });
            } catch (Throwable e) {
                outcome.complete(e);
            }
        }, name);
        t.start();
        assertTrue(BlockedInKernel.await(name, how == Wait.POLL ? BlockedInKernel.POLL : how == Wait.RECEIVE
                ? BlockedInKernel.RECVFROM : BlockedInKernel.RECVMMSG), "receiver never blocked in the kernel");
        s.close();
        Object result = outcome.get(30, TimeUnit.SECONDS);
        assertTrue(result instanceof ClosedChannelException, "receiver ended with " + result);
        assertTrue(s.isClosed());
        s.close(); // idempotent
        assertThrows(ClosedChannelException.class, () -> s.send(buf, new SockAddr().set(loopback("4"), 9)));
        t.join(10_000);
    }

    @Test
    void truncationReportsTheFullLength() throws IOException {
        try (UdpSocket s = UdpSocket.open(loopback("4"), 0)) {
            s.send(bytes(100, 0), s.localAddress());
            assertEquals(100, s.receive(arena.allocate(40), new SockAddr()));
            s.send(bytes(100, 0), s.localAddress());
            DatagramBatch in = new DatagramBatch(1, 40);
            assertEquals(1, s.receiveBatch(in));
            assertTrue(in.truncated(0));
        }
    }

    @Test
    void errorsCarryTheErrno() throws IOException {
        try (UdpSocket s = UdpSocket.open(loopback("4"), 0)) {
            NativeIOException e = assertThrows(NativeIOException.class, () -> UdpSocket.open(loopback("4"), s.localPort()));
            assertEquals(98, e.errno());
            assertTrue(e.getMessage().contains("EADDRINUSE"), e.getMessage());
            NativeIOException big = assertThrows(NativeIOException.class, () -> s.send(arena.allocate(70_000), s.localAddress()));
            assertTrue(big.getMessage().contains("EMSGSIZE"), big.getMessage());
        }
        NativeIOException na = assertThrows(NativeIOException.class,
                () -> UdpSocket.open(InetAddress.getByName("192.0.2.77"), 0));
        assertEquals(99, na.errno(), na.getMessage()); // EADDRNOTAVAIL: not a local address
    }

    @Test
    void theDefaultPortIs4791() throws IOException {
        // If something else on this host holds 4791 (rdma_rxe, another RoCE test), the bind error
        // must still show that 4791 was asked for.
        try (UdpSocket s = UdpSocket.open(InetAddress.getByName("127.0.0.2"))) {
            assertEquals(4791, s.localPort());
        } catch (NativeIOException e) {
            assertEquals(98, e.errno(), e.getMessage());
            assertTrue(e.getMessage().contains("127.0.0.2:4791"), e.getMessage());
        }
    }

    @Test
    void badArgumentsAreRejected() throws IOException {
        try (UdpSocket v4 = UdpSocket.open(loopback("4"), 0); UdpSocket v6 = UdpSocket.open(loopback("6"), 0)) {
            assertThrows(IllegalArgumentException.class, () -> v4.send(arena.allocate(4), v6.localAddress()));
            assertThrows(IllegalArgumentException.class, () -> v4.send(MemorySegment.ofArray(new byte[4]), v4.localAddress()));
            assertThrows(IllegalStateException.class, () -> v4.setZeroChecksumReceive(true));
            assertThrows(IllegalArgumentException.class, () -> v4.setHopLimit(0));
            assertThrows(IllegalArgumentException.class, () -> v4.setTrafficClass(256));
            DatagramBatch b = new DatagramBatch(2, 8);
            assertThrows(IllegalArgumentException.class, () -> v4.sendBatch(b, 1)); // no destination set
            assertThrows(IllegalArgumentException.class, () -> v4.sendBatch(b, 3));
        }
    }

    @Test
    void optionsReachTheKernel() throws IOException {
        try (UdpSocket v4 = UdpSocket.open(loopback("4"), 0); UdpSocket v6 = UdpSocket.open(loopback("6"), 0)) {
            assertEquals(2, v4.getIntOption(Libc.IPPROTO_IP, Libc.IP_MTU_DISCOVER), "IP_PMTUDISC_DO by default");
            assertEquals(0, v4.ipv4Identification());
            v4.setTrafficClass(0x68);
            v4.setHopLimit(7);
            assertEquals(0x68, v4.getIntOption(Libc.IPPROTO_IP, Libc.IP_TOS));
            assertEquals(7, v4.getIntOption(Libc.IPPROTO_IP, Libc.IP_TTL));
            v4.setDontFragment(false);
            assertEquals(1, v4.getIntOption(Libc.IPPROTO_IP, Libc.IP_MTU_DISCOVER));
            assertEquals(-1, v4.ipv4Identification());
            v4.setZeroChecksumSend(true);
            assertEquals(1, v4.getIntOption(Libc.SOL_SOCKET, Libc.SO_NO_CHECK));

            assertEquals(-1, v6.ipv4Identification());
            assertEquals(1, v6.getIntOption(Libc.IPPROTO_IPV6, Libc.IPV6_V6ONLY));
            v6.setTrafficClass(0xB8);
            v6.setHopLimit(3);
            assertEquals(0xB8, v6.getIntOption(Libc.IPPROTO_IPV6, Libc.IPV6_TCLASS));
            assertEquals(3, v6.getIntOption(Libc.IPPROTO_IPV6, Libc.IPV6_UNICAST_HOPS));
            v6.setZeroChecksumReceive(true);
            v6.setZeroChecksumSend(true);
            assertEquals(1, v6.getIntOption(Libc.SOL_UDP, Libc.UDP_NO_CHECK6_RX));
            assertEquals(1, v6.getIntOption(Libc.SOL_UDP, Libc.UDP_NO_CHECK6_TX));
            v6.setReceiveBufferSize(1 << 20);
            assertTrue(v6.getIntOption(Libc.SOL_SOCKET, Libc.SO_RCVBUF) > 0);
        }
    }

    /**
     * IPv4 multicast on loopback, as the RoCE link uses it: every socket bound to group:port and joined on
     * lo gets a copy of a datagram sent out of lo; after leaving, a socket gets nothing more.
     */
    @Test
    void groupSocketsReceiveMulticastUntilTheyLeave() throws IOException {
        InetAddress lo = InetAddress.getByName("127.0.0.1");
        InetAddress group = InetAddress.getByName("239.77.1.1");
        try (UdpSocket tx = UdpSocket.open(lo, 0)) {
            tx.setMulticastInterface(lo);
            int port;
            try (UdpSocket probe = UdpSocket.open(lo, 0)) {
                port = probe.localPort();
            }
            try (UdpSocket g1 = UdpSocket.openGroup(group, port, lo); UdpSocket g2 = UdpSocket.openGroup(group, port, lo)) {
                g1.setReceiveTimeout(2_000);
                g2.setReceiveTimeout(2_000);
                MemorySegment data = bytes(64, 3);
                SockAddr to = SockAddr.of(group, port);
                assertEquals(64, tx.send(data, to));
                MemorySegment into = arena.allocate(256);
                SockAddr from = new SockAddr();
                assertEquals(64, g1.receive(into, from));
                assertEquals(-1, into.asSlice(0, 64).mismatch(data));
                assertEquals(tx.localAddress(), from);
                assertEquals(64, g2.receive(into, from), "each joined socket gets its own copy");
                g2.membership(group, lo, false);
                g2.setBlocking(false);
                assertEquals(64, tx.send(data, to));
                assertEquals(64, g1.receive(into, from));
                assertFalse(g2.awaitReadable(200), "a socket that left the group gets nothing");
            }
        }
        assertThrows(IllegalArgumentException.class, () -> UdpSocket.openGroup(lo, 4791, lo), "not a group address");
    }
}
