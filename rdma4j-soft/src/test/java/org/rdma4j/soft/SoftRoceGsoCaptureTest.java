// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
import org.rdma4j.libc.Libc;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.wire.RocePacket;
import org.rdma4j.wire.RoceParser;
import org.rdma4j.wire.RoceStatus;
import org.rdma4j.wire.net.RawIpv4Socket;

/**
 * UDP GSO on the wire: the RoCE link sends runs of packets as one GSO send, and seals packet i of a run with
 * IPv4 ID i, because that is the ID Linux gives it (docs/roce-udp.md). On a host's loopback the kernel never
 * cuts a GSO train (lo passes it whole to the receiver), so this test makes the cut happen before any capture
 * point: in a network namespace of its own whose {@code lo} has {@code gso_max_segs 1}, the stack segments
 * every train in software (validate_xmit_skb, inet_gso_segment) as it would for a NIC without UDP
 * segmentation offload, i.e. exactly what an rdma_rxe peer receives. A raw socket then sees each packet with
 * the ID it really carries, and every one must pass rxe's ICRC check against that ID (not solved), and tshark
 * must decode them all without a malformed packet. Needs root (netns, CAP_NET_RAW) and iproute2; skipped with
 * a message otherwise.
 *
 * <p>A second test runs the same traffic on the host's loopback, where the receiver gets the trains coalesced
 * (UDP GRO) and must split them back into packets.
 */
class SoftRoceGsoCaptureTest {
    private static final int MSG = 65536;
    /** rxe0's IPv4 source address, 127.0.0.1, as the capture's header holds it read as a native int. */
    private static final int A_ADDR = MemorySegment.ofArray(new byte[] {127, 0, 0, 1}).get(ValueLayout.JAVA_INT_UNALIGNED, 0);

    @Test
    void everySegmentOfAGsoTrainCarriesTheIpv4IdItsIcrcCovers() throws Throwable {
        inNamespace(false);
    }

    /**
     * With UDP checksum 0 (as rxe sends IPv4) Linux refuses GSO (EINVAL): the link counts it once, resends
     * that train one datagram per packet resealed for the ID 0 each now carries, and sends without GSO from
     * then on. Every packet must still pass the exact ICRC check.
     */
    @Test
    void aRefusedGsoSendIsResentOneDatagramPerPacketSealedForItsId() throws Throwable {
        inNamespace(true);
    }

