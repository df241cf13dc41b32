// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.examples;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.verbs.cm.EndpointOptions;
import org.rdma4j.verbs.cm.RdmaEndpoint;
import org.rdma4j.verbs.cm.RdmaServer;

/**
 * A request/response service over RDMA in two processes: the client SENDs each request (a line of text)
 * on an RC connection, the server answers each with a SEND of the same text in upper case. Connections
 * come from the connection API ({@link RdmaServer}, {@link RdmaEndpoint}: rdma_cm underneath), so the
 * same program runs on the soft device's RoCE devices and on a NIC.
 *
 * <pre>
 *   RDMA4J_DEVICES=rxe0=127.0.0.1 java ... org.rdma4j.examples.RequestResponse server 127.0.0.1 7471 1
 *   RDMA4J_DEVICES=rxe1=127.0.0.2 java ... org.rdma4j.examples.RequestResponse client 127.0.0.2 127.0.0.1 7471 hello world
 * </pre>
 *
 * The server serves that many clients, one after the other, then exits. Every wait is bounded.
 */
public final class RequestResponse {
    private static final int MAX_MESSAGE = 4096;
    private static final Duration WAIT = Duration.ofSeconds(10);

    private RequestResponse() {
    }

    /**
     * Runs the server or the client.
     *
     * @param args {@code server <address> <port> <clients>} or {@code client <source> <server> <port> <request>...}
     */
    public static void main(String[] args) {
        if (args.length >= 4 && args[0].equals("server")) {
            server(new InetSocketAddress(args[1], Integer.parseInt(args[2])), Integer.parseInt(args[3]));
        } else if (args.length >= 5 && args[0].equals("client")) {
            client(new InetSocketAddress(args[1], 0), new InetSocketAddress(args[2], Integer.parseInt(args[3])),
                    Arrays.copyOfRange(args, 4, args.length));
        } else {
            System.err.println("usage: server <address> <port> <clients> | client <source> <server> <port> <request>...");
            System.exit(2);
        }
    }

    static void server(InetSocketAddress address, int clients) {
        // Buffers are registered and the first receive posted before the connection is made, so the
        // client's first request never meets an empty receive queue.
        EndpointOptions options = new EndpointOptions().beforeConnect(Messages::attach);
        try (RdmaServer server = RdmaServer.bind(address, options)) {
            System.out.println("listening on " + address);
            System.out.flush();
            for (int served = 0; served < clients; served++) {
                RdmaEndpoint ep = server.accept(WAIT);
                if (ep == null) {
                    throw new IllegalStateException("no client within " + WAIT);
                }
                try (ep) {
                    System.out.println("connected: " + ep.remoteAddress());
                    Messages m = Messages.of(ep);
                    int answered = 0;
                    for (String request; (request = m.receive()) != null; answered++) {
                        m.send(request.toUpperCase(Locale.ROOT));
                    }
                    System.out.println("answered " + answered + " requests from " + ep.remoteAddress());
                }
            }
        }
    }

    static void client(InetSocketAddress source, InetSocketAddress server, String[] requests) {
        EndpointOptions options = new EndpointOptions().source(source).beforeConnect(Messages::attach);
        try (RdmaEndpoint ep = RdmaEndpoint.connect(server, options)) {
            Messages m = Messages.of(ep);
            for (String request : requests) {
                m.send(request);
                String response = m.receive();
                if (response == null) {
                    throw new IllegalStateException("the server went away before answering '" + request + "'");
                }
                System.out.println(request + " -> " + response);
            }
        } // close() disconnects: the server's receive loop ends
    }

    /**
     * One registered buffer each way on an endpoint, and a receive always posted: a peer sends only after
     * it got the answer to its last message, so one is enough.
     */
    private static final class Messages {
        private final RdmaEndpoint ep;
        private final MemoryRegion recvMr;
        private final MemoryRegion sendMr;
        private final WorkCompletion wc = new WorkCompletion();

        private Messages(RdmaEndpoint ep) {
            this.ep = ep;
            // Shared: the device reaches the memory from its own threads. Freed with the endpoint.
            Arena arena = ep.closeWith(Arena.ofShared());
            recvMr = ep.closeWith(ep.pd().regMr(arena.allocate(MAX_MESSAGE), AccessFlag.of(AccessFlag.LOCAL_WRITE)));
            sendMr = ep.closeWith(ep.pd().regMr(arena.allocate(MAX_MESSAGE), AccessFlag.of(AccessFlag.LOCAL_WRITE)));
        }

        static void attach(RdmaEndpoint ep) {
            Messages m = new Messages(ep);
            ep.cmId().attach(m);
            m.postReceive();
        }

        static Messages of(RdmaEndpoint ep) {
            return (Messages) ep.cmId().attachment();
        }

        private void postReceive() {
            RecvWorkRequest wr = new RecvWorkRequest(1).wrId(1).singleSge(recvMr.address(), MAX_MESSAGE, recvMr.lkey());
            if (!ep.qp().postRecv(wr)) {
                throw new IllegalStateException("post receive: " + wr.postError());
            }
        }

        void send(String text) {
            byte[] b = text.getBytes(StandardCharsets.UTF_8);
            if (b.length > MAX_MESSAGE) {
                throw new IllegalArgumentException("a message is at most " + MAX_MESSAGE + " bytes");
            }
            MemorySegment.copy(b, 0, sendMr.segment(), ValueLayout.JAVA_BYTE, 0, b.length);
            SendWorkRequest wr = new SendWorkRequest().opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED).wrId(2)
                    .singleSge(sendMr.address(), b.length, sendMr.lkey());
            if (!ep.qp().postSend(wr)) {
                throw new IllegalStateException("post send: " + wr.postError());
            }
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (!ep.sendCq().poll(wc)) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("no send completion within " + WAIT);
                }
                Thread.onSpinWait();
            }
            if (wc.status() != WcStatus.SUCCESS) {
                throw new IllegalStateException("send: " + wc.status());
            }
        }

        /** The next message, or null once the peer disconnected. */
        String receive() {
            long deadline = System.nanoTime() + WAIT.toNanos();
            for (int i = 0; System.nanoTime() < deadline; i++) {
                if (ep.recvCq().poll(wc)) {
                    if (wc.status() != WcStatus.SUCCESS) {
                        return null; // flushed: the connection is gone
                    }
                    String text = new String(recvMr.segment().asSlice(0, wc.byteLen()).toArray(ValueLayout.JAVA_BYTE),
                            StandardCharsets.UTF_8);
                    postReceive();
                    return text;
                }
                if ((i & 1023) == 0 && !ep.isConnected()) {
                    return null;
                }
                Thread.onSpinWait();
            }
            throw new IllegalStateException("no message within " + WAIT);
        }
    }
}
