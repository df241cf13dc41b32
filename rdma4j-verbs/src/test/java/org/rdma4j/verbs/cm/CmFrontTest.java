// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.spi.CmEventInfo;
import org.rdma4j.verbs.spi.CmEventSink;

/**
 * The provider-neutral front of the CM API over recording providers: which provider an ID goes to,
 * ports, backlog, event acknowledgement, channel ownership, migration and argument checks.
 */
class CmFrontTest {
    private static final Duration T = Duration.ofSeconds(2);
    // TEST-NET-2/3 addresses: never configured on a host, so the host's routing owns none of them
    private final FakeCmProvider soft = new FakeCmProvider("soft", "198.51.100.1", "2001:db8::1");
    private final FakeCmProvider nat = new FakeCmProvider("native", "203.0.113.7");
    private final RdmaCm cm = RdmaCm.of(soft, nat);

    private static InetSocketAddress a(String ip, int port) {
        return new InetSocketAddress(InetAddress.ofLiteral(ip), port);
    }

    @Test
    void resolveWithSourceGoesToTheProviderOwningIt() {
        try (CmEventChannel ch = cm.createEventChannel()) {
            try (CmId id = ch.createId(PortSpace.TCP)) {
                id.resolveAddr(a("203.0.113.7", 0), a("203.0.113.99", 7174), T);
                assertEquals("native", id.providerName());
                try (CmEvent e = ch.getEvent(T)) {
                    assertEquals(CmEventType.ADDR_RESOLVED, e.type());
                    assertSame(id, e.id());
                }
                assertEquals("resolveAddr 203.0.113.7 /203.0.113.99:7174", nat.ids.getFirst().calls.get(1));
                assertTrue(soft.ids.isEmpty());
            }
        }
    }

    @Test
    void aLocallyOwnedDestinationIsALoopbackOnItsDevice() {
        try (CmEventChannel ch = cm.createEventChannel(); CmId id = ch.createId(PortSpace.TCP)) {
            id.resolveAddr(null, a("2001:db8::1", 7471), T);
            assertEquals("soft", id.providerName());
            ch.getEvent(T).ack();
        }
    }

    @Test
    void noDeviceReachingTheDestinationIsAnAddrErrorNamingTheLocalAddresses() {
        try (CmEventChannel ch = cm.createEventChannel(); CmId id = ch.createId(PortSpace.TCP)) {
            id.resolveAddr(null, a("192.0.2.200", 7174), T);
            try (CmEvent e = ch.getEvent(T)) {
                assertEquals(CmEventType.ADDR_ERROR, e.type());
                assertEquals(-19, e.status());
                assertEquals(Errno.ENODEV, e.errno());
                assertTrue(e.detail().contains("198.51.100.1"), e.detail());
                assertTrue(e.detail().contains("203.0.113.7"), e.detail());
            }
        }
    }

    @Test
    void aProviderMayOfferASourceTheHostCannotRoute() {
        soft.sourceFor = soft.addresses.getFirst();
        try (CmEventChannel ch = cm.createEventChannel(); CmId id = ch.createId(PortSpace.TCP)) {
            id.resolveAddr(null, a("192.0.2.200", 7174), T);
            assertEquals("soft", id.providerName());
            ch.getEvent(T).ack();
        }
    }

    @Test
    void aSourceNoDeviceOwnsIsRefusedAsRdmaBindAddrRefusesIt() {
        try (CmEventChannel ch = cm.createEventChannel(); CmId id = ch.createId(PortSpace.TCP)) {
            VerbsException e = assertThrows(VerbsException.class, () -> id.resolveAddr(a("192.0.2.1", 0), a("192.0.2.2", 1), T));
            assertEquals(Errno.EADDRNOTAVAIL, e.errno());
            assertTrue(e.getMessage().contains("198.51.100.1"), e.getMessage());
            VerbsException b = assertThrows(VerbsException.class, () -> id.bindAddr(a("192.0.2.1", 0)));
            assertEquals(Errno.EADDRNOTAVAIL, b.errno());
            // the loopback address is the host's but no RDMA device's: ENODEV, as cma_acquire_dev_by_src_ip fails
            VerbsException l = assertThrows(VerbsException.class, () -> id.bindAddr(a("127.0.0.1", 0)));
            assertEquals(Errno.ENODEV, l.errno());
        }
    }

