// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.rdma4j.libc.NativeIOException;

/**
 * Captures what really goes on the wire (a raw IPPROTO_UDP socket sees every IPv4 UDP packet the
 * host receives, header included) and checks the IPv4 Identification this package claims: 0 for
 * {@link UdpSocket} with DF, the caller's choice for {@link RawIpv4Socket}, and a real ID recovered
 * by {@link Ipv4IdSolver}. Needs CAP_NET_RAW (root, as in CI); traffic stays on 127.0.0.1.
 */
class Ipv4IdentificationTest {
    private static final int LO = 0x7F000001;
    private final Arena arena = Arena.ofAuto();
    private RawIpv4Socket capture;
    private UdpSocket receiver;

    @BeforeEach
    void open() throws IOException {
        try {
            capture = RawIpv4Socket.openCapture();
        } catch (NativeIOException e) {
            Assumptions.assumeTrue(e.errno() != 1 && e.errno() != 13, "needs CAP_NET_RAW: " + e.getMessage());
            throw e;
        }
        receiver = UdpSocket.open(InetAddress.getByName("127.0.0.1"), 0);
    }

    @AfterEach
    void close() {
        if (capture != null) {
            capture.close();
        }
        if (receiver != null) {
            receiver.close();
        }
    }

    /** @return the next captured IPv4 packet from {@code srcPort} to the receiver, as bytes */
    private byte[] captured(int srcPort) throws IOException {
        MemorySegment buf = arena.allocate(70_000);
        for (int i = 0; i < 10_000; i++) { // other UDP traffic on the host may interleave
            int n = capture.receive(buf, 10_000);
            if (n < 0) {
                fail("no packet from port " + srcPort + " captured within 10 s");
            }
            byte[] p = buf.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE);
            int ihl = (p[0] & 0x0F) * 4;
            if (TestPackets.getShort(p, ihl) == srcPort && TestPackets.getShort(p, ihl + 2) == receiver.localPort()) {
                return p;
            }
        }
        throw new AssertionError("capture flooded by other traffic");
    }

    private void drainReceiver(int expectedLen) throws IOException {
        assertEquals(expectedLen, receiver.receive(arena.allocate(2048), new SockAddr()));
    }

    @Test
    void udpSocketWithDfSendsIdZero() throws IOException {
        try (UdpSocket s = UdpSocket.open(InetAddress.getByName("127.0.0.1"), 0)) {
            assertEquals(0, s.ipv4Identification());
            for (int i = 0; i < 5; i++) {
                s.send(arena.allocate(40 + i), receiver.localAddress());
                byte[] p = captured(s.localPort());
                assertEquals(0, TestPackets.getShort(p, 4), "IPv4 ID");
                assertEquals(0x4000, TestPackets.getShort(p, 6), "DF, offset 0");
                drainReceiver(40 + i);
            }
        }
    }

    @Test
    void batchesFromAUdpSocketAlsoCarryIdZero() throws IOException {
        try (UdpSocket s = UdpSocket.open(InetAddress.getByName("127.0.0.1"), 0)) {
            DatagramBatch b = new DatagramBatch(3, 64);
            for (int i = 0; i < 3; i++) {
                b.setLength(i, 20 + i);
                b.address(i).set(receiver.localAddress());
            }
            assertEquals(3, s.sendBatch(b, 3));
            for (int i = 0; i < 3; i++) {
                byte[] p = captured(s.localPort());
                assertEquals(0, TestPackets.getShort(p, 4), "IPv4 ID of batch datagram " + i);
                assertEquals(0x4000, TestPackets.getShort(p, 6));
                drainReceiver(20 + i);
            }
        }
    }

    /** The hazard itself: without DF the kernel picks IDs, so the ICRC of such a packet is unknowable. */
    @Test
    void withoutDfTheKernelPicksTheId() throws IOException {
        try (UdpSocket s = UdpSocket.open(InetAddress.getByName("127.0.0.1"), 0)) {
            s.setDontFragment(false);
            assertEquals(-1, s.ipv4Identification());
            Set<Integer> ids = new HashSet<>();
            for (int i = 0; i < 4; i++) {
                s.send(arena.allocate(16), receiver.localAddress());
                byte[] p = captured(s.localPort());
                ids.add(TestPackets.getShort(p, 4));
                drainReceiver(16);
            }
            assertTrue(ids.size() > 1 || !ids.contains(0), "kernel-chosen IDs " + ids);
        }
    }

    @Test
    void rawSenderWritesTheIdWeChoose() throws IOException {
        try (RawIpv4Socket tx = RawIpv4Socket.openSender()) {
            int[] ids = {0x1234, 0, 0xFFFF, 1};
            for (int id : ids) {
                byte[] udpPayload = TestPackets.udSendOnly(0x11, id, 0x11111111, 0x22, new byte[] {1, 2, 3, 4, 5});
                byte[] ip = TestPackets.ipv4Udp(LO, LO, 0xD872, receiver.localPort(), id, udpPayload);
                TestPackets.sealIcrc(ip, 20);
                MemorySegment payload = arena.allocate(udpPayload.length);
                MemorySegment.copy(ip, 28, payload, ValueLayout.JAVA_BYTE, 0, udpPayload.length);
                int sent = tx.sendUdp(LO, 0xD872, receiver.localAddress(), id, 0x02, 9, payload);
                assertEquals(28 + udpPayload.length, sent);

                byte[] p = captured(0xD872);
                assertEquals(id, TestPackets.getShort(p, 4), "IPv4 ID on the wire");
                assertEquals(0x4000, TestPackets.getShort(p, 6));
                assertEquals(0x02, p[1] & 0xFF, "TOS");
                assertEquals(9, p[8] & 0xFF, "TTL");
                assertEquals(TestPackets.wireIcrc(p), TestPackets.icrc(p, 20), "ICRC over the captured packet");

                // and the UDP socket gets it, from the port we claimed
                MemorySegment into = arena.allocate(2048);
                SockAddr from = new SockAddr();
                assertEquals(udpPayload.length, receiver.receive(into, from));
                assertEquals(0xD872, from.port());
                assertEquals(-1, into.asSlice(0, udpPayload.length).mismatch(payload));
            }
        }
    }

    /** End to end on kernel-sent packets: the solver finds the ID the capture shows, from UDP-socket data only. */
    @Test
    void solverRecoversKernelChosenIds() throws IOException {
        try (UdpSocket s = UdpSocket.open(InetAddress.getByName("127.0.0.1"), 0)) {
            s.setDontFragment(false); // let the kernel pick (hashed) IDs, as rxe does
            for (int i = 0; i < 6; i++) {
                byte[] udpPayload = TestPackets.udSendOnly(0x11, i, 0x11111111, 0x22, new byte[17 + i]);
                // what a sender would seal: the ICRC needs the ID, which we only learn from the capture
                MemorySegment out = arena.allocate(udpPayload.length);
                MemorySegment.copy(udpPayload, 0, out, ValueLayout.JAVA_BYTE, 0, udpPayload.length);
                s.send(out, receiver.localAddress());
                byte[] p = captured(s.localPort());
                int realId = TestPackets.getShort(p, 4);
                // seal the captured packet with its real header, as rxe would have
                TestPackets.sealIcrc(p, 20);
                int wire = TestPackets.wireIcrc(p);
                // the receiver's view: no IP header, so rebuild it from addresses and length with ID 0
                MemorySegment into = arena.allocate(2048);
                SockAddr from = new SockAddr();
                int n = receiver.receive(into, from);
                byte[] body = into.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE);
                byte[] rebuilt = TestPackets.ipv4Udp(from.ipv4(), LO, from.port(), receiver.localPort(), 0, body);
                int udpLen = TestPackets.getShort(rebuilt, 24);
                // the DF bit of this test's packets is clear (DF off), so rebuild that too
                TestPackets.putShort(rebuilt, 6, TestPackets.getShort(p, 6));
                assertEquals(realId, Ipv4IdSolver.solve(TestPackets.icrc(rebuilt, 20), wire, udpLen),
                        "captured ID " + realId);
            }
        }
    }

    @Test
    void closeWakesACaptureWaitingInReceive() throws Exception {
        RawIpv4Socket c = capture;
        capture = null; // closed here, not by close()
        java.util.concurrent.CountDownLatch started = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CompletableFuture<Throwable> reader = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
            MemorySegment buf = Arena.ofAuto().allocate(70_000);
            started.countDown();
            try {
                for (int i = 0; i < 1_000; i++) { // other UDP traffic of the host may arrive first
                    c.receive(buf, 30_000);
                }
                return null;
            } catch (IOException e) {
                return e;
            }
        });
        assertTrue(started.await(10, java.util.concurrent.TimeUnit.SECONDS));
        long t0 = System.nanoTime();
        c.close();
        Throwable t = reader.get(10, java.util.concurrent.TimeUnit.SECONDS);
        assertTrue(t instanceof java.nio.channels.ClosedChannelException, "receiver ended with " + t);
        assertTrue(System.nanoTime() - t0 < 10_000_000_000L, "close returned without the 30 s poll timeout");
        c.close(); // idempotent
    }
}
