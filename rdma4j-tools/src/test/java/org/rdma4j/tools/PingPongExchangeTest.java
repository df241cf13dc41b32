// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.Gid;

/**
 * The TCP exchange against a peer written from roce-wire.md 5.1 with raw sockets: the bytes on the
 * wire, their order, and that the server connects its QPs before it answers.
 */
class PingPongExchangeTest {
    /** Each task on its own daemon thread: the common pool has one thread on a 2-core machine. */
    private static <T> CompletableFuture<T> async(java.util.function.Supplier<T> task) {
        return CompletableFuture.supplyAsync(task, r -> Thread.ofPlatform().daemon().start(r));
    }

    private static CompletableFuture<Void> async(Runnable task) {
        return CompletableFuture.runAsync(task, r -> Thread.ofPlatform().daemon().start(r));
    }

    private static final PingPongDest CLIENT = new PingPongDest(0, 0x11, 0x7d2e1a,
            new Gid(0, 0x0000_ffff_c0a8_010aL));
    private static final PingPongDest SERVER = new PingPongDest(0, 0x12, 0x000abc,
            new Gid(0xfe80_0000_0000_0000L, 0x0200_00ff_fe00_0001L));

    private static byte[] msg(String text) {
        return Arrays.copyOf(text.getBytes(StandardCharsets.US_ASCII), 52);
    }

    private static byte[] readAll(InputStream in, int n) throws Exception {
        byte[] b = in.readNBytes(n);
        assertEquals(n, b.length, "peer closed early");
        return b;
    }