    @Test
    void mixedFamiliesAreInvalid() {
        try (CmEventChannel ch = cm.createEventChannel(); CmId id = ch.createId(PortSpace.TCP)) {
            VerbsException e = assertThrows(VerbsException.class, () -> id.resolveAddr(a("2001:db8::1", 0), a("198.51.100.1", 1), T));
            assertEquals(Errno.EINVAL, e.errno());
        }
    }

    @Test
    void aWildcardBindTakesTheSamePortOnEveryProviderAndResolvingKeepsOne() {
        try (CmEventChannel ch = cm.createEventChannel(); CmId id = ch.createId(PortSpace.TCP)) {
            nat.nextPort = 40_000; // the first free port of soft is taken on nat: the front picks again
            nat.ports.add(40_000);
            id.bindAddr(a("0.0.0.0", 0));
            int port = ((InetSocketAddress) id.localAddress()).getPort();
            assertEquals(port, ((InetSocketAddress) soft.ids.getLast().local).getPort());
            assertEquals(port, ((InetSocketAddress) nat.ids.getLast().local).getPort());
            id.resolveAddr(null, a("203.0.113.7", 9), T);
            assertEquals("native", id.providerName());
            assertTrue(soft.ids.getLast().closed);
            ch.getEvent(T).ack();
            VerbsException again = assertThrows(VerbsException.class, () -> id.bindAddr(a("0.0.0.0", 0)));
            assertEquals(Errno.EINVAL, again.errno());
        }
    }

    @Test
    void resolvingAWildcardIdKeepsTheRightProviderWhenOneWasLeftOut() {
        FakeCmProvider dead = new FakeCmProvider("librdmacm");
        dead.refuse = new VerbsException(Errno.ENODEV, "the kernel has no rdma_cm");
        try (CmEventChannel ch = RdmaCm.of(dead, soft, nat).createEventChannel(); CmId id = ch.createId(PortSpace.TCP)) {
            id.bindAddr(a("0.0.0.0", 7174)); // on soft and nat only
            id.resolveAddr(null, a("203.0.113.7", 9), T);
            assertEquals("native", id.providerName());
            assertTrue(soft.ids.getLast().closed);
            assertFalse(nat.ids.getLast().closed);
            ch.getEvent(T).ack();
        }
    }

    @Test
    void aWildcardBindLeavesOutAProviderWithNoDeviceUnlessNoProviderHasOne() {
        FakeCmProvider dead = new FakeCmProvider("librdmacm"); // no device: the kernel has no rdma_cm
        dead.refuse = new VerbsException(Errno.ENODEV, "the kernel has no rdma_cm");
        try (CmEventChannel ch = RdmaCm.of(dead, soft).createEventChannel(); CmId id = ch.createId(PortSpace.TCP)) {
            id.bindAddr(a("0.0.0.0", 0));
            id.listen(4);
            assertEquals("soft", id.providerName());
            assertEquals("listen 4", soft.ids.getLast().calls.getLast());
        }
        try (CmEventChannel ch = RdmaCm.of(dead).createEventChannel(); CmId id = ch.createId(PortSpace.TCP)) {
            VerbsException e = assertThrows(VerbsException.class, () -> id.bindAddr(a("0.0.0.0", 0)));
            assertEquals(Errno.ENODEV, e.errno());
            assertTrue(e.getMessage().contains("rdma_cm"), e.getMessage());
        }
    }

