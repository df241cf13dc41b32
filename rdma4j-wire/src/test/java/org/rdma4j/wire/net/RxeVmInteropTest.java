// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The two interop hazards against a real Linux rdma_rxe (rxe0 in the VM of /work/shared/vm, Linux
 * 6.1): this host plays the client of {@code ibv_ud_pingpong} in the guest, sending one UD
 * SEND_ONLY through this package's sockets and receiving the server's reply.
 * <ul>
 * <li>IPv4 through {@link UdpSocket} with DF (ID 0) and through {@link RawIpv4Socket} (ID 0x1234):
 * rxe accepts (its rcvd_pkts counter, which counts only ICRC-valid packets, moves; the reply
 * comes); the reply's ICRC checks out with the ID {@link Ipv4IdSolver} recovers, which must equal the
 * ID a capture socket sees.</li>
 * <li>Control: the same packet from a UDP socket without DF (kernel-chosen ID) is dropped by rxe
 * (rcvd_pkts does not move, no reply).</li>
 * <li>IPv6 with UDP_NO_CHECK6_RX: rxe's reply arrives with UDP checksum 0 (seen by a capture
 * socket) and is received. Control: without the option the same reply is dropped.</li>
 * </ul>
 * Tagged slow; needs root, the VM up and the JVM inside its namespace: run
 * {@code rdma4j-wire/src/test/vm/rxe-interop.sh}. Skipped by assumption elsewhere.
 */
@Tag("slow")
class RxeVmInteropTest {
    private static final Path VM = Path.of(System.getenv().getOrDefault("RDMAVM_HOME", "/work/shared/vm"));
    private static final String GUEST_TCP = "10.99.0.2";
    private static final int QKEY = 0x11111111; // ibv_ud_pingpong's Q_Key
    private static final int OUR_QPN = 0xABC;
    private static final int PSN = 0x123456;
    private static final int SIZE = 256;
    private static final HexFormat HEX = HexFormat.of();
    private final Arena arena = Arena.ofAuto();

    enum Send { UDP4_DF, RAW4, UDP4_NO_DF, UDP6, UDP6_NO_ZERO_RX }

    @BeforeAll
    static void requireVm() throws IOException {
        Assumptions.assumeTrue(Files.isExecutable(VM.resolve("guest.sh")), "no VM harness at " + VM);
        Assumptions.assumeTrue(NetworkInterface.getByInetAddress(InetAddress.getByName("10.99.0.1")) != null,
                "not inside the VM's namespace (run src/test/vm/rxe-interop.sh)");
    }

    @Test
    void ipv4ThroughUdpSocketWithDfIsAccepted() throws Exception {
        roundTrip(Send.UDP4_DF, true);
    }

    @Test
    void ipv4ThroughRawSocketWithChosenIdIsAccepted() throws Exception {
        roundTrip(Send.RAW4, true);
    }

    @Test
    void ipv4WithKernelChosenIdIsDropped() throws Exception {
        roundTrip(Send.UDP4_NO_DF, false);
    }

    @Test
    void ipv6ZeroChecksumRepliesAreReceivedWithTheOption() throws Exception {
        roundTrip(Send.UDP6, true);
    }

    @Test
    void ipv6ZeroChecksumRepliesAreDroppedWithoutTheOption() throws Exception {
        roundTrip(Send.UDP6_NO_ZERO_RX, true);
    }

