// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
import org.rdma4j.dma.DmaChecker;
import org.rdma4j.dma.DmaConfig;
import org.rdma4j.soft.SoftDevice;
import org.rdma4j.soft.SoftFabric;
import org.rdma4j.verbs.Context;

/**
 * Two IPoIB interfaces on the soft device's in-process fabric (IB-style GIDs, so the RFC 4391 broadcast
 * GID ff12:401b:ffff::ffff:ffff itself), each with an in-memory port for the IP side: no root needed.
 * Neighbour aging runs on a manual clock the test advances. The devices reach memory as
 * {@link #dmaConfig()} says, with the DMA checker on: a test fails if the checker reports any misuse or a
 * mapping outlives the interface. Subclasses run the same tests through an IOMMU and bounce buffers.
 */
class IpoibInProcessTest {
    private static final long S = 1_000_000_000L;
    private final ManualClock clock = new ManualClock();
    private SoftFabric fabric;
    private SoftDevice devA;
    private SoftDevice devB;
    private final MemoryPort portA = new MemoryPort("ibA");
    private final MemoryPort portB = new MemoryPort("ibB");
    private final List<String> logA = new CopyOnWriteArrayList<>();
    private final List<String> logB = new CopyOnWriteArrayList<>();
    private IpoibInterface a;
    private IpoibInterface b;

    /** @return how the devices reach memory (virtual here), always with the checker on */
    DmaConfig dmaConfig() {
        return DmaConfig.virtual();
    }

    @BeforeEach
    void start() throws Exception {
        fabric = new SoftFabric(clock);
        devA = fabric.addDevice("soft0", dmaConfig().withChecker(true));
        devB = fabric.addDevice("soft1", dmaConfig().withChecker(true));
        a = IpoibInterface.start(devA, config("10.200.0.1"), portA, logA::add);
        b = IpoibInterface.start(devB, config("10.200.0.2"), portB, logB::add);
    }

    private IpoibInterface.Config config(String ip) throws Exception {
        return new IpoibInterface.Config("ib0", (Inet4Address) InetAddress.getByName(ip), 24, 0, Ipoib.DEFAULT_PKEY,
                Ipoib.DEFAULT_QKEY, null, clock, 60 * S);
    }

    @AfterEach
    void stop() {
        if (a != null) {
            a.close();
        }
        if (b != null) {
            b.close();
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

    /** An IPv4 packet (UDP-shaped payload) from src to dst, total length len. */
    private static byte[] ipv4(int src, int dst, int len, int seed) {
        byte[] p = new byte[len];
        p[0] = 0x45;
        p[2] = (byte) (len >>> 8);
        p[3] = (byte) len;
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
                StringBuilder threads = new StringBuilder();
                Thread.getAllStackTraces().forEach((t, st) -> {
                    if (t.getName().startsWith("ipoib-")) {
                        threads.append(t.getName()).append(' ').append(t.getState()).append('\n');
                        for (StackTraceElement e : st) {
                            threads.append("    at ").append(e).append('\n');
                        }
                    }
                });
                fail("not within 10 s: " + what + "\nA log " + logA + " neighbours " + a.neighbourLines() + "\n"
                        + a.countersText() + "\nB log " + logB + " neighbours " + b.neighbourLines() + "\n" + b.countersText()
                        + "\nclock " + clock.nanoTime() + "\n" + threads);
            }
            Thread.sleep(5);
        }
    }

    @Test
    void joinsTheRfc4391BroadcastGroupOfTheDefaultPartition() {
        assertEquals("ff12:401b:ffff:0000:0000:0000:ffff:ffff", a.broadcastGid().toString());
        assertEquals(2044, a.mtu(), "2048-byte IB MTU less the header (the soft port's MTU is 4096)");
        try (Context ctx = devA.open()) {
            assertEquals(ctx.queryGid(1, 0), a.hardwareAddress().gid());
        }
    }

