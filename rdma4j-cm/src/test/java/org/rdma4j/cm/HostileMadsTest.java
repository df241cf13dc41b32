// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.EnumMap;
import java.util.Map;
import java.util.SplittableRandom;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
import org.rdma4j.soft.SoftCounter;
import org.rdma4j.soft.SoftDevice;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.wire.Icrc;
import org.rdma4j.wire.PseudoHeader;
import org.rdma4j.wire.RocePacket;
import org.rdma4j.wire.net.SockAddr;
import org.rdma4j.wire.net.UdpSocket;

/**
 * Hostile MADs through a real UDP socket: a RoCE device whose CM serves a live connection and a listener
 * is sent seeded MADs (valid RoCEv2 UD packets to QP 1, ICRC right) of every kind of wrongness: short,
 * wrong base or class version, class or method the CM does not take, unmatched responses, unknown
 * attributes, messages for unknown communications, REQs with broken headers or fields, wrong Q_Keys,
 * garbage. Every MAD is counted under the reason the MAD layer or the CM drops it, none disturbs the
 * connection (it still carries data both ways) and nothing throws. The seed is printed.
 */
class HostileMadsTest {
    private enum Kind { SHORT, BASE_VERSION, CLASS_VERSION, OTHER_CLASS, METHOD, RESPONSE, ATTRIBUTE, UNMATCHED, REQ, QKEY, GARBAGE }

    @Test
    void hostileMadsAreCountedAndChangeNoConnection() throws Exception {
        run(Long.getLong("rdma4j.fuzz.seed", System.nanoTime()), 2_000);
    }

    @Test
    @Tag("slow")
    void manyHostileMads() throws Exception {
        run(Long.getLong("rdma4j.fuzz.seed", System.nanoTime()), 100_000);
    }