    @Test
    @SuppressWarnings("try") // closing the listener inside its try is what the test checks
    void listenBindsAnUnboundIdAndRejectsRequestsBeyondTheBacklog() {
        try (CmEventChannel ch = cm.createEventChannel()) {
            CmId l = ch.createId(PortSpace.TCP);
            l.listen(2);
            FakeCmProvider.FakeId spi = soft.ids.getLast();
            assertEquals("listen 2", spi.calls.getLast());
            CmEventSink c1 = spi.sink.connectRequest(soft.new FakeId(null, PortSpace.TCP),
                    new CmEventInfo(CmEventType.CONNECT_REQUEST, 0, new byte[56], new ConnParam(), null, null));
            CmEventSink c2 = spi.sink.connectRequest(soft.new FakeId(null, PortSpace.TCP),
                    CmEventInfo.of(CmEventType.CONNECT_REQUEST, 0, null));
            CmEventSink c3 = spi.sink.connectRequest(soft.new FakeId(null, PortSpace.TCP),
                    CmEventInfo.of(CmEventType.CONNECT_REQUEST, 0, null));
            assertNotNull(c1);
            assertNotNull(c2);
            assertNull(c3, "a third request with a backlog of 2 is refused");
            CmEvent e1 = ch.pollEvent();
            assertEquals(CmEventType.CONNECT_REQUEST, e1.type());
            assertSame(l, e1.listenId());
            assertSame(l, e1.id().listener());
            assertEquals(56, e1.privateDataLength());
            assertEquals(1, l.unackedEvents(), "a CONNECT_REQUEST counts on the listener, as librdmacm's does");
            // taking one makes room again
            assertNotNull(spi.sink.connectRequest(soft.new FakeId(null, PortSpace.TCP),
                    CmEventInfo.of(CmEventType.CONNECT_REQUEST, 0, null)));
            CmId child = e1.id();
            VerbsException busy = assertThrows(VerbsException.class, l::close);
            assertEquals(Errno.EBUSY, busy.errno());
            e1.ack();
            VerbsException twice = assertThrows(VerbsException.class, e1::ack);
            assertEquals(Errno.EINVAL, twice.errno());
            VerbsException listenerAccept = assertThrows(VerbsException.class, () -> l.accept(null));
            assertEquals(Errno.EINVAL, listenerAccept.errno());
            int before = ch.idCount();
            l.close(); // the two requests still queued go with the listener
            assertEquals(before - 3, ch.idCount());
            child.close();
        }
    }

    @Test
    void eventsOfAClosedIdAreDiscardedAndTheChannelRefusesToCloseUnderLiveIds() {
        CmEventChannel ch = cm.createEventChannel();
        CmId id = ch.createId(PortSpace.UDP);
        assertEquals(QpType.UD, id.qpType());
        id.resolveAddr(a("198.51.100.1", 0), a("198.51.100.9", 7174), T);
        VerbsException busy = assertThrows(VerbsException.class, ch::close);
        assertEquals(Errno.EBUSY, busy.errno());
        id.close();
        assertNull(ch.pollEvent());
        ch.close();
        assertThrows(VerbsException.class, ch::pollEvent);
    }

    @Test
    void migrationMovesQueuedEvents() {
        try (CmEventChannel a = cm.createEventChannel(); CmEventChannel b = cm.createEventChannel()) {
            CmId id = a.createId(PortSpace.TCP);
            id.resolveAddr(a("198.51.100.1", 0), a("198.51.100.9", 7174), T);
            id.migrate(b);
            assertNull(a.pollEvent());
            try (CmEvent e = b.pollEvent()) {
                assertEquals(CmEventType.ADDR_RESOLVED, e.type());
            }
            id.resolveRoute(T);
            assertNull(a.pollEvent());
            b.pollEvent().ack();
            assertEquals(0, a.idCount());
            id.close();
        }
    }

    @Test
    void privateDataLimitsAreRdmaCms() {
        try (CmEventChannel ch = cm.createEventChannel(); CmId id = ch.createId(PortSpace.TCP)) {
            id.resolveAddr(a("198.51.100.1", 0), a("198.51.100.9", 7174), T);
            ch.getEvent(T).ack();
            VerbsException big = assertThrows(VerbsException.class, () -> id.connect(new ConnParam().privateData(new byte[57])));
            assertEquals(Errno.EINVAL, big.errno());
            id.connect(new ConnParam().privateData(new byte[56]));
            assertEquals("connect 56", soft.ids.getLast().calls.getLast());
            assertThrows(VerbsException.class, () -> id.reject(new byte[149]));
            assertThrows(VerbsException.class, () -> id.accept(new ConnParam().privateData(new byte[197])));
        }
    }