    @Test
    void resolvesByArpThenCarriesThePacketUnchanged() throws Exception {
        byte[] p = ipv4(0x0AC8_0001, 0x0AC8_0002, 1500, 1);
        portA.toInterface.add(p);
        byte[] got = portB.fromInterface.poll(10, TimeUnit.SECONDS);
        assertNotNull(got, "B's stack got the packet; A: " + a.countersText());
        assertArrayEquals(p, got);
        await(() -> a.counter(IpoibCounter.ARP_REQUESTS_SENT) == 2, "one request besides the start-up announcement");
        await(() -> b.counter(IpoibCounter.ARP_REPLIES_SENT) == 1, "B answered once");
        assertTrue(logA.contains("neighbour 10.200.0.2 lladdr " + b.hardwareAddress() + " learned"), logA.toString());
        // B learned A from the request addressed to it (RFC 826), so its answer needs no ARP of its own
        byte[] back = ipv4(0x0AC8_0002, 0x0AC8_0001, 2044, 2);
        portB.toInterface.add(back);
        assertArrayEquals(back, portA.fromInterface.poll(10, TimeUnit.SECONDS));
        assertEquals(1, b.counter(IpoibCounter.ARP_REQUESTS_SENT), "only B's announcement");
    }

    @Test
    void broadcastGoesToTheGroupAndTheSenderDropsItsOwnCopy() throws Exception {
        await(() -> a.counter(IpoibCounter.RX_DROP_OWN) == 1, "A drops the group's copy of its start-up announcement");
        byte[] p = ipv4(0x0AC8_0001, 0x0AC8_00FF, 100, 3);
        portA.toInterface.add(p);
        assertArrayEquals(p, portB.fromInterface.poll(10, TimeUnit.SECONDS));
        await(() -> a.counter(IpoibCounter.RX_DROP_OWN) == 2, "A drops the group's copy of its own packet");
        assertNull(portA.fromInterface.poll(100, TimeUnit.MILLISECONDS), "nothing looped back to A's stack");
    }

    @Test
    void entryInUseIsProbedIdleEntryAgesOutAndIsResolvedAgain() throws Exception {
        portA.toInterface.add(ipv4(0x0AC8_0001, 0x0AC8_0002, 64, 4));
        assertNotNull(portB.fromInterface.poll(10, TimeUnit.SECONDS));
        await(() -> a.counter(IpoibCounter.ARP_REQUESTS_SENT) == 2 && b.counter(IpoibCounter.ARP_REPLIES_SENT) == 1,
                "announcement and one resolution");
        // A has taken B's announcement and B's reply (its confirmation time is now, before the clock moves)
        await(() -> a.counter(IpoibCounter.RX_ARP) == 2, "A processed B's ARP packets");
        long requests = 2;
        long replies = 1;
        clock.advance(60 * S);
        // used during the period: a unicast probe, answered by B; the entry is not dropped
        await(() -> b.counter(IpoibCounter.ARP_REPLIES_SENT) == replies + 1, "B answers A's probe");
        await(() -> a.counter(IpoibCounter.ARP_REQUESTS_SENT) == requests + 1, "one unicast probe");
        assertEquals(0, a.counter(IpoibCounter.NEIGHBOURS_EXPIRED));
        await(() -> a.neighbourLines().contains("10.200.0.2 reachable lladdr " + b.hardwareAddress()),
                "A takes B's reply as confirmation");
        assertEquals(1, a.counter(IpoibCounter.NEIGHBOURS_LEARNED), "confirmed, not re-learned");
        clock.advance(60 * S);
        await(() -> logA.contains("neighbour 10.200.0.2 expired"), "unused for a period: forgotten");
        assertEquals(1, a.counter(IpoibCounter.NEIGHBOURS_EXPIRED));
        byte[] p = ipv4(0x0AC8_0001, 0x0AC8_0002, 64, 5);
        portA.toInterface.add(p);
        assertArrayEquals(p, portB.fromInterface.poll(10, TimeUnit.SECONDS));
        await(() -> a.counter(IpoibCounter.ARP_REQUESTS_SENT) == requests + 2, "resolved again with a new request");
        assertEquals(2, a.counter(IpoibCounter.NEIGHBOURS_LEARNED));
    }