    @Test
    void clientSendsItsAddressThenDone() throws Exception {
        try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            CompletableFuture<byte[]> seen = async(() -> {
                try (Socket s = ss.accept()) {
                    s.setSoTimeout(20_000);
                    InputStream in = s.getInputStream();
                    byte[] first = readAll(in, 52);
                    s.getOutputStream().write(msg("0000:000012:000abc:fe80000000000000020000fffe000001"));
                    byte[] done = readAll(in, 5);
                    assertEquals(-1, in.read(), "the client closes after done");
                    ByteArrayOutputStream all = new ByteArrayOutputStream();
                    all.write(first);
                    all.write(done);
                    return all.toByteArray();
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            PingPongDest[] remote = PingPongExchange.client("127.0.0.1", ss.getLocalPort(), new PingPongDest[] {CLIENT},
                    new StopSignal());
            assertEquals(SERVER, remote[0]);
            byte[] wire = seen.get(30, TimeUnit.SECONDS);
            ByteArrayOutputStream want = new ByteArrayOutputStream();
            want.write(msg("0000:000011:7d2e1a:00000000000000000000ffffc0a8010a"));
            want.write(new byte[] {'d', 'o', 'n', 'e', 0});
            assertArrayEquals(want.toByteArray(), wire);
        }
    }

    @Test
    void serverConnectsBeforeItAnswers() throws Exception {
        ServerSocket listener = PingPongExchange.listen(0);
        int port = listener.getLocalPort();
        AtomicBoolean connected = new AtomicBoolean();
        CompletableFuture<PingPongDest[]> server = async(() -> {
            try {
                return PingPongExchange.serve(listener, new PingPongDest[] {SERVER}, r -> {
                    assertEquals(CLIENT, r[0]);
                    connected.set(true);
                }, new StopSignal());
            } catch (PingPongExchange.ExchangeException e) {
                throw new IllegalStateException(e);
            }
        });
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
            s.setSoTimeout(20_000);
            OutputStream out = s.getOutputStream();
            // Split the message as TCP may: the server must still read all 52 bytes.
            byte[] m = CLIENT.encode();
            out.write(m, 0, 10);
            out.flush();
            out.write(m, 10, 42);
            out.flush();
            byte[] reply = readAll(s.getInputStream(), 52);
            assertTrue(connected.get(), "the server answers only after moving its QP to RTS");
            assertArrayEquals(msg("0000:000012:000abc:fe80000000000000020000fffe000001"), reply);
            out.write(new byte[] {'d', 'o', 'n', 'e', 0});
            out.flush();
            assertEquals(-1, s.getInputStream().read(), "the server closes after done");
        }
        assertEquals(CLIENT, server.get(30, TimeUnit.SECONDS)[0]);
    }

    @Test
    void srqAlwaysExchanges256Addresses() throws Exception {
        PingPongDest[] mine = new PingPongDest[PingPongOptions.MAX_QP];
        Arrays.fill(mine, PingPongDest.UNUSED);
        mine[0] = CLIENT;
        mine[1] = new PingPongDest(0, 0x13, 5, CLIENT.gid());
        try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            CompletableFuture<byte[]> seen = async(() -> {
                try (Socket s = ss.accept()) {
                    s.setSoTimeout(20_000);
                    byte[] all = readAll(s.getInputStream(), 256 * 52);
                    for (int i = 0; i < 256; i++) {
                        s.getOutputStream().write(i == 0 ? SERVER.encode() : PingPongDest.UNUSED.encode());
                    }
                    readAll(s.getInputStream(), 5);
                    return all;
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            PingPongDest[] remote = PingPongExchange.client("localhost", ss.getLocalPort(), mine, new StopSignal());
            assertEquals(256, remote.length);
            assertEquals(SERVER, remote[0]);
            assertEquals(PingPongDest.UNUSED, remote[255]);
            byte[] wire = seen.get(30, TimeUnit.SECONDS);
            assertArrayEquals(msg("0000:000013:000005:00000000000000000000ffffc0a8010a"), Arrays.copyOfRange(wire, 52, 104));
            assertArrayEquals(msg("0000:000000:000000:00000000000000000000000000000000"),
                    Arrays.copyOfRange(wire, 255 * 52, 256 * 52));
        }
    }

    @Test
    void connectionRefusedNamesTheAddressTried() throws Exception {
        int port;
        try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = ss.getLocalPort();
        }
        var e = assertThrows(PingPongExchange.ExchangeException.class,
                () -> PingPongExchange.client("127.0.0.1", port, new PingPongDest[] {CLIENT}, new StopSignal()));
        assertTrue(e.getMessage().startsWith("Couldn't connect to 127.0.0.1:" + port + " (tried 127.0.0.1:" + port + ": "),
                e.getMessage());
        assertTrue(e.getMessage().contains("refused"), e.getMessage());
    }

    @Test
    void garbageFromThePeerIsAClearError() throws Exception {
        try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            async(() -> {
                try (Socket s = ss.accept()) {
                    readAll(s.getInputStream(), 52);
                    s.getOutputStream().write(msg("HTTP/1.1 400 Bad Request"));
                    s.getInputStream().read();
                } catch (Exception e) {
                    // The client closes on the error.
                }
            });
            var e = assertThrows(PingPongExchange.ExchangeException.class,
                    () -> PingPongExchange.client("127.0.0.1", ss.getLocalPort(), new PingPongDest[] {CLIENT},
                            new StopSignal()));
            assertTrue(e.getMessage().startsWith("Couldn't read remote address: "), e.getMessage());
        }
    }

    @Test
    void stopUnblocksAServerWaitingForAClient() throws Exception {
        StopSignal stop = new StopSignal();
        ServerSocket listener = PingPongExchange.listen(0);
        CompletableFuture<String> server = async(() -> {
            try {
                PingPongExchange.serve(listener, new PingPongDest[] {SERVER}, r -> { }, stop);
                return "returned";
            } catch (PingPongExchange.ExchangeException e) {
                return e.getMessage();
            }
        });
        stop.stop();
        assertEquals("interrupted while waiting for a client", server.get(30, TimeUnit.SECONDS));
        assertTrue(listener.isClosed());
    }
}