    @Test
    void optionsSetBeforeTheProviderIsKnownReachIt() {
        try (CmEventChannel ch = cm.createEventChannel(); CmId id = ch.createId(PortSpace.TCP)) {
            id.setOption(CmOption.TOS, 32);
            id.setOption(CmOption.ACK_TIMEOUT, 14);
            assertThrows(VerbsException.class, () -> id.setOption(CmOption.ACK_TIMEOUT, 32));
            id.resolveAddr(a("198.51.100.1", 0), a("198.51.100.9", 7174), T);
            assertEquals("[TOS=32, ACK_TIMEOUT=14]", soft.ids.getLast().options.toString());
            ch.getEvent(T).ack();
        }
    }

    @Test
    void callsBeforeResolutionAreInvalid() {
        try (CmEventChannel ch = cm.createEventChannel(); CmId id = ch.createId(PortSpace.TCP)) {
            assertEquals(Errno.EINVAL, assertThrows(VerbsException.class, () -> id.resolveRoute(T)).errno());
            assertEquals(Errno.EINVAL, assertThrows(VerbsException.class, () -> id.connect(null)).errno());
            assertEquals(Errno.EINVAL, assertThrows(VerbsException.class, id::disconnect).errno());
            assertEquals(Errno.EINVAL, assertThrows(VerbsException.class, () -> id.resolveAddr(null, a("1.2.3.4", 1), Duration.ZERO)).errno());
            assertNull(id.context());
            assertNull(id.qp());
            assertEquals(Errno.EINVAL, assertThrows(VerbsException.class,
                    () -> ch.createId(PortSpace.UDP, QpType.RC)).errno());
        }
    }

    @Test
    void serviceIdsAreLinuxs() {
        assertEquals(0x0000_0000_0106_1C06L, PortSpace.TCP.serviceId(7174));
        assertEquals(0x0000_0000_0111_1C06L, PortSpace.UDP.serviceId(7174));
        assertEquals(PortSpace.TCP, PortSpace.ofServiceId(0x0000_0000_0106_1C06L));
        assertNull(PortSpace.ofServiceId(0x1000_0000_0000_0011L));
        assertEquals("RDMA_CM_EVENT_ESTABLISHED", CmEventType.ESTABLISHED.rdmaName());
        assertEquals(9, CmEventType.ESTABLISHED.value());
        assertEquals("stale conn", RejectReason.ofValue(10).description());
    }

    @Test
    void ibAddressesChooseTheDeviceByGidAndCarryTheWholeRequestPrivateData() {
        try (CmEventChannel ch = cm.createEventChannel()) {
            IbSocketAddress dst = new IbSocketAddress(Gid.ofInetAddress(InetAddress.ofLiteral("203.0.113.9")),
                    0x1000_0000_0000_0011L);
            try (CmId tcp = ch.createId(PortSpace.TCP)) {
                assertEquals(Errno.EINVAL, assertThrows(VerbsException.class, () -> tcp.resolveAddr(null, dst, T)).errno());
            }
            try (CmId id = ch.createId(PortSpace.IB)) {
                id.resolveAddr(new IbSocketAddress(Gid.ofInetAddress(InetAddress.ofLiteral("203.0.113.7")), 0), dst, T);
                assertEquals("native", id.providerName());
                ch.getEvent(T).ack();
                id.connect(new ConnParam().privateData(new byte[92]));
                assertEquals("connect 92", nat.ids.getLast().calls.getLast());
                assertThrows(VerbsException.class, () -> id.connect(new ConnParam().privateData(new byte[93])));
            }
            try (CmId l = ch.createId(PortSpace.IB)) {
                l.bindAddr(new IbSocketAddress(Gid.ZERO, 0x1000_0000_0000_0012L));
                l.listen(0);
                assertEquals("bind " + new IbSocketAddress(Gid.ZERO, 0x1000_0000_0000_0012L), nat.ids.getLast().calls.getFirst());
                assertEquals("listen " + CmId.MAX_BACKLOG, soft.ids.getLast().calls.getLast());
            }
        }
    }

    @Test
    void getEventWaitsBoundedly() {
        try (CmEventChannel ch = cm.createEventChannel()) {
            assertNull(ch.getEvent(Duration.ofMillis(1)));
            assertNull(ch.pollEvent());
        }
    }
}
