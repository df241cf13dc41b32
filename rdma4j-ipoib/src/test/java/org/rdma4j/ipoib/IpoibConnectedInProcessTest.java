// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.rdma4j.cm.CmCounter;
import org.rdma4j.cm.UserCm;
import org.rdma4j.common.ManualClock;
import org.rdma4j.dma.DmaChecker;
import org.rdma4j.dma.DmaConfig;
import org.rdma4j.soft.SoftDevice;
import org.rdma4j.soft.SoftFabric;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.PortState;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * Connected mode (RFC 4755) between interfaces on the in-process fabric, the IP side in memory: connections
 * made with the IB CM (each interface's host has its own user-space CM on QP1), 64 KiB packets as single RC messages through the SRQ, fallback to
 * datagrams (with ICMP "fragmentation needed" for what does not fit), reconnection after a restart, and
 * hostile connection requests. Devices run with the DMA checker; subclasses run IOMMU and bounce buffers.
 */
class IpoibConnectedInProcessTest {
    private static final long S = 1_000_000_000L;
    private static final int IP_A = 0x0AC8_0001;
    private static final int IP_B = 0x0AC8_0002;
    private final ManualClock clock = new ManualClock();
    private final SoftFabric fabric = new SoftFabric(clock);
    private final MemoryPort portA = new MemoryPort("ibA");
    private MemoryPort portB = new MemoryPort("ibB");
    private final List<String> logA = new CopyOnWriteArrayList<>();
    private final List<String> logB = new CopyOnWriteArrayList<>();
    private IpoibInterface a;
    private IpoibInterface b;
    /** Each interface's host has its own CM (on the test's clock: its retransmissions wait for advance). */
    private UserCm cmA;
    private UserCm cmB;
    private SoftDevice devA;
    private SoftDevice devB;

    /** @return how the devices reach memory (virtual here), always with the checker on */
    DmaConfig dmaConfig() {
        return DmaConfig.virtual();
    }

    private void start(IpoibInterface.Mode modeB) throws Exception {
        devA = fabric.addDevice("soft0", dmaConfig().withChecker(true));
        devB = fabric.addDevice("soft1", dmaConfig().withChecker(true));
        cmA = UserCm.builder().device(devA).clock(clock).build();
        cmB = UserCm.builder().device(devB).clock(clock).build();
        a = IpoibInterface.start(devA, config("10.200.0.1", IpoibInterface.Mode.CONNECTED), RdmaCm.of(cmA), portA,
                logA::add);
        b = IpoibInterface.start(devB, config("10.200.0.2", modeB), RdmaCm.of(cmB), portB, logB::add);
    }

    private IpoibInterface.Config config(String ip, IpoibInterface.Mode mode) throws Exception {
        return new IpoibInterface.Config("ib0", (Inet4Address) InetAddress.getByName(ip), 24, 0, Ipoib.DEFAULT_PKEY,
                Ipoib.DEFAULT_QKEY, null, clock, 60 * S, mode);
    }

    @AfterEach
    void stop() {
        if (a != null) {
            a.close();
        }
        if (b != null) {
            b.close();
        }
        for (UserCm c : new UserCm[] {cmA, cmB}) {
            if (c != null) {
                c.close();
            }
        }
        for (SoftDevice d : fabric.devices()) {
            DmaChecker c = d.dma().checker();
            if (c != null) {
                assertEquals(List.of(), c.reports(), d.name() + ": DMA checker reports");
                assertEquals(0, c.liveMappings(), d.name() + ": mappings left after close");
            }
        }
        fabric.close();
        assertTrue(logA.stream().noneMatch(l -> l.startsWith("ipoib: close:")), "A released everything: " + logA);
        assertTrue(logB.stream().noneMatch(l -> l.startsWith("ipoib: close:")), "B released everything: " + logB);
    }

    /** An IPv4 packet (UDP-shaped, DF set) from src to dst, total length len. */
    static byte[] ipv4(int src, int dst, int len, int seed) {
        byte[] p = new byte[len];
        p[0] = 0x45;
        p[2] = (byte) (len >>> 8);
        p[3] = (byte) len;
        p[6] = 0x40;
        p[8] = 64;
        p[9] = 17;
        for (int i = 0; i < 4; i++) {
            p[12 + i] = (byte) (src >>> (24 - 8 * i));
            p[16 + i] = (byte) (dst >>> (24 - 8 * i));
        }
        for (int i = 20; i < len; i++) {
            p[i] = (byte) (i * 31 + seed);
        }
        return p;
    }

    private void await(BooleanSupplier cond, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("not within 10 s: " + what + "\nA log " + logA + " neighbours " + a.neighbourLines() + "\n"
                        + a.countersText() + "\nB log " + logB + " neighbours " + b.neighbourLines() + "\n"
                        + b.countersText());
            }
            Thread.sleep(5);
        }
    }

    private byte[] carry(MemoryPort from, MemoryPort to, byte[] p) throws InterruptedException {
        from.toInterface.add(p);
        byte[] got = to.fromInterface.poll(10, TimeUnit.SECONDS);
        assertNotNull(got, "delivered; A: " + a.countersText() + " B: " + b.countersText());
        assertArrayEquals(p, got);
        return got;
    }

    @Test
    void connectsAfterResolutionAndCarries64KiBPacketsAsSingleRcMessages() throws Exception {
        start(IpoibInterface.Mode.CONNECTED);
        assertEquals(65520, a.mtu(), "Linux IPOIB_CM_MTU");
        assertEquals(HardwareAddress.FLAG_RC, a.hardwareAddress().flags(), "RFC 4755: the address offers connections");
        carry(portA, portB, ipv4(IP_A, IP_B, 1000, 1)); // resolved by ARP, sent as a datagram
        await(() -> a.neighbourLines().contains("10.200.0.2 reachable lladdr " + b.hardwareAddress() + " connected"),
                "A connected to B");
        await(() -> b.neighbourLines().contains("10.200.0.1 reachable lladdr " + a.hardwareAddress() + " connected"),
                "B (which learned A from its request) connected to A");
        assertEquals(1, a.counter(IpoibCounter.CM_CONNECTED));
        assertEquals(1, a.counter(IpoibCounter.CM_ACCEPTED));
        assertEquals(1, b.counter(IpoibCounter.CM_CONNECTED));
        assertEquals(1, b.counter(IpoibCounter.CM_ACCEPTED));
        for (int k = 0; k < 20; k++) {
            carry(portA, portB, ipv4(IP_A, IP_B, k % 2 == 0 ? 65520 : 40 + k, 10 + k));
            carry(portB, portA, ipv4(IP_B, IP_A, k % 3 == 0 ? 65520 : 3000 + k, 50 + k));
        }
        // (the stack has a packet just before the receiver counts it)
        await(() -> b.counter(IpoibCounter.RX_CM_PACKETS) == 20, "every packet after the connection went on it");
        await(() -> a.counter(IpoibCounter.RX_CM_PACKETS) == 20, "both ways");
        // counted by A's send thread just after its post returns, which may be after B delivered the packet
        await(() -> a.counter(IpoibCounter.TX_CM_PACKETS) == 20, "A counted each of its sends on the connection");
        assertEquals(0, a.counter(IpoibCounter.RX_DROP_BAD_CM) + b.counter(IpoibCounter.RX_DROP_BAD_CM));
        // the group still gets datagrams
        carry(portA, portB, ipv4(IP_A, 0x0AC8_00FF, 200, 99));
    }

    @Test
    void datagramPeerGetsDatagramsAndWhatDoesNotFitGetsIcmpFragmentationNeeded() throws Exception {
        start(IpoibInterface.Mode.DATAGRAM);
        carry(portA, portB, ipv4(IP_A, IP_B, 2044, 1));
        carry(portB, portA, ipv4(IP_B, IP_A, 2044, 2));
        assertTrue(a.neighbourLines().contains("10.200.0.2 reachable lladdr " + b.hardwareAddress() + " datagram"),
                a.neighbourLines().toString());
        assertEquals(0, a.counter(IpoibCounter.CM_REQ_SENT), "B's address does not offer connected mode");
        byte[] big = ipv4(IP_A, IP_B, 9000, 3);
        portA.toInterface.add(big);
        byte[] icmp = portA.fromInterface.poll(10, TimeUnit.SECONDS);
        assertNotNull(icmp, "an ICMP error came back to A's stack");
        assertEquals(20 + 8 + 28, icmp.length);
        assertEquals(1, icmp[9], "ICMP");
        assertEquals(3, icmp[20], "destination unreachable");
        assertEquals(4, icmp[21], "fragmentation needed");
        assertEquals(2044, ((icmp[26] & 0xFF) << 8) | (icmp[27] & 0xFF), "next-hop MTU: the UD MTU");
        assertArrayEquals(java.util.Arrays.copyOfRange(big, 16, 20), java.util.Arrays.copyOfRange(icmp, 12, 16),
                "from the destination");
        assertArrayEquals(java.util.Arrays.copyOfRange(big, 0, 28), java.util.Arrays.copyOfRange(icmp, 28, 56),
                "quotes the header and 8 bytes");
        assertEquals(0, org.rdma4j.wire.InternetChecksum.compute(java.lang.foreign.MemorySegment.ofArray(icmp), 0, 20), "IP checksum");
        assertEquals(0, org.rdma4j.wire.InternetChecksum.compute(java.lang.foreign.MemorySegment.ofArray(icmp), 20, 36), "ICMP checksum");
        assertEquals(1, a.counter(IpoibCounter.TX_DROP_TOO_BIG));
    }

    @Test
    void neighbourThatNeverAnswersGetsDatagramsAfterTheCmGivesUp() throws Exception {
        start(IpoibInterface.Mode.CONNECTED);
        SoftDevice mute = fabric.addDevice("soft2"); // no CM: its QP1 does not exist, REQs go unanswered
        try (Context ctx = mute.open()) {
            HostileSender.announceMuteConnectedNeighbour(ctx, a.hardwareAddress().gid(), a.hardwareAddress().qpn(),
                    0x0AC8_0009, IP_A);
        }
        await(() -> a.counter(IpoibCounter.CM_REQ_SENT) == 1, "A connects at once to the neighbour it learned");
        assertTrue(a.neighbourLines().stream().anyMatch(l -> l.startsWith("10.200.0.9 ") && l.endsWith(" connecting")),
                a.neighbourLines().toString());
        await(() -> cmA.counter(CmCounter.MADS_SENT) >= 1, "the REQ left");
        // meanwhile datagram-sized packets go as datagrams, bigger ones wait (no ICMP: the connection may come)
        portA.toInterface.add(ipv4(IP_A, 0x0AC8_0009, 5000, 1));
        await(() -> a.counter(IpoibCounter.TX_DROP_CM_CONNECTING) == 1, "big packet dropped while connecting");
        // the CM resends the REQ about every second (response timeout 18), twice, then gives up: UNREACHABLE
        for (int k = 0; k < 20 && cmA.counter(CmCounter.MAD_TIMEOUTS) == 0; k++) {
            clock.advance(S / 2);
        }
        assertEquals(2, cmA.counter(CmCounter.MAD_RETRANSMISSIONS), "two retransmissions of the REQ");
        await(() -> logA.stream().anyMatch(l -> l.startsWith("neighbour 10.200.0.9 did not answer connected-mode"
                + " requests (UNREACHABLE)")), "given up");
        assertEquals(1, a.counter(IpoibCounter.CM_FALLBACK));
        assertTrue(a.neighbourLines().stream().anyMatch(l -> l.startsWith("10.200.0.9 ") && l.endsWith(" datagram")),
                a.neighbourLines().toString());
        long tx = a.counter(IpoibCounter.TX_PACKETS);
        portA.toInterface.add(ipv4(IP_A, 0x0AC8_0009, 1500, 2));
        await(() -> a.counter(IpoibCounter.TX_PACKETS) == tx + 1, "a datagram to the fallen-back neighbour");
        portA.toInterface.add(ipv4(IP_A, 0x0AC8_0009, 5000, 3));
        byte[] icmp = portA.fromInterface.poll(10, TimeUnit.SECONDS);
        assertNotNull(icmp, "now too big: ICMP fragmentation needed");
        assertEquals(4, icmp[21]);
        assertEquals(1, a.counter(IpoibCounter.CM_REQ_SENT), "no new connection until the retry time");
    }

    @Test
    void connectionToANeighbourThatDiesFailsAfterFiniteRetriesAndIsMadeAgain() throws Exception {
        start(IpoibInterface.Mode.CONNECTED);
        carry(portA, portB, ipv4(IP_A, IP_B, 100, 1));
        await(() -> a.counter(IpoibCounter.CM_CONNECTED) == 1, "A connected to B");
        carry(portA, portB, ipv4(IP_A, IP_B, 65520, 2));
        // (counted by A's send thread just after its post returns, which may be after B delivered the packet)
        await(() -> a.counter(IpoibCounter.TX_CM_PACKETS) == 1, "A counted its send on the connection");
        // B's host dies without a word (no DREQ): from now on nothing reaches it, no ACK comes back
        devB.setPortState(1, PortState.DOWN);
        portA.toInterface.add(ipv4(IP_A, IP_B, 65520, 3));
        await(() -> a.counter(IpoibCounter.TX_CM_PACKETS) == 2, "posted on the connection");
        // retry_cnt 6 (Linux's ipoib_cm sends 0): seven retransmit timeouts of the CM's ack timeout, then
        // RETRY_EXC_ERR tears the connection down; with 7 (infinite on rxe) it would retry for ever
        // (each step gives A's completion thread a bounded moment to reap, so that simulated time stops soon
        // after the failure: 20 s of it, far beyond seven timeouts, cannot pass unnoticed)
        for (int k = 0; k < 200 && !settles(() -> a.counter(IpoibCounter.CM_TX_ERRORS) > 0); k++) {
            clock.advance(S / 10);
        }
        await(() -> a.counter(IpoibCounter.CM_TX_ERRORS) == 1, "the send to the dead neighbour failed");
        await(() -> logA.stream().anyMatch(l -> l.startsWith("neighbour 10.200.0.2 connection failed (RETRY_EXC_ERR)")),
                "A says why (the counter comes just before the line)");
        // the neighbour comes back: once the error's retry time (1 s) has passed, a packet makes a new connection
        devB.setPortState(1, PortState.ACTIVE);
        for (int k = 0; k < 20 && !settles(() -> a.counter(IpoibCounter.CM_CONNECTED) == 2); k++) {
            clock.advance(S / 2);
            portA.toInterface.add(ipv4(IP_A, IP_B, 1000, 4 + k));
        }
        await(() -> a.counter(IpoibCounter.CM_CONNECTED) == 2, "A connected to B again");
        // and carries what only a connection can (the loop's datagrams may still be arriving ahead of it)
        byte[] big = ipv4(IP_A, IP_B, 65520, 50);
        portA.toInterface.add(big);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        byte[] got;
        do {
            got = portB.fromInterface.poll(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        } while (got != null && got.length != big.length);
        assertNotNull(got, "a 65520-byte packet on the new connection; A: " + a.countersText());
        assertArrayEquals(big, got);
    }

    /** {@return whether cond holds within 50 ms (a bounded look, never a failure)} */
    private static boolean settles(BooleanSupplier cond) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(50);
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                return false;
            }
            Thread.sleep(1);
        }
        return true;
    }

    @Test
    void connectionIsMadeAgainAfterThePeerRestarts() throws Exception {
        start(IpoibInterface.Mode.CONNECTED);
        carry(portA, portB, ipv4(IP_A, IP_B, 100, 1));
        await(() -> a.counter(IpoibCounter.CM_CONNECTED) == 1 && b.counter(IpoibCounter.CM_CONNECTED) == 1, "connected");
        carry(portA, portB, ipv4(IP_A, IP_B, 65520, 2));
        HardwareAddress old = b.hardwareAddress();
        b.close(); // DREQs for both of its connections
        cmB.close();
        portB = new MemoryPort("ibB");
        cmB = UserCm.builder().device(devB).clock(clock).build(); // a new process: a new CM
        b = IpoibInterface.start(devB, config("10.200.0.2", IpoibInterface.Mode.CONNECTED), RdmaCm.of(cmB), portB,
                logB::add);
        // B's start-up announcement makes A learn its new QPN; the old connection goes, a new one is made
        await(() -> a.neighbourLines().contains("10.200.0.2 reachable lladdr " + b.hardwareAddress() + " connected"),
                "A connected to the new B (old " + old + ")");
        assertEquals(2, a.counter(IpoibCounter.CM_CONNECTED));
        for (int k = 0; k < 4; k++) {
            carry(portA, portB, ipv4(IP_A, IP_B, 65520, 3 + k));
        }
        await(() -> b.counter(IpoibCounter.RX_CM_PACKETS) == 4, "all four on the new connection");
        // the new B has not resolved A yet: a packet larger than a datagram cannot wait for that (it starts the
        // resolution and is dropped), a small one does
        portB.toInterface.add(ipv4(IP_B, IP_A, 65000, 8));
        await(() -> b.counter(IpoibCounter.TX_DROP_UNRESOLVED) == 1, "not queued for resolution");
        await(() -> b.counter(IpoibCounter.ARP_REQUESTS_SENT) == 2, "but resolution started");
        carry(portB, portA, ipv4(IP_B, IP_A, 1000, 9));
        await(() -> b.counter(IpoibCounter.CM_CONNECTED) == 1, "the new B connected to A");
        carry(portB, portA, ipv4(IP_B, IP_A, 65000, 10));
    }

    @Test
    void hostileConnectionRequestsAreRefusedAndCounted() throws Exception {
        start(IpoibInterface.Mode.CONNECTED);
        SoftDevice evil = fabric.addDevice("soft2");
        try (UserCm cmEvil = UserCm.builder().device(evil).clock(clock).build()) {
            assertEquals(HostileSender.EXPECTED_CM_OUTCOMES, HostileSender.connectHostile(RdmaCm.of(cmEvil),
                    evil.open().queryGid(1, 0), a.hardwareAddress().gid(), a.hardwareAddress().qpn()));
        }
        await(() -> a.counter(IpoibCounter.RX_DROP_BAD_CM) == 2, "two bad requests counted: " + a.countersText());
        assertEquals(2, a.counter(IpoibCounter.CM_REJ_SENT));
        assertEquals(1, a.counter(IpoibCounter.CM_ACCEPTED), "only the good one was accepted");
        assertEquals(3, cmA.counter(CmCounter.CM_REJECTS_SENT), "ours two, and the CM's own for the other service");
        // A and B still connect and carry traffic
        carry(portA, portB, ipv4(IP_A, IP_B, 100, 1));
        await(() -> a.counter(IpoibCounter.CM_CONNECTED) == 1, "connected");
        carry(portA, portB, ipv4(IP_A, IP_B, 65520, 2));
    }
}
