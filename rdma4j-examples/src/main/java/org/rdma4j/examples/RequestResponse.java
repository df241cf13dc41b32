// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.examples;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Locale;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.CompletionQueue;
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

/**
 * A request/response service over RDMA, two processes: the client SENDs each request (a line of text)
 * on an RC connection, the server answers each with a SEND of the same text in upper case. Connections
 * are made with the CM API (rdma_cm's calls: resolve, connect, accept, disconnect), so the same program
 * runs on the soft device's RoCE devices and on a NIC.
 *
 * <pre>
 *   RDMA4J_DEVICES=rxe0=127.0.0.1 java -p ... -m org.rdma4j.examples/org.rdma4j.examples.RequestResponse server 127.0.0.1 7471 1
 *   RDMA4J_DEVICES=rxe1=127.0.0.2 java -p ... -m org.rdma4j.examples/org.rdma4j.examples.RequestResponse client 127.0.0.2 127.0.0.1 7471 hello world
 * </pre>
 *
 * The server serves that many clients, one after the other (a request to connect that arrives during a
 * connection waits in the backlog), then exits. Every wait is bounded.
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
     * @throws Exception when a step fails (the message says which)
     */
    public static void main(String[] args) throws Exception {
        if (args.length >= 4 && args[0].equals("server")) {
            server(new InetSocketAddress(args[1], Integer.parseInt(args[2])), Integer.parseInt(args[3]));
        } else if (args.length >= 5 && args[0].equals("client")) {
            String[] requests = java.util.Arrays.copyOfRange(args, 4, args.length);
            client(new InetSocketAddress(args[1], 0), new InetSocketAddress(args[2], Integer.parseInt(args[3])), requests);
        } else {
            System.err.println("usage: server <address> <port> <clients> | client <source> <server> <port> <request>...");
            System.exit(2);
        }
    }

    static void server(InetSocketAddress address, int clients) throws Exception {
        try (CmEventChannel channel = CmEventChannel.create(); CmId listener = channel.createId(PortSpace.TCP)) {
            listener.bindAddr(address);
            listener.listen(4);
            System.out.println("listening on " + address);
            System.out.flush();
            for (int served = 0; served < clients; served++) {
                CmId id;
                try (CmEvent request = expect(channel, CmEventType.CONNECT_REQUEST)) {
                    id = request.id();
                }
                try (id; Connection c = new Connection(id)) {
                    id.accept(new ConnParam().responderResources(1).initiatorDepth(1).retryCount(7).rnrRetryCount(7));
                    expect(channel, CmEventType.ESTABLISHED).close();
                    System.out.println("connected: " + id.remoteAddress());
                    int answered = 0;
                    String request;
                    while ((request = c.receive(channel)) != null) {
                        c.send(request.toUpperCase(Locale.ROOT));
                        answered++;
                    }
                    System.out.println("answered " + answered + " requests from " + id.remoteAddress());
                }
            }
        }
    }

    static void client(InetSocketAddress source, InetSocketAddress server, String[] requests) throws Exception {
        try (CmEventChannel channel = CmEventChannel.create(); CmId id = channel.createId(PortSpace.TCP)) {
            id.resolveAddr(source, server, WAIT);
            expect(channel, CmEventType.ADDR_RESOLVED).close();
            id.resolveRoute(WAIT);
            expect(channel, CmEventType.ROUTE_RESOLVED).close();
            try (Connection c = new Connection(id)) {
                id.connect(new ConnParam().responderResources(1).initiatorDepth(1).retryCount(7).rnrRetryCount(7));
                expect(channel, CmEventType.ESTABLISHED).close();
                for (String request : requests) {
                    c.send(request);
                    String response = c.receive(channel);
                    if (response == null) {
                        throw new IllegalStateException("the server went away before answering '" + request + "'");
                    }
                    System.out.println(request + " -> " + response);
                }
                id.disconnect();
                expect(channel, CmEventType.DISCONNECTED).close();
            }
        }
    }

    /** Waits for the next CM event and checks its type. */
    private static CmEvent expect(CmEventChannel channel, CmEventType type) {
        CmEvent e = channel.getEvent(WAIT);
        if (e == null) {
            throw new IllegalStateException("no CM event within " + WAIT + " (expected " + type + ")");
        }
        if (e.type() != type) {
            String got = e + (e.detail() == null ? "" : ": " + e.detail());
            e.close();
            throw new IllegalStateException("expected " + type + ", got " + got);
        }
        return e;
    }

    /**
     * One side's QP with a registered buffer for one message each way: a receive is always posted before
     * the peer can send (the client sends a request only after the previous response arrived).
     */
    private static final class Connection implements AutoCloseable {
        private final Arena arena = Arena.ofShared(); // the device reaches it from its own threads
        private final CmId id;
        private final ProtectionDomain pd;
        private final MemoryRegion recvMr;
        private final MemoryRegion sendMr;
        private final QueuePair qp;
        private final CompletionQueue sendCq;
        private final CompletionQueue recvCq;
        private final WorkCompletion wc = new WorkCompletion();

        Connection(CmId id) {
            this.id = id;
            pd = id.context().allocPd();
            recvMr = pd.regMr(arena.allocate(MAX_MESSAGE), AccessFlag.of(AccessFlag.LOCAL_WRITE));
            sendMr = pd.regMr(arena.allocate(MAX_MESSAGE), AccessFlag.of(AccessFlag.LOCAL_WRITE));
            // No CQs given: the CM ID creates and owns them.
            qp = id.createQp(pd, new QpInitAttributes().type(QpType.RC).cap(new QpCapabilities(4, 4, 1, 1, 0)));
            sendCq = id.sendCq();
            recvCq = id.recvCq();
            postReceive();
        }

        private void postReceive() {
            RecvWorkRequest wr = new RecvWorkRequest(1).wrId(1).singleSge(recvMr.address(), MAX_MESSAGE, recvMr.lkey());
            if (!qp.postRecv(wr)) {
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
            if (!qp.postSend(wr)) {
                throw new IllegalStateException("post send: " + wr.postError());
            }
            if (!poll(sendCq) || wc.status() != WcStatus.SUCCESS) {
                throw new IllegalStateException("send: " + wc.status());
            }
        }

        /** The next message, or null once the peer disconnected. */
        String receive(CmEventChannel channel) {
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (System.nanoTime() < deadline) {
                if (recvCq.poll(wc)) {
                    if (wc.status() != WcStatus.SUCCESS) {
                        return null; // flushed: the connection is gone
                    }
                    String text = new String(recvMr.segment().asSlice(0, wc.byteLen()).toArray(ValueLayout.JAVA_BYTE),
                            StandardCharsets.UTF_8);
                    postReceive();
                    return text;
                }
                CmEvent e = channel.pollEvent();
                if (e != null) {
                    try (e) {
                        if (e.type() == CmEventType.DISCONNECTED) {
                            return null;
                        }
                    }
                }
                Thread.onSpinWait();
            }
            throw new IllegalStateException("no message within " + WAIT);
        }

        private boolean poll(CompletionQueue cq) {
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (System.nanoTime() < deadline) {
                if (cq.poll(wc)) {
                    return true;
                }
                Thread.onSpinWait();
            }
            return false;
        }

        @Override
        public void close() {
            id.destroyQp(); // the QP and the CQs the CM ID made for it
            recvMr.close();
            sendMr.close();
            pd.close();
            arena.close();
        }
    }
}
