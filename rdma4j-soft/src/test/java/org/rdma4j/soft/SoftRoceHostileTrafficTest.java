// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.util.List;
import java.util.SplittableRandom;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
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
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.wire.Icrc;
import org.rdma4j.wire.PseudoHeader;
import org.rdma4j.wire.RoceOpcode;
import org.rdma4j.wire.RocePacket;
import org.rdma4j.wire.net.SockAddr;
import org.rdma4j.wire.net.UdpSocket;

/**
 * Hostile traffic from the wire: a RoCE device with live RC, UC and UD QPs, registered memory with
 * guard bytes on both sides, and posted receives is sent a seeded mix of garbage and well-formed
 * packets (valid ICRC) with random opcodes, QPNs, PSNs, keys, addresses and lengths, through a real UDP
 * socket. Every datagram must be accounted for (received or counted as dropped), nothing may escape as
 * an engine error, and not one byte outside the registered regions may change. The seed is printed.
 */
class SoftRoceHostileTrafficTest {
    private static final int MR_BYTES = 8192;
    private static final int GUARD = 4096;
    private static final byte GUARD_BYTE = (byte) 0xA5;

    @Test
    void hostilePacketsAreCountedAndNeverTouchMemoryOutsideRegions() throws Exception {
        run(Long.getLong("rdma4j.fuzz.seed", System.nanoTime()), 3_000);
    }

    @Test
    @Tag("slow")
    void manyHostilePackets() throws Exception {
        run(Long.getLong("rdma4j.fuzz.seed", System.nanoTime()), 200_000);
    }

