// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.rdma4j.dma.DmaMode;
import org.rdma4j.examples.kv.KvClient;
import org.rdma4j.examples.kv.KvServer;
import org.rdma4j.verbs.cm.EndpointOptions;

/**
 * Runs the key-value example: a server on one soft host, clients on the other, in process and over
 * RoCEv2; puts, RDMA-READ gets, deletes, a collision, concurrent clients, clients leaving.
 */
class KvExampleTest {
    private static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @ParameterizedTest
    @ValueSource(strings = {"in process", "RoCEv2"})
    void storesReadsAndDeletesForSeveralClients(String kind) throws Exception {
        try (SoftCmFabric f = kind.equals("RoCEv2") ? SoftCmFabric.roce(null) : SoftCmFabric.inProcess(null, false, DmaMode.VIRTUAL);
             KvServer server = KvServer.start(new InetSocketAddress(f.address(1), 0), 1024,
                     new EndpointOptions().cm(f.cm(1)))) {
            InetSocketAddress at = new InetSocketAddress(f.address(1), ((InetSocketAddress) server.address()).getPort());
            EndpointOptions client = new EndpointOptions().cm(f.cm(0));
            try (KvClient a = KvClient.connect(at, client)) {
                assertNull(a.get(b("absent")));
                a.put(b("alpha"), b("one"));
                assertArrayEquals(b("one"), a.get(b("alpha")));
                a.put(b("alpha"), b("uno"));
                assertArrayEquals(b("uno"), a.get(b("alpha")));
                try (KvClient c = KvClient.connect(at, client)) {
                    assertArrayEquals(b("uno"), c.get(b("alpha")));
                    assertTrue(c.delete(b("alpha")));
                    assertFalse(c.delete(b("alpha")));
                }
                assertNull(a.get(b("alpha")));
                assertThrows(IllegalArgumentException.class, () -> a.put(new byte[17], b("x")));
            }
            List<CompletableFuture<Void>> clients = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                int id = t;
                clients.add(CompletableFuture.runAsync(() -> {
                    try (KvClient c = KvClient.connect(at, client)) {
                        for (int i = 0; i < 50; i++) {
                            byte[] k = b("k" + id + "-" + i);
                            try {
                                c.put(k, b("v" + i));
                            } catch (IllegalStateException collision) {
                                continue; // another key holds the slot: the example's table does not chain
                            }
                            assertArrayEquals(b("v" + i), c.get(k));
                        }
                    }
                }));
            }
            for (CompletableFuture<Void> c : clients) {
                c.get(60, TimeUnit.SECONDS);
            }
            assertTrue(server.awaitConnections(0, Duration.ofSeconds(20)), server.connections() + " connections still served");
            assertEquals(0, server.connections());
        }
    }
}
