// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.rdma4j.dma.DmaMode;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.verbs.cm.EndpointOptions;
import org.rdma4j.verbs.cm.RdmaConnectException;
import org.rdma4j.verbs.cm.RdmaEndpoint;
import org.rdma4j.verbs.cm.RdmaServer;
import org.rdma4j.verbs.cm.RejectReason;

/**
 * The connection API ({@link RdmaServer}, {@link RdmaEndpoint}) over two soft hosts in real time (their CMs
 * on their own threads), in process and over RoCEv2: connected endpoints that carry traffic, private data
 * both ways, the peer's disconnect seen, and the errors of a port nobody listens on and of bad options.
 * Nothing here sleeps: every wait ends on an event or a completion.
 */
class EndpointTest {
    private SoftCmFabric f;

    static Stream<Arguments> fabrics() {
        return Stream.of(Arguments.of("in process"), Arguments.of("RoCEv2"));
    }

    private SoftCmFabric open(String kind) {
        f = kind.equals("RoCEv2") ? SoftCmFabric.roce(null) : SoftCmFabric.inProcess(null, false, DmaMode.VIRTUAL);
        return f;
    }

    @AfterEach
    void close() {
        if (f != null) {
            f.close();
        }
    }

    private EndpointOptions opts(int host) {
        return new EndpointOptions().cm(f.cm(host)).connectTimeout(Duration.ofSeconds(20));
    }

    private InetSocketAddress at(int port) {
        return new InetSocketAddress(f.address(1), port);
    }