    private void inNamespace(boolean refuse) throws Throwable {
        String ns = "rdma4j-gso-" + ProcessHandle.current().pid() + (refuse ? "-r" : "");
        Assumptions.assumeTrue(run("ip", "netns", "add", ns) == 0, "cannot create a network namespace (needs root and iproute2)");
        try {
            assertEquals(0, run("ip", "-n", ns, "link", "set", "lo", "up"));
            // one segment per skb at most: the stack cuts every GSO train before lo, so a capture sees the packets
            assertEquals(0, run("ip", "-n", ns, "link", "set", "lo", "gso_max_segs", "1"), "ip link set lo gso_max_segs 1");
            List<byte[]> captured = new ArrayList<>();
            long[] sent = new long[1];
            long gsoSends;
            long refused;
            int fd = nsOpen("/run/netns/" + ns);
            int home = nsOpen("/proc/thread-self/ns/net");
            RawIpv4Socket capture;
            SoftFabric fa;
            SoftFabric fb;
            SoftDevice a;
            SoftDevice b;
            ManualClock clock = new ManualClock();
            // Sockets belong to the namespace of the thread that creates them: enter it to create the devices'
            // sockets and the capture socket, then come back; the receive agents use the sockets from anywhere.
            setns(fd);
            try {
                capture = RawIpv4Socket.openCapture();
                capture.setReceiveBufferForced(64 << 20);
                fa = new SoftFabric(clock);
                fb = new SoftFabric(clock);
                a = fa.addRoceDevice("rxe0", new RoceConfig(List.of(InetAddress.ofLiteral("127.0.0.1")), 4791, Mtu.MTU_4096));
                b = fb.addRoceDevice("rxe1", new RoceConfig(List.of(InetAddress.ofLiteral("127.0.0.2")), 4791, Mtu.MTU_4096));
                if (refuse) {
                    a.roceLink().ipv4ZeroChecksum(true);
                }
            } finally {
                setns(home);
                nsClose(fd);
                nsClose(home);
            }
            Thread reader = Thread.ofPlatform().name("capture").start(() -> {
                try (Arena ar = Arena.ofConfined()) {
                    MemorySegment buf = ar.allocate(65536);
                    while (!Thread.currentThread().isInterrupted()) {
                        int n = capture.receive(buf, 50);
                        if (n >= 28 && n <= buf.byteSize() && u16(buf, 22) == 4791) {
                            byte[] pkt = buf.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE);
                            synchronized (captured) {
                                captured.add(pkt);
                            }
                        }
                    }
                } catch (IOException closed) {
                    // done
                }
            });
            try {
                try {
                    traffic(a, b, 20260401L);
                } catch (AssertionError e) {
                    synchronized (captured) {
                        for (int i = 0; i < Math.min(40, captured.size()); i++) {
                            byte[] q = captured.get(i);
                            MemorySegment m = MemorySegment.ofArray(q);
                            System.out.println("capture " + i + " len=" + q.length + " id=" + u16(m, 4) + " udplen=" + u16(m, 24) + " op=" + (q[28] & 0xff) + " psn=" + (((q[37] & 0xff) << 16) | ((q[38] & 0xff) << 8) | (q[39] & 0xff)));
                        }
                    }
                    for (SoftDevice d : List.of(a, b)) {
                        StringBuilder sbd = new StringBuilder("capture " + d.name());
                        for (SoftCounter c : SoftCounter.values()) if (d.counter(c) != 0) sbd.append(' ').append(c).append('=').append(d.counter(c));
                        System.out.println(sbd);
                    }
                    throw e;
                }
                sent[0] = a.counter(SoftCounter.SENT_PKTS) + b.counter(SoftCounter.SENT_PKTS);
                gsoSends = a.counter(SoftCounter.ROCE_GSO_SENDS);
                refused = a.counter(SoftCounter.ROCE_GSO_REFUSED);
                awaitCount(captured, sent[0]);
            } finally {
                reader.interrupt();
                reader.join(5_000);
                capture.close();
                fa.close();
                fb.close();
            }
            if (refuse) {
                assertEquals(1, refused, "the kernel refused GSO once; the link stopped asking");
                assertEquals(0, gsoSends, "no train left as one GSO send");
            } else {
                assertEquals(0, refused);
                assertTrue(gsoSends > 0, "rxe0 sent GSO trains");
            }
            List<byte[]> got;
            synchronized (captured) {
                got = new ArrayList<>(captured);
            }
            assertEquals(sent[0], got.size(), "every packet sent is captured once, as a packet of its own");
            RoceParser exact = new RoceParser(RoceParser.IcrcCheck.EXACT);
            RocePacket pkt = new RocePacket();
            int nonZeroIds = 0;
            int nonZeroIdsFromA = 0;
            int maxId = 0;
            int readResponsesInTrains = 0;
            try (Arena ar = Arena.ofConfined()) {
                MemorySegment buf = ar.allocate(65536);
                for (int i = 0; i < got.size(); i++) {
                    byte[] p = got.get(i);
                    MemorySegment.copy(p, 0, buf, ValueLayout.JAVA_BYTE, 0, p.length);
                    int id = u16(buf, 4);
                    // lo leaves the UDP checksum to "hardware" (CHECKSUM_PARTIAL: the field holds only the
                    // pseudo-header sum), which no one computes on loopback; the ICRC masks the field anyway
                    buf.set(ValueLayout.JAVA_SHORT_UNALIGNED, 26, (short) 0);
                    // rxe_icrc_check: the ICRC over the packet's own IPv4 header, ID included
                    RoceStatus st = exact.parseIpPacket(pkt, buf, 0, p.length);
                    assertEquals(RoceStatus.OK, st, "packet " + i + " (IPv4 ID " + id + ", " + p.length + " B)");
                    nonZeroIds += id != 0 ? 1 : 0;
                    nonZeroIdsFromA += id != 0 && (buf.get(ValueLayout.JAVA_INT_UNALIGNED, 12) == A_ADDR) ? 1 : 0;
                    int op = pkt.opcode();
                    if (id != 0 && op >= 0x0D && op <= 0x0F) { // RC RDMA READ response FIRST/MIDDLE/LAST
                        readResponsesInTrains++;
                    }
                    maxId = Math.max(maxId, id);
                }
            }
            if (refuse) {
                // Only rxe0 refuses GSO (its zero UDP checksum): rxe1 may still send a short train (an ACK behind
                // its READ request in one flush), whose second segment carries ID 1.
                assertEquals(0, nonZeroIdsFromA, "one datagram per packet from rxe0: every ID is 0 (" + nonZeroIds
                        + " non-zero IDs in all)");
            } else {
                assertTrue(nonZeroIds > got.size() / 2, "GSO numbered the segments: " + nonZeroIds + " of " + got.size()
                        + " packets carry a non-zero ID");
                assertTrue(maxId < 64, "IDs count segments of one train (at most 64): max " + maxId);
                assertTrue(readResponsesInTrains > 0, "the responder sent its RDMA READ responses as GSO trains");
            }
            if (SoftRoceCapturedRcTest.tshark() == null) {
                System.out.println("SoftRoceGsoCaptureTest: tshark not installed, decode check skipped (apt-get install -y tshark)");
            } else {
                SoftRoceCapturedRcTest.assertTsharkDecodesClean(got, 4791);
            }
        } finally {
            run("ip", "netns", "del", ns);
        }
    }

    @Test
    void groReceivesAreSplitBackIntoPackets() throws Exception {
        int port = SoftRoceTestFabric.freeUdpPort();
        ManualClock clock = new ManualClock();
        try (SoftFabric fa = new SoftFabric(clock); SoftFabric fb = new SoftFabric(clock)) {
            SoftDevice a = fa.addRoceDevice("rxe0", new RoceConfig(List.of(InetAddress.ofLiteral("127.0.0.1")), port, null));
            SoftDevice b = fb.addRoceDevice("rxe1", new RoceConfig(List.of(InetAddress.ofLiteral("127.0.0.2")), port, null));
            traffic(a, b, 7L);
            assertTrue(a.counter(SoftCounter.ROCE_GSO_SENDS) > 0, "GSO trains sent");
            assertTrue(b.counter(SoftCounter.ROCE_GRO_RECEIVES) > 0, "lo delivers a GSO train to a GRO socket whole");
            assertEquals(0, b.counter(SoftCounter.DROP_MALFORMED) + b.counter(SoftCounter.ICRC_ERROR));
            assertEquals(0, a.counter(SoftCounter.DROP_MALFORMED) + a.counter(SoftCounter.ICRC_ERROR));
        }
    }

    /**
     * Back-to-back 64 KiB RDMA WRITEs on two QPs (path MTU 4096 and 1024: trains of 15 and up to 62
     * segments), a 64 KiB SEND and a 64 KiB RDMA READ (the responder's trains); checks the data that arrived.
     */
    private static void traffic(SoftDevice da, SoftDevice db, long seed) {
        SplittableRandom rnd = new SplittableRandom(seed);
        Gid ga = da.gid(0);
        Gid gb = db.gid(0);
        try (Arena arena = Arena.ofShared(); Context ca = da.open(); Context cb = db.open();
             ProtectionDomain pa = ca.allocPd(); ProtectionDomain pb = cb.allocPd();
             CompletionQueue qa = ca.createCq(256, null, 0); CompletionQueue qb = cb.createCq(256, null, 0)) {
            int writes = 8;
            MemorySegment src = arena.allocate((long) MSG * (writes + 1), 4096);
            MemorySegment dst = arena.allocate((long) MSG * (writes + 2), 4096);
            for (long i = 0; i < src.byteSize(); i += 8) {
                src.set(ValueLayout.JAVA_LONG, i, rnd.nextLong());
            }
            AccessFlag[] all = {AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE, AccessFlag.REMOTE_READ};
            try (MemoryRegion ma = pa.regMr(src, AccessFlag.of(all)); MemoryRegion mb = pb.regMr(dst, AccessFlag.of(all))) {
                for (Mtu mtu : List.of(Mtu.MTU_4096, Mtu.MTU_1024)) {
                    dst.fill((byte) 0);
                    try (QueuePair x = qp(pa, qa); QueuePair y = qp(pb, qb)) {
                        connect(x, y.qpNum(), gb, mtu);
                        connect(y, x.qpNum(), ga, mtu);
                        y.postRecv(new RecvWorkRequest().wrId(99).singleSge(mb.address() + (long) MSG * writes, MSG, mb.lkey()));
                        SendWorkRequest w = new SendWorkRequest();
                        for (int i = 0; i < writes; i++) {
                            w.clear().wrId(i).opcode(WrOpcode.RDMA_WRITE).sendFlags(SendFlags.SIGNALED)
                                    .singleSge(ma.address() + (long) MSG * i, MSG, ma.lkey())
                                    .remoteAddr(mb.address() + (long) MSG * i).rkey(mb.rkey());
                            x.postSend(w);
                        }
                        w.clear().wrId(writes).opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                                .singleSge(ma.address() + (long) MSG * writes, MSG, ma.lkey());
                        x.postSend(w);
                        // the other direction: rxe1 READs rxe0's first 64 KiB, so rxe0's responder sends the trains
                        w.clear().wrId(writes + 1).opcode(WrOpcode.RDMA_READ).sendFlags(SendFlags.SIGNALED)
                                .singleSge(mb.address() + (long) MSG * (writes + 1), MSG, mb.lkey())
                                .remoteAddr(ma.address()).rkey(ma.rkey());
                        y.postSend(w);
                        awaitCompletions(qa, writes + 1, qb, 2);
                    }
                    for (int i = 0; i <= writes; i++) {
                        assertEquals(-1, dst.asSlice((long) MSG * i, MSG).mismatch(src.asSlice((long) MSG * i, MSG)),
                                "message " + i + " at MTU " + mtu);
                    }
                    assertEquals(-1, dst.asSlice((long) MSG * (writes + 1), MSG).mismatch(src.asSlice(0, MSG)), "READ at MTU " + mtu);
                }
            }
        }
    }

    /** Polls both CQs (which also receives on this thread) until the counts complete; bounded in time. */
    private static void awaitCompletions(CompletionQueue qa, int na, CompletionQueue qb, int nb) {
        WorkCompletion[] wcs = new WorkCompletion[16];
        for (int i = 0; i < wcs.length; i++) {
            wcs[i] = new WorkCompletion();
        }
        int[] left = {na, nb};
        CompletionQueue[] cqs = {qa, qb};
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (left[0] > 0 || left[1] > 0) {
            for (int c = 0; c < 2; c++) {
                int n = cqs[c].poll(wcs, wcs.length);
                for (int i = 0; i < n; i++) {
                    assertEquals(WcStatus.SUCCESS, wcs[i].status(), "wr_id " + wcs[i].wrId());
                    left[c]--;
                }
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("completions missing: " + left[0] + " requester, " + left[1] + " responder side");
            }
            Thread.onSpinWait();
        }
    }

    private static void awaitCount(List<byte[]> captured, long n) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() < deadline) {
            synchronized (captured) {
                if (captured.size() >= n) {
                    return;
                }
            }
            Thread.onSpinWait();
        }
    }

    private static QueuePair qp(ProtectionDomain pd, CompletionQueue cq) {
        QueuePair q = pd.createQp(new QpInitAttributes().type(QpType.RC).sendCq(cq).recvCq(cq)
                .cap(new QpCapabilities(32, 4, 1, 1, 0)));
        q.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1)
                .accessFlags(AccessFlag.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE, AccessFlag.REMOTE_READ)));
        return q;
    }

    private static void connect(QueuePair q, int peer, Gid dgid, Mtu mtu) {
        q.modify(new QpAttributes().state(QpState.RTR).pathMtu(mtu).destQpNum(peer).rqPsn(0).maxDestRdAtomic(1)
                .minRnrTimer(1).av(new AhAttributes().dgid(dgid).sgidIndex(0).hopLimit(64)));
        q.modify(new QpAttributes().state(QpState.RTS).sqPsn(0).timeout(14).retryCnt(7).rnrRetry(7).maxRdAtomic(1));
    }

    private static int u16(MemorySegment s, long off) {
        return Short.toUnsignedInt(s.get(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN), off));
    }

    private static int run(String... cmd) throws IOException, InterruptedException {
        Process p;
        try {
            p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        } catch (IOException noBinary) {
            return -1;
        }
        if (!p.waitFor(20, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            return -1;
        }
        return p.exitValue();
    }

    // setns(2) for this thread only (CLONE_NEWNET)
    private static int nsOpen(String path) throws IOException {
        try (Arena ar = Arena.ofConfined()) {
            MemorySegment st = Libc.newCallState(ar);
            int fd = Libc.open(st, ar.allocateFrom(path), Libc.O_CLOEXEC);
            if (fd < 0) {
                throw Libc.error("open", st, path);
            }
            return fd;
        }
    }

    private static void setns(int fd) throws IOException {
        try (Arena ar = Arena.ofConfined()) {
            MemorySegment st = Libc.newCallState(ar);
            if (Libc.setns(st, fd, Libc.CLONE_NEWNET) != 0) {
                throw Libc.error("setns(CLONE_NEWNET)", st, "");
            }
        }
    }

    private static void nsClose(int fd) {
        try (Arena ar = Arena.ofConfined()) {
            Libc.close(Libc.newCallState(ar), fd);
        }
    }
}
