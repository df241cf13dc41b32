// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.rdma4j.libc.NativeIOException;

/**
 * rxe sends RoCEv2 over IPv6 with UDP checksum 0 ({@code prepare_udp_hdr}); Linux drops those unless
 * the socket sets UDP_NO_CHECK6_RX. A raw IPv6 socket sends such datagrams to a {@link UdpSocket} on
 * ::1. Drops are proven without timing: a normal datagram sent after the zero-checksum one must be
 * the first to arrive (loopback keeps order). Needs CAP_NET_RAW (root, as in CI).
 */
class ZeroChecksumIpv6Test {
    private static final int RAW_SPORT = 0xC123;
    private final Arena arena = Arena.ofAuto();
    private RawIpv6Udp raw;
    private UdpSocket receiver;
    private UdpSocket plain;

    @BeforeEach
    void open() throws IOException {
        try {
            raw = new RawIpv6Udp();
        } catch (NativeIOException e) {
            Assumptions.assumeTrue(e.errno() != 1 && e.errno() != 13, "needs CAP_NET_RAW: " + e.getMessage());
            throw e;
        }
        InetAddress lo = InetAddress.getByName("::1");
        receiver = UdpSocket.open(lo, 0);
        plain = UdpSocket.open(lo, 0);
    }

    @AfterEach
    void close() {
        for (AutoCloseable c : new AutoCloseable[] {raw, receiver, plain}) {
            try {
                if (c != null) {
                    c.close();
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }
    }

    private byte[] udp(String text, int checksum) {
        byte[] body = text.getBytes(StandardCharsets.US_ASCII);
        byte[] u = new byte[8 + body.length];
        TestPackets.putShort(u, 0, RAW_SPORT);
        TestPackets.putShort(u, 2, receiver.localPort());
        TestPackets.putShort(u, 4, u.length);
        TestPackets.putShort(u, 6, checksum);
        System.arraycopy(body, 0, u, 8, body.length);
        return u;
    }

    private void sendPlain(String text) throws IOException {
        byte[] b = text.getBytes(StandardCharsets.US_ASCII);
        MemorySegment s = arena.allocate(b.length);
        MemorySegment.copy(b, 0, s, ValueLayout.JAVA_BYTE, 0, b.length);
        plain.send(s, receiver.localAddress());
    }

    private String next(SockAddr from) throws IOException {
        receiver.setReceiveTimeout(10_000);
        MemorySegment into = arena.allocate(2048);
        int n = receiver.receive(into, from);
        if (n < 0) {
            fail("nothing received within 10 s");
        }
        return new String(into.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.US_ASCII);
    }

    @Test
    void zeroChecksumIsDroppedByDefaultAndAcceptedWithTheOption() throws IOException {
        SockAddr from = new SockAddr();
        raw.send(udp("zero-1", 0), receiver.localAddress());
        sendPlain("fence-1");
        assertEquals("fence-1", next(from), "a zero-checksum datagram must be dropped without UDP_NO_CHECK6_RX");

        receiver.setZeroChecksumReceive(true);
        raw.send(udp("zero-2", 0), receiver.localAddress());
        sendPlain("fence-2");
        assertEquals("zero-2", next(from));
        assertEquals(RAW_SPORT, from.port());
        assertEquals(InetAddress.getByName("::1"), from.toInetSocketAddress().getAddress());
        assertEquals("fence-2", next(from));
    }

    /** The option admits checksum 0 only: a wrong non-zero checksum is still dropped. */
    @Test
    void aWrongChecksumIsStillDropped() throws IOException {
        receiver.setZeroChecksumReceive(true);
        raw.send(udp("wrong", 0x1234), receiver.localAddress());
        sendPlain("fence");
        assertEquals("fence", next(new SockAddr()));
    }

    /** UDP_NO_CHECK6_TX makes our datagrams look like rxe's: checksum 0 on the wire. */
    @Test
    void zeroChecksumSendIsVisibleOnTheWire() throws IOException {
        plain.setZeroChecksumSend(true);
        sendPlain("tx-zero");
        assertEquals(0, capturedChecksum(), "UDP checksum with UDP_NO_CHECK6_TX");
        plain.setZeroChecksumSend(false);
        sendPlain("tx-sum");
        assertNotEquals(0, capturedChecksum(), "UDP checksum without it");
    }

    private int capturedChecksum() throws IOException {
        for (int i = 0; i < 10_000; i++) { // skip unrelated IPv6 UDP traffic on the host
            byte[] u = raw.receive(10_000);
            if (u == null) {
                fail("nothing captured within 10 s");
            }
            if (TestPackets.getShort(u, 0) == plain.localPort() && TestPackets.getShort(u, 2) == receiver.localPort()) {
                return TestPackets.getShort(u, 6);
            }
        }
        throw new AssertionError("capture flooded by other traffic");
    }
}