    private static WorkCompletion await(org.rdma4j.verbs.CompletionQueue cq) {
        WorkCompletion wc = new WorkCompletion();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!cq.poll(wc)) {
            assertTrue(System.nanoTime() < deadline, "no completion");
            Thread.onSpinWait();
        }
        assertEquals(WcStatus.SUCCESS, wc.status(), wc.toString());
        return wc;
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("fabrics")
    void connectsCarriesPrivateDataAndTrafficAndSeesThePeerLeave(String kind) throws Exception {
        open(kind);
        try (Arena arena = Arena.ofShared();
             RdmaServer server = RdmaServer.bind(at(0), opts(1).privateData(new byte[] {7, 7}).beforeConnect(ep -> {
                 MemoryRegion m = ep.closeWith(ep.pd().regMr(arena.allocate(64), AccessFlag.of(AccessFlag.LOCAL_WRITE)));
                 ep.cmId().attach(m);
                 assertTrue(ep.qp().postRecv(new RecvWorkRequest().singleSge(m.address(), 64, m.lkey())));
             }))) {
            int port = ((InetSocketAddress) server.localAddress()).getPort();
            assertTrue(port > 0);
            CompletableFuture<RdmaEndpoint> accepted = CompletableFuture.supplyAsync(() -> server.accept(Duration.ofSeconds(20)));
            RdmaEndpoint client = RdmaEndpoint.connect(at(port), opts(0).privateData(new byte[] {1, 2, 3}));
            RdmaEndpoint s = accepted.get(30, TimeUnit.SECONDS);
            assertNotNull(s);
            MemoryRegion sm = (MemoryRegion) s.cmId().attachment();
            MemoryRegion cm = client.closeWith(client.pd().regMr(arena.allocate(64), AccessFlag.of()));
            assertArrayEquals(new byte[] {1, 2, 3}, java.util.Arrays.copyOf(s.peerPrivateData(), 3));
            assertArrayEquals(new byte[] {7, 7}, java.util.Arrays.copyOf(client.peerPrivateData(), 2));
            assertTrue(client.isConnected());
            assertTrue(s.isConnected());
            cm.segment().set(ValueLayout.JAVA_LONG, 0, 0x1234_5678_9ABCL);
            assertTrue(client.qp().postSend(new SendWorkRequest().opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                    .singleSge(cm.address(), 8, cm.lkey())));
            await(client.sendCq());
            assertEquals(8, await(s.recvCq()).byteLen());
            assertEquals(0x1234_5678_9ABCL, sm.segment().get(ValueLayout.JAVA_LONG, 0));
            client.close();
            assertTrue(s.awaitDisconnect(Duration.ofSeconds(20)));
            assertFalse(s.isConnected());
            s.close();
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("fabrics")
    void servesManyConnectionsOneAfterAnotherAndAtOnce(String kind) throws Exception {
        open(kind);
        try (RdmaServer server = RdmaServer.bind(at(0), opts(1))) {
            InetSocketAddress to = at(((InetSocketAddress) server.localAddress()).getPort());
            for (int i = 0; i < 20; i++) {
                CompletableFuture<RdmaEndpoint> a = CompletableFuture.supplyAsync(() -> server.accept(Duration.ofSeconds(20)));
                RdmaEndpoint c = RdmaEndpoint.connect(to, opts(0));
                RdmaEndpoint s = a.get(30, TimeUnit.SECONDS);
                assertTrue(c.isConnected());
                assertNotNull(s);
                CompletableFuture<Void> leaving = CompletableFuture.runAsync(i % 2 == 0 ? c::close : s::close);
                assertTrue((i % 2 == 0 ? s : c).awaitDisconnect(Duration.ofSeconds(20)), "the peer's disconnect seen");
                (i % 2 == 0 ? s : c).close();
                leaving.get(30, TimeUnit.SECONDS);
            }
            List<CompletableFuture<RdmaEndpoint>> clients = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                clients.add(CompletableFuture.supplyAsync(() -> RdmaEndpoint.connect(to, opts(0))));
            }
            List<RdmaEndpoint> served = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                served.add(server.accept(Duration.ofSeconds(20)));
            }
            List<CompletableFuture<Void>> leaving = new ArrayList<>();
            for (CompletableFuture<RdmaEndpoint> c : clients) {
                RdmaEndpoint ep = c.get(30, TimeUnit.SECONDS);
                leaving.add(CompletableFuture.runAsync(ep::close));
            }
            for (RdmaEndpoint s : served) {
                assertNotNull(s);
                assertTrue(s.awaitDisconnect(Duration.ofSeconds(20)));
                s.close();
            }
            for (CompletableFuture<Void> l : leaving) {
                l.get(30, TimeUnit.SECONDS);
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("fabrics")
    void aPortNobodyListensOnIsRefusedWithTheRejectReason(String kind) {
        open(kind);
        RdmaConnectException e = assertThrows(RdmaConnectException.class, () -> RdmaEndpoint.connect(at(17999), opts(0)));
        assertEquals(Errno.ECONNREFUSED, e.errno());
        assertEquals(RejectReason.INVALID_SERVICE_ID, e.rejectReason());
        assertTrue(e.getMessage().contains("nobody listens on that port"), e.getMessage());
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("fabrics")
    void aTakenPortAndANonLocalAddressFailToBindAsLinuxDoes(String kind) {
        open(kind);
        try (RdmaServer server = RdmaServer.bind(at(0), opts(1))) {
            VerbsException e = assertThrows(VerbsException.class, () -> RdmaServer.bind((InetSocketAddress) server.localAddress(), opts(1)));
            assertEquals(Errno.EADDRINUSE, e.errno());
            assertNull(server.accept(Duration.ofMillis(1)));
        }
        VerbsException e = assertThrows(VerbsException.class,
                () -> RdmaServer.bind(new InetSocketAddress(f.unownedAddress(), 7471), opts(1)));
        assertEquals(Errno.EADDRNOTAVAIL, e.errno());
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("fabrics")
    void badOptionsAreEinvalWithWhatToDo(String kind) {
        EndpointOptions o = new EndpointOptions();
        for (Runnable r : List.<Runnable>of(() -> o.sendQueueDepth(0), () -> o.readDepth(256), () -> o.retryCount(8),
                () -> o.backlog(0), () -> o.connectTimeout(Duration.ZERO), () -> o.tos(256),
                () -> o.qpType(org.rdma4j.verbs.QpType.UD))) {
            VerbsException e = assertThrows(VerbsException.class, r::run);
            assertEquals(Errno.EINVAL, e.errno());
        }
        open(kind);
        byte[] tooMuch = new byte[57];
        VerbsException e = assertThrows(VerbsException.class, () -> RdmaEndpoint.connect(at(7471), opts(0).privateData(tooMuch)));
        assertEquals(Errno.EINVAL, e.errno());
        assertTrue(e.getMessage().contains("at most 56"), e.getMessage());
    }
}