    @Test
    void unansweredResolutionRetriesThreeTimesThenDropsTheQueue() throws Exception {
        long base = a.counter(IpoibCounter.ARP_REQUESTS_SENT);
        portA.toInterface.add(ipv4(0x0AC8_0001, 0x0AC8_0009, 64, 6));
        portA.toInterface.add(ipv4(0x0AC8_0001, 0x0AC8_0009, 64, 7));
        await(() -> a.counter(IpoibCounter.ARP_REQUESTS_SENT) == base + 1, "first request");
        for (int retry = 2; retry <= 3; retry++) {
            clock.advance(S);
            long want = base + retry;
            await(() -> a.counter(IpoibCounter.ARP_REQUESTS_SENT) == want, "request " + retry + " a second later");
        }
        clock.advance(S);
        await(() -> logA.contains("neighbour 10.200.0.9 failed (no ARP reply)"), "resolution fails after 3 requests");
        assertEquals(2, a.counter(IpoibCounter.TX_DROP_UNRESOLVED), "both queued packets dropped");
        assertEquals(0, a.counter(IpoibCounter.TX_PACKETS));
    }

    @Test
    void kernelPacketsItCannotSendAreCounted() throws Exception {
        byte[] v6 = new byte[40];
        v6[0] = 0x60;
        portA.toInterface.add(v6);
        portA.toInterface.add(ipv4(0x0AC8_0001, 0x0A00_0001, 64, 8)); // another subnet, no gateway
        portA.toInterface.add(new byte[] {0x45, 0, 0}); // shorter than an IPv4 header
        await(() -> a.counter(IpoibCounter.TX_DROP_IPV6) == 1 && a.counter(IpoibCounter.TX_DROP_NO_ROUTE) == 1
                && a.counter(IpoibCounter.TX_DROP_MALFORMED) == 1, "drops counted: " + a.countersText());
    }

    @Test
    void hostileMessagesFromTheFabricAreDroppedAndCounted() throws Exception {
        // B knows A first, so the spoofed ARP (claiming to be B) would poison A's entry if it were believed
        portB.toInterface.add(ipv4(0x0AC8_0002, 0x0AC8_0001, 64, 9));
        assertNotNull(portA.fromInterface.poll(10, TimeUnit.SECONDS));
        SoftDevice evil = fabric.addDevice("soft2");
        try (Context ctx = evil.open()) {
            assertEquals(7, HostileSender.sendAll(ctx, a.hardwareAddress().gid(), a.hardwareAddress().qpn(),
                    b.hardwareAddress().gid(), b.hardwareAddress().qpn(), a.broadcastGid()));
        }
        for (String expect : HostileSender.EXPECTED.split(" ")) {
            String[] kv = expect.split("=");
            IpoibCounter c = IpoibCounter.valueOf(kv[0].toUpperCase(java.util.Locale.ROOT));
            await(() -> a.counter(c) == Long.parseLong(kv[1]), kv[0] + " = " + kv[1] + ": " + a.countersText());
        }
        await(() -> b.counter(IpoibCounter.RX_DROP_BAD_ARP) == 1, "B is in the group too: the truncated ARP reached it");
        await(() -> a.counter(IpoibCounter.RX_PACKETS) == 1, "only B's real packet reached A's stack");
        // A still reaches B at B's real address
        byte[] p = ipv4(0x0AC8_0001, 0x0AC8_0002, 200, 10);
        portA.toInterface.add(p);
        assertArrayEquals(p, portB.fromInterface.poll(10, TimeUnit.SECONDS));
        assertTrue(a.neighbourLines().contains("10.200.0.2 reachable lladdr " + b.hardwareAddress()), a.neighbourLines().toString());
    }
}