    private void roundTrip(Send mode, boolean rxeAccepts) throws Exception {
        boolean v6 = mode == Send.UDP6 || mode == Send.UDP6_NO_ZERO_RX;
        InetAddress local = InetAddress.getByName(v6 ? "fd99::1" : "10.99.0.1");
        InetAddress guest = InetAddress.getByName(v6 ? "fd99::2" : "10.99.0.2");
        long rcvdBefore = rcvdPkts();
        Path log = Files.createTempFile("rxe-ud-pingpong-" + mode, ".log");
        Process server = guest(log, "-t", "90", "ibv_ud_pingpong -d rxe0 -g " + (v6 ? 2 : 1) + " -s " + SIZE + " -n 1");
        try (UdpSocket udp = UdpSocket.open(local, 4791);
                RawIpv4Socket cap4 = v6 ? null : RawIpv4Socket.openCapture();
                RawIpv6Udp cap6 = v6 ? new RawIpv6Udp() : null;
                Socket tcp = connect()) {
            if (mode == Send.UDP6) {
                udp.setZeroChecksumReceive(true);
            }
            // 1. pingpong exchange: "LID:QPN:PSN:GID" + NUL, 52 bytes each way (roce-wire.md 5.1)
            String gid = v6 ? HEX.formatHex(local.getAddress())
                    : "00000000000000000000ffff" + HEX.formatHex(local.getAddress());
            OutputStream out = tcp.getOutputStream();
            out.write((String.format("%04x:%06x:%06x:%s", 0, OUR_QPN, PSN, gid) + "\0").getBytes(StandardCharsets.US_ASCII));
            byte[] msg = tcp.getInputStream().readNBytes(52);
            Matcher m = Pattern.compile("^([0-9a-f]{4}):([0-9a-f]{6}):([0-9a-f]{6}):([0-9a-f]{32})").matcher(
                    new String(msg, StandardCharsets.US_ASCII));
            assertTrue(m.find(), "server message " + new String(msg, StandardCharsets.US_ASCII));
            int serverQpn = Integer.parseInt(m.group(2), 16);
            out.write("done\0".getBytes(StandardCharsets.US_ASCII));

            // 2. one UD SEND_ONLY, ICRC computed over the IP header we know we send
            byte[] payload = new byte[SIZE];
            for (int i = 0; i < SIZE; i++) {
                payload[i] = (byte) (i * 7);
            }
            byte[] roce = TestPackets.udSendOnly(serverQpn, PSN, QKEY, OUR_QPN, payload);
            int id = mode == Send.RAW4 ? 0x1234 : 0;
            byte[] ip = v6 ? TestPackets.ipv6Udp(local.getAddress(), guest.getAddress(), 4791, 4791, roce)
                    : TestPackets.ipv4Udp(ipv4(local), ipv4(guest), 4791, 4791, id, roce);
            TestPackets.sealIcrc(ip, v6 ? 40 : 20);
            MemorySegment seg = arena.allocate(roce.length);
            MemorySegment.copy(ip, ip.length - roce.length, seg, ValueLayout.JAVA_BYTE, 0, roce.length);
            SockAddr dst = SockAddr.of(guest, 4791);
            if (mode == Send.RAW4) {
                try (RawIpv4Socket raw = RawIpv4Socket.openSender()) {
                    raw.sendUdp(ipv4(local), 4791, dst, id, 0, 64, seg);
                }
            } else {
                if (mode == Send.UDP4_NO_DF) {
                    udp.setDontFragment(false);
                }
                assertEquals(roce.length, udp.send(seg, dst));
            }

            // 3. the reply
            MemorySegment into = arena.allocate(4096);
            SockAddr from = new SockAddr();
            udp.setReceiveTimeout(rxeAccepts && mode != Send.UDP6_NO_ZERO_RX ? 30_000 : 8_000);
            int n = udp.receive(into, from);
            if (!rxeAccepts) {
                assertEquals(-1, n, "rxe answered a packet whose ICRC used an ID it never saw");
                assertEquals(rcvdBefore, rcvdPkts(), "rxe's rcvd_pkts moved");
                return;
            }
            if (mode == Send.UDP6_NO_ZERO_RX) {
                byte[] u = captureReply(cap6, 30_000);
                assertNotNull(u, "rxe's reply was not even captured");
                assertEquals(0, TestPackets.getShort(u, 6), "rxe's IPv6 UDP checksum");
                assertFalse(udp.awaitReadable(1000), "a checksum-0 datagram reached a socket without UDP_NO_CHECK6_RX");
                assertTrue(rcvdPkts() > rcvdBefore, "rxe's rcvd_pkts did not move");
                return;
            }
            assertTrue(n > 0, "no reply from rxe (" + mode + ")");
            byte[] reply = into.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE);
            assertEquals(0x64, reply[0] & 0xFF, "opcode UD SEND_ONLY");
            assertEquals(OUR_QPN, TestPackets.getInt(reply, 4) & 0xFFFFFF, "dest QPN");
            assertEquals(QKEY, TestPackets.getInt(reply, 12), "Q_Key");
            assertEquals(serverQpn, TestPackets.getInt(reply, 16) & 0xFFFFFF, "src QPN");
            assertEquals(guest, from.toInetSocketAddress().getAddress());
            int udpLen = 8 + n;
            if (v6) {
                byte[] u = captureReply(cap6, 5_000);
                assertNotNull(u, "reply not captured");
                assertEquals(0, TestPackets.getShort(u, 6), "rxe's IPv6 UDP checksum");
                byte[] rebuilt = TestPackets.ipv6Udp(guest.getAddress(), local.getAddress(), from.port(), 4791, reply);
                assertEquals(TestPackets.wireIcrc(reply), TestPackets.icrc(rebuilt, 40), "ICRC of rxe's IPv6 reply");
            } else {
                byte[] rebuilt = TestPackets.ipv4Udp(ipv4(guest), ipv4(local), from.port(), 4791, 0, reply);
                int solved = Ipv4IdSolver.solve(TestPackets.icrc(rebuilt, 20), TestPackets.wireIcrc(reply), udpLen);
                byte[] seen = captureReply4(cap4, from.port());
                assertNotNull(seen, "reply not captured");
                int realId = TestPackets.getShort(seen, 4);
                System.out.printf("rxe reply IPv4 ID 0x%04x (captured), 0x%04x (solved from the ICRC)%n", realId, solved);
                assertEquals(realId, solved, "ID recovered from the ICRC");
            }
            assertTrue(rcvdPkts() > rcvdBefore, "rxe's rcvd_pkts did not move");
            assertTrue(server.waitFor(60, TimeUnit.SECONDS), "ibv_ud_pingpong did not finish");
            assertEquals(0, server.exitValue(), "ibv_ud_pingpong exit status");
        } finally {
            server.destroy(); // guest.sh then kills the server's process group in the guest
            server.waitFor(20, TimeUnit.SECONDS);
            System.out.println("guest ibv_ud_pingpong (" + mode + "):\n" + Files.readString(log));
            Files.delete(log);
        }
    }

    private static int ipv4(InetAddress a) {
        byte[] b = a.getAddress();
        return TestPackets.getInt(b, 0);
    }

    private static byte[] captureReply(RawIpv6Udp cap, int timeoutMs) throws IOException {
        for (int i = 0; i < 1000; i++) {
            byte[] u = cap.receive(timeoutMs);
            if (u == null) {
                return null;
            }
            if (TestPackets.getShort(u, 2) == 4791 && (u[8] & 0xFF) == 0x64) {
                return u;
            }
        }
        return null;
    }

    private byte[] captureReply4(RawIpv4Socket cap, int srcPort) throws IOException {
        MemorySegment buf = arena.allocate(4096);
        for (int i = 0; i < 1000; i++) {
            int n = cap.receive(buf, 5_000);
            if (n < 0) {
                return null;
            }
            byte[] p = buf.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE);
            if (TestPackets.getShort(p, 20) == srcPort && TestPackets.getShort(p, 22) == 4791) {
                return p;
            }
        }
        return null;
    }

    /** Connects to the pingpong server's TCP port, retrying while it starts (bounded: 60 s). */
    private static Socket connect() throws IOException, InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (true) {
            Socket s = new Socket();
            try {
                s.connect(new InetSocketAddress(GUEST_TCP, 18515), 2000);
                s.setSoTimeout(30_000);
                return s;
            } catch (IOException e) {
                s.close();
                if (System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(250); // waiting for another machine's server to start: nothing to signal on
            }
        }
    }

    private static Process guest(Path log, String... args) throws IOException {
        String[] cmd = new String[args.length + 1];
        cmd[0] = VM.resolve("guest.sh").toString();
        System.arraycopy(args, 0, cmd, 1, args.length);
        return new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    }

    /** @return rxe0 port 1's rcvd_pkts (rxe counts a packet only after its ICRC checked out) */
    private static long rcvdPkts() throws IOException, InterruptedException {
        Process p = new ProcessBuilder(VM.resolve("guest.sh").toString(), "-t", "30", "rdma statistic show link rxe0/1")
                .redirectErrorStream(true).start();
        byte[] text;
        try (InputStream in = p.getInputStream()) {
            text = in.readAllBytes();
        }
        assertTrue(p.waitFor(40, TimeUnit.SECONDS));
        Matcher m = Pattern.compile("rcvd_pkts (\\d+)").matcher(new String(text, StandardCharsets.US_ASCII));
        assertTrue(m.find(), "no rcvd_pkts in: " + new String(text, StandardCharsets.US_ASCII));
        return Long.parseLong(m.group(1));
    }
}