    private static void run(long seed, int packets) throws Exception {
        System.out.println("SoftRoceHostileTrafficTest seed=" + seed + " (rerun with -Drdma4j.fuzz.seed=" + seed + ")");
        SplittableRandom rnd = new SplittableRandom(seed);
        int port = SoftRoceTestFabric.freeUdpPort();
        ManualClock clock = new ManualClock();
        InetAddress me = InetAddress.getByName("127.0.0.1");
        InetAddress peer = InetAddress.getByName("127.0.0.2");
        try (SoftFabric fabric = new SoftFabric(clock);
             Arena arena = Arena.ofShared();
             UdpSocket attacker = UdpSocket.open(peer, port)) {
            SoftDevice dev = fabric.addRoceDevice("rxe0", new RoceConfig(List.of(me), port, null));
            Gid peerGid = Gid.ofInetAddress(peer);
            MemorySegment all = arena.allocate(GUARD + MR_BYTES + GUARD, 4096);
            all.fill(GUARD_BYTE);
            MemorySegment region = all.asSlice(GUARD, MR_BYTES);
            try (Context ctx = dev.open(); ProtectionDomain pd = ctx.allocPd(); CompletionQueue cq = ctx.createCq(4096, null, 0)) {
                MemoryRegion mr = pd.regMr(region, AccessFlag.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE,
                        AccessFlag.REMOTE_READ, AccessFlag.REMOTE_ATOMIC));
                QueuePair rc = qp(pd, cq, QpType.RC, peerGid, 0x40);
                QueuePair uc = qp(pd, cq, QpType.UC, peerGid, 0x41);
                QueuePair ud = qp(pd, cq, QpType.UD, null, 0);
                RecvWorkRequest rwr = new RecvWorkRequest();
                for (QueuePair q : List.of(rc, uc, ud)) {
                    for (int i = 0; i < 64; i++) {
                        rwr.wrId(i).singleSge(mr.address() + (i % 4) * 2048L, 2048, mr.lkey());
                        q.postRecv(rwr);
                    }
                }
                int[] qpns = {rc.qpNum(), uc.qpNum(), ud.qpNum()};
                MemorySegment buf = arena.allocate(8192, 64);
                RocePacket pkt = new RocePacket();
                Icrc icrc = new Icrc();
                PseudoHeader ip = new PseudoHeader().gids(peerGid.toBytes(), Gid.ofInetAddress(me).toBytes()).ports(port, port);
                SockAddr to = SockAddr.of(me, port);
                long before = dev.counter(SoftCounter.RCVD_PKTS) + drops(dev);
                WorkCompletion[] wcs = new WorkCompletion[64];
                for (int i = 0; i < wcs.length; i++) {
                    wcs[i] = new WorkCompletion();
                }
                int sent = 0;
                for (int i = 0; i < packets; i++) {
                    int len;
                    if (rnd.nextInt(4) == 0) {
                        len = 1 + rnd.nextInt(200); // garbage
                        for (int b = 0; b < len; b++) {
                            buf.set(ValueLayout.JAVA_BYTE, b, (byte) rnd.nextInt());
                        }
                    } else {
                        len = wellFormed(rnd, pkt, icrc, ip, buf, qpns, mr, rc.qpNum() + 1);
                    }
                    if (attacker.send(buf.asSlice(0, len), to) > 0) {
                        sent++;
                    }
                    if ((i & 63) == 63) {
                        awaitAccounted(dev, before + sent);
                        cq.poll(wcs, wcs.length); // keep the CQ from overflowing: its errors are legitimate
                        clock.advance(1_000_000_000L); // fire RNR/retransmit timers the traffic armed
                    }
                }
                awaitAccounted(dev, before + sent);
                assertEquals(0, dev.counter(SoftCounter.ROCE_RX_ERRORS), "engine errors on hostile input (seed " + seed + ")");
                for (long o = 0; o < GUARD; o++) {
                    if (all.get(ValueLayout.JAVA_BYTE, o) != GUARD_BYTE
                            || all.get(ValueLayout.JAVA_BYTE, GUARD + MR_BYTES + o) != GUARD_BYTE) {
                        throw new AssertionError("memory outside the MR changed at guard offset " + o + " (seed " + seed + ")");
                    }
                }
                assertTrue(drops(dev) > 0, "garbage must be counted as dropped");
                assertTrue(dev.counter(SoftCounter.RCVD_PKTS) > packets / 2, "well-formed packets reach the dispatcher: "
                        + dev.counter(SoftCounter.RCVD_PKTS) + " of " + packets);
                for (QueuePair q : List.of(rc, uc, ud)) {
                    q.close();
                }
                mr.close();
            }
        }
    }

    private static long drops(SoftDevice d) {
        long n = 0;
        for (SoftCounter c : List.of(SoftCounter.DROP_MALFORMED, SoftCounter.ICRC_ERROR)) {
            n += d.counter(c);
        }
        return n;
    }

    /** Waits (bounded) until the device has received or counted as dropped {@code n} datagrams. */
    private static void awaitAccounted(SoftDevice dev, long n) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        for (long spins = 0; spins < 2_000_000_000L; spins++) {
            if (dev.counter(SoftCounter.RCVD_PKTS) + drops(dev) >= n) {
                return;
            }
            if (System.nanoTime() > deadline) {
                break;
            }
            Thread.onSpinWait();
        }
        throw new AssertionError("device accounted for " + (dev.counter(SoftCounter.RCVD_PKTS) + drops(dev)) + " of " + n
                + " datagrams (a datagram neither received nor counted as dropped)");
    }

    private static final int[] OPCODES = opcodes();

    private static int[] opcodes() {
        int[] all = new int[256];
        int n = 0;
        for (int op = 0; op < 256; op++) {
            if (RoceOpcode.known(op)) {
                all[n++] = op;
            }
        }
        return java.util.Arrays.copyOf(all, n);
    }

    private static int wellFormed(SplittableRandom r, RocePacket pkt, Icrc icrc, PseudoHeader ip, MemorySegment buf,
            int[] qpns, MemoryRegion mr, int strayQpn) {
        int op = OPCODES[r.nextInt(OPCODES.length)];
        int m = RoceOpcode.mask(op);
        int pay = 0;
        if ((m & RoceOpcode.M_PAYLOAD) != 0) {
            pay = (m & RoceOpcode.M_ATOMIC_WRITE) != 0 ? 8 : r.nextInt(3) == 0 ? 4096 : r.nextInt(1, 2100);
            if ((m & RoceOpcode.M_END) == 0) {
                pay = (pay + 3) & ~3; // only a last packet may be short
            }
        }
        int len = pkt.build(buf, 0, op, pay);
        int qpn = r.nextInt(8) == 0 ? strayQpn : qpns[r.nextInt(qpns.length)];
        pkt.bth().destQp(qpn).psn(r.nextInt(4) == 0 ? r.nextInt(1 << 24) : r.nextInt(8)).ackReq(r.nextBoolean())
                .solicited(r.nextBoolean());
        long va = mr.address() + r.nextLong(-64, mr.length() + 64);
        int rkey = r.nextInt(4) == 0 ? r.nextInt() : mr.rkey();
        if ((m & RoceOpcode.M_RETH) != 0) {
            pkt.reth().va(va).rkey(rkey).dmaLength(r.nextInt(4) == 0 ? r.nextInt() : r.nextInt(0, 9000));
        }
        if ((m & RoceOpcode.M_ATMETH) != 0) {
            pkt.atomicEth().va(r.nextBoolean() ? va & ~7L : va).rkey(rkey).swapAdd(r.nextLong()).compare(r.nextLong());
        }
        if ((m & RoceOpcode.M_DETH) != 0) {
            pkt.deth().qkey(r.nextBoolean() ? 0x11111111 : r.nextInt()).srcQp(r.nextInt(1 << 24));
        }
        if ((m & RoceOpcode.M_AETH) != 0) {
            pkt.aeth().syndrome(r.nextInt(256)).msn(r.nextInt(1 << 24));
        }
        for (int b = 0; b < pay; b++) {
            buf.set(ValueLayout.JAVA_BYTE, pkt.payloadOffset() + b, (byte) r.nextInt());
        }
        pkt.seal(icrc, ip);
        return len;
    }

    private static QueuePair qp(ProtectionDomain pd, CompletionQueue cq, QpType type, Gid peer, int peerQpn) {
        QueuePair q = pd.createQp(new QpInitAttributes().type(type).sendCq(cq).recvCq(cq)
                .cap(new QpCapabilities(16, 64, 1, 1, 0)));
        AccessFlag[] acc = {AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE, AccessFlag.REMOTE_READ, AccessFlag.REMOTE_ATOMIC};
        if (type == QpType.UD) {
            q.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1).qkey(0x11111111));
            q.modify(new QpAttributes().state(QpState.RTR));
            q.modify(new QpAttributes().state(QpState.RTS).sqPsn(0));
            return q;
        }
        q.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1)
                .accessFlags(type == QpType.RC ? AccessFlag.of(acc) : AccessFlag.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE)));
        QpAttributes rtr = new QpAttributes().state(QpState.RTR).pathMtu(Mtu.MTU_4096).destQpNum(peerQpn).rqPsn(0)
                .av(new AhAttributes().dgid(peer).sgidIndex(0).hopLimit(64));
        if (type == QpType.RC) {
            rtr.maxDestRdAtomic(4).minRnrTimer(1);
        }
        q.modify(rtr);
        QpAttributes rts = new QpAttributes().state(QpState.RTS).sqPsn(0);
        if (type == QpType.RC) {
            rts.timeout(14).retryCnt(7).rnrRetry(7).maxRdAtomic(4);
        }
        q.modify(rts);
        return q;
    }
}