    private static void run(long seed, int count) throws Exception {
        System.out.println("HostileMadsTest seed=" + seed + " (rerun with -Drdma4j.fuzz.seed=" + seed + ")");
        SplittableRandom rnd = new SplittableRandom(seed);
        ManualClock clock = new ManualClock();
        try (SoftCmFabric f = SoftCmFabric.roce(clock); Arena arena = Arena.ofShared()) {
            UserCm cmB = f.userCm(1);
            SoftDevice devB = f.device(1);
            int udpPort = f.udpPort();
            try (CmEventChannel chA = f.cm(0).createEventChannel(); CmEventChannel chB = f.cm(1).createEventChannel();
                 UdpSocket attacker = UdpSocket.open(InetAddress.ofLiteral("127.0.0.3"), udpPort)) {
                CmId listener = chB.createId(PortSpace.TCP);
                listener.bindAddr(new InetSocketAddress(f.address(1), 7174));
                listener.listen(1024);
                CmId client = chA.createId(PortSpace.TCP);
                client.resolveAddr(new InetSocketAddress(f.address(0), 0), new InetSocketAddress(f.address(1), 7174),
                        Duration.ofSeconds(2));
                take(f, chA, CmEventType.ADDR_RESOLVED).ack();
                client.resolveRoute(Duration.ofSeconds(2));
                take(f, chA, CmEventType.ROUTE_RESOLVED).ack();
                ProtectionDomain pdA = client.context().allocPd();
                QueuePair qpA = client.createQp(pdA, new QpInitAttributes().type(QpType.RC).cap(new QpCapabilities(8, 8, 1, 1, 0)));
                client.connect(new ConnParam().responderResources(1).initiatorDepth(1).retryCount(7).rnrRetryCount(7));
                CmEvent req = take(f, chB, CmEventType.CONNECT_REQUEST);
                CmId server = req.id();
                req.ack();
                ProtectionDomain pdB = server.context().allocPd();
                QueuePair qpB = server.createQp(pdB, new QpInitAttributes().type(QpType.RC).cap(new QpCapabilities(8, 8, 1, 1, 0)));
                server.accept(null);
                take(f, chA, CmEventType.ESTABLISHED).ack();
                take(f, chB, CmEventType.ESTABLISHED).ack();

                Map<Kind, Integer> sent = new EnumMap<>(Kind.class);
                Map<CmCounter, Long> before = snapshot(cmB);
                long qkeyBefore = devB.counter(SoftCounter.DROP_QKEY_VIOLATION);
                long cmReceivedBefore = cmB.counter(CmCounter.MADS_RECEIVED);
                MemorySegment buf = arena.allocate(4096, 64);
                RocePacket pkt = new RocePacket();
                Icrc icrc = new Icrc();
                Gid attackerGid = Gid.ofInetAddress(InetAddress.ofLiteral("127.0.0.3"));
                Gid target = Gid.ofInetAddress(f.address(1));
                PseudoHeader ip = new PseudoHeader().gids(attackerGid.toBytes(), target.toBytes()).ports(udpPort, udpPort);
                SockAddr to = SockAddr.of(f.address(1), udpPort);
                int rejected = 0;
                for (int i = 0; i < count; i++) {
                    Kind k = Kind.values()[rnd.nextInt(Kind.values().length)];
                    byte[] mad = hostile(k, rnd);
                    int pay = k == Kind.SHORT ? rnd.nextInt(0, 256) : Mad.SIZE;
                    int len = pkt.build(buf, 0, 0x64, pay); // UD SEND_ONLY
                    pkt.bth().destQp(1).psn(rnd.nextInt(1 << 24)).pkey(0xFFFF);
                    pkt.deth().qkey(k == Kind.QKEY ? rnd.nextInt(0x7FFF_FFFF) : 0x8001_0000).srcQp(1);
                    MemorySegment.copy(mad, 0, buf, ValueLayout.JAVA_BYTE, pkt.payloadOffset(), pay);
                    pkt.seal(icrc, ip);
                    attacker.send(buf.asSlice(0, len), to);
                    sent.merge(k, 1, Integer::sum);
                    if ((i & 31) == 31) {
                        rejected += settle(f, cmB, cmReceivedBefore, devB, qkeyBefore, sent, chB);
                    }
                }
                rejected += settle(f, cmB, cmReceivedBefore, devB, qkeyBefore, sent, chB);

                Map<CmCounter, Long> d = delta(before, snapshot(cmB));
                String ctx = "seed " + seed + " sent " + sent + " counted " + d;
                assertEquals(sent.getOrDefault(Kind.SHORT, 0), d.get(CmCounter.DROP_TRUNCATED).intValue(), ctx);
                assertEquals(sent.getOrDefault(Kind.BASE_VERSION, 0), d.get(CmCounter.DROP_BAD_BASE_VERSION).intValue(), ctx);
                assertEquals(sent.getOrDefault(Kind.CLASS_VERSION, 0) + sent.getOrDefault(Kind.OTHER_CLASS, 0),
                        d.get(CmCounter.DROP_NO_AGENT).intValue(), ctx);
                assertEquals(sent.getOrDefault(Kind.METHOD, 0), d.get(CmCounter.DROP_BAD_METHOD).intValue(), ctx);
                assertEquals(sent.getOrDefault(Kind.RESPONSE, 0), d.get(CmCounter.DROP_UNMATCHED_RESPONSE).intValue(), ctx);
                assertEquals(sent.getOrDefault(Kind.ATTRIBUTE, 0), d.get(CmCounter.CM_DROP_UNKNOWN_ATTRIBUTE).intValue(), ctx);
                assertEquals(sent.getOrDefault(Kind.QKEY, 0), (int) (devB.counter(SoftCounter.DROP_QKEY_VIOLATION) - qkeyBefore), ctx);
                assertTrue(d.get(CmCounter.CM_DROP_UNMATCHED) + d.get(CmCounter.CM_DUPLICATE_DREQ)
                        + d.get(CmCounter.CM_DROP_BAD_STATE) >= sent.getOrDefault(Kind.UNMATCHED, 0) / 2, ctx);
                assertTrue(d.get(CmCounter.CM_REJECTS_SENT) + rejected > 0 || sent.getOrDefault(Kind.REQ, 0) == 0, ctx);

                // the connection is untouched: data both ways, no event on either side
                MemoryRegion mrA = pdA.regMr(arena.allocate(4096), AccessFlag.of(AccessFlag.LOCAL_WRITE));
                MemoryRegion mrB = pdB.regMr(arena.allocate(4096), AccessFlag.of(AccessFlag.LOCAL_WRITE));
                exchange(f, qpA, mrA, server, qpB, mrB, client);
                exchange(f, qpB, mrB, client, qpA, mrA, server);
                for (int i = 0; i < 100; i++) {
                    f.progress();
                }
                CmEvent stray = chA.pollEvent();
                assertEquals(null, stray, ctx);
                mrA.close();
                mrB.close();
                client.close();
                server.close();
                for (CmEvent e; (e = chB.pollEvent()) != null; ) {
                    CmId id = e.type() == CmEventType.CONNECT_REQUEST ? e.id() : null;
                    e.ack();
                    if (id != null) {
                        id.close();
                    }
                }
                listener.close();
                pdA.close();
                pdB.close();
            }
        }
    }

    private static void exchange(SoftCmFabric f, QueuePair from, MemoryRegion fmr, CmId toId, QueuePair to, MemoryRegion tmr,
                                 CmId fromId) {
        assertTrue(to.postRecv(new RecvWorkRequest().wrId(7).singleSge(tmr.address(), 64, tmr.lkey())));
        assertTrue(from.postSend(new SendWorkRequest().wrId(8).opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                .singleSge(fmr.address(), 16, fmr.lkey())));
        assertEquals(WcStatus.SUCCESS, poll(f, fromId.sendCq()).status());
        assertEquals(WcStatus.SUCCESS, poll(f, toId.recvCq()).status());
    }

    private static WorkCompletion poll(SoftCmFabric f, org.rdma4j.verbs.CompletionQueue cq) {
        WorkCompletion wc = new WorkCompletion();
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!cq.poll(wc)) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("no completion: the connection was disturbed");
            }
            f.progress();
            Thread.onSpinWait();
        }
        return wc;
    }

    /** Waits until B's CM has taken every MAD the device delivered; rejects connection requests. */
    private static int settle(SoftCmFabric f, UserCm cmB, long receivedBefore, SoftDevice devB, long qkeyBefore,
                              Map<Kind, Integer> sent, CmEventChannel chB) {
        long expected = sent.values().stream().mapToLong(Integer::longValue).sum() - sent.getOrDefault(Kind.QKEY, 0);
        long deadline = System.nanoTime() + 10_000_000_000L;
        int rejected = 0;
        while (true) {
            f.progress();
            for (CmEvent e; (e = chB.pollEvent()) != null; ) {
                CmId id = e.type() == CmEventType.CONNECT_REQUEST ? e.id() : null;
                e.ack();
                if (id != null) {
                    id.reject(null);
                    id.close();
                    rejected++;
                }
            }
            long got = cmB.counter(CmCounter.MADS_RECEIVED) - receivedBefore;
            long qkeys = devB.counter(SoftCounter.DROP_QKEY_VIOLATION) - qkeyBefore;
            if (got >= expected && qkeys >= sent.getOrDefault(Kind.QKEY, 0)) {
                return rejected;
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("the CM took " + got + " of " + expected + " MADs (" + qkeys + " Q_Key drops)");
            }
            Thread.onSpinWait();
        }
    }

    private static byte[] hostile(Kind k, SplittableRandom r) {
        byte[] m = new byte[Mad.SIZE];
        int attr = CmMsg.MRA + r.nextInt(CmMsg.SIDR_REP - CmMsg.MRA + 1); // MRA .. SIDR_REP
        Mad.cmHeader(m, attr, r.nextLong());
        switch (k) {
            case SHORT, UNMATCHED -> {
                Mad.put32(m, CmMsg.LOCAL_COMM_ID, r.nextInt());
                Mad.put32(m, CmMsg.REMOTE_COMM_ID, r.nextInt());
            }
            case BASE_VERSION -> m[Mad.OFF_BASE_VERSION] = (byte) (2 + r.nextInt(254));
            case CLASS_VERSION -> m[Mad.OFF_CLASS_VERSION] = (byte) (r.nextBoolean() ? 1 : 3 + r.nextInt(200));
            case OTHER_CLASS -> m[Mad.OFF_CLASS] = (byte) (r.nextBoolean() ? 0x01 + r.nextInt(6) : 0x08 + r.nextInt(100));
            case METHOD -> m[Mad.OFF_METHOD] = (byte) (r.nextBoolean() ? 1 + r.nextInt(2) : 4 + r.nextInt(0x7C));
            case RESPONSE -> m[Mad.OFF_METHOD] = (byte) (0x80 | r.nextInt(0x80));
            case ATTRIBUTE -> Mad.put16(m, Mad.OFF_ATTR_ID, r.nextBoolean() ? r.nextInt(0x10) : 0x19 + r.nextInt(0xFFE0));
            case REQ -> {
                Mad.put16(m, Mad.OFF_ATTR_ID, CmMsg.REQ);
                for (int i = Mad.HDR; i < Mad.SIZE; i++) {
                    m[i] = (byte) r.nextInt();
                }
                if (r.nextBoolean()) {
                    Mad.put64(m, CmMsg.REQ_SERVICE_ID, PortSpace.TCP.serviceId(7174)); // the listener's
                }
            }
            case QKEY -> {
            }
            case GARBAGE -> {
                for (int i = 0; i < Mad.SIZE; i++) {
                    m[i] = (byte) r.nextInt();
                }
                m[Mad.OFF_BASE_VERSION] = 1;
                m[Mad.OFF_CLASS] = Mad.CLASS_CM;
                m[Mad.OFF_CLASS_VERSION] = Mad.CM_CLASS_VERSION;
                m[Mad.OFF_METHOD] = Mad.METHOD_SEND;
                Mad.put16(m, Mad.OFF_ATTR_ID, attr); // garbage in every field of a message the CM knows
            }
            default -> throw new IllegalStateException();
        }
        return m;
    }

    private static CmEvent take(SoftCmFabric f, CmEventChannel ch, CmEventType t) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (System.nanoTime() < deadline) {
            f.progress();
            CmEvent e = ch.pollEvent();
            if (e != null) {
                assertEquals(t, e.type(), e.toString());
                return e;
            }
        }
        throw new AssertionError("no " + t);
    }

    private static Map<CmCounter, Long> snapshot(UserCm cm) {
        Map<CmCounter, Long> m = new EnumMap<>(CmCounter.class);
        for (CmCounter c : CmCounter.values()) {
            m.put(c, cm.counter(c));
        }
        return m;
    }

    private static Map<CmCounter, Long> delta(Map<CmCounter, Long> a, Map<CmCounter, Long> b) {
        Map<CmCounter, Long> m = new EnumMap<>(CmCounter.class);
        for (CmCounter c : CmCounter.values()) {
            m.put(c, b.get(c) - a.get(c));
        }
        return m;
    }
}
