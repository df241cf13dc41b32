// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.IntConsumer;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.verbs.cm.CmAddress;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * perftest's {@code -R} (rdma_cm) as perftest 4.5 to 6.x does it ({@code perftest_communication.c}): with
 * {@code -R} the exchange itself travels over rdma_cm too ("Data ex. method : rdma_cm"): an RC QP connected by
 * rdma_cm on the test's port carries every exchange message as one SEND into one posted 56-byte receive
 * ({@code rdma_client_connect}, {@code rdma_server_connect}, {@code rdma_write_data}); then the test QPs are
 * connected by rdma_cm on the same port ({@code create_rdma_cm_connection}: a hand-shake, the server listens
 * again, the client connects each QP, a hand-shake), and no QP is moved by hand.
 */
final class PerftestCm {
    /** rdma_resolve_addr / rdma_resolve_route timeouts perftest uses. */
    static final Duration RESOLVE_TIMEOUT = Duration.ofMillis(2000);
    /** rdma_cm_client_connection: connect attempts (the server may not listen again yet) and the pause between. */
    static final int CONNECT_ATTEMPTS = 10;
    static final long CONNECT_RETRY_NS = TimeUnit.MILLISECONDS.toNanos(100);
    /** How long the client waits for DISCONNECTED of its test QPs at the end (perftest waits without a bound). */
    static final Duration DISCONNECT_WAIT = Duration.ofSeconds(10);

    private PerftestCm() {
    }

    /** The address of a device for {@code -d} under {@code -R}: its first address of the destination's family. */
    static InetAddress addressOf(RdmaCm cm, String device, InetAddress like) {
        InetAddress any = null;
        for (CmAddress a : cm.addresses()) {
            if (a.device().name().equals(device)) {
                if (like == null || a.address().getClass() == like.getClass()) {
                    return a.address();
                }
                any = any == null ? a.address() : any;
            }
        }
        return any;
    }

    private static CmEvent next(CmEventChannel ch, StopSignal stop, long deadline, String what) throws IOException {
        while (true) {
            if (stop != null && stop.stopped()) {
                throw new PerftestWire.StoppedException();
            }
            CmEvent e = ch.getEvent(CmExamples.EVENT_SLICE);
            if (e != null) {
                return e;
            }
            if (deadline != 0 && System.nanoTime() - deadline > 0) {
                throw new IOException("no rdma_cm event while waiting for " + what);
            }
        }
    }

    private static void expect(CmEvent e, CmEventType t, String call) throws IOException {
        if (e.type() != t) {
            String m = "unexpected CM event " + e.type().value() + " (" + e + ") after " + call;
            e.ack();
            throw new IOException(m);
        }
    }

    // ------------------------------------------------------------------ the exchange over rdma_cm

    /**
     * The exchange's RC QP: one receive of {@link PerftestWire#DEST_SIZE} bytes posted at a time, re-posted
     * after each message is read; each write is one signaled SEND waited for. The peer closing its ID (perftest
     * exits without disconnecting: its kernel sends the DREQ) ends every wait with "the peer closed the
     * connection".
     */
    static final class Control implements PerftestWire.Transport {
        private final CmEventChannel channel;
        private final CmId id;
        private final Arena arena = Arena.ofShared();
        private ProtectionDomain pd;
        private CompletionQueue sendCq;
        private CompletionQueue recvCq;
        private MemoryRegion sendMr;
        private MemoryRegion recvMr;
        private final WorkCompletion wc = new WorkCompletion();
        /** A message read ahead by {@link #hasBytes} / {@link #peerState}, or null. */
        private byte[] pending;
        private boolean disconnected;
        private int timeoutMs;
        private StopSignal stop;

        private Control(CmEventChannel channel, CmId id) {
            this.channel = channel;
            this.id = id;
        }

        /** {@return the device context the control connection runs on (the CM's)} */
        Context context() {
            return id.context();
        }

        /** {@return this side's address of the control connection} */
        SocketAddress localAddress() {
            return id.localAddress();
        }

        private void setUp() {
            Context ctx = id.context();
            pd = ctx.allocPd();
            sendCq = ctx.createCq(2, null, 0);
            recvCq = ctx.createCq(2, null, 0);
            id.createQp(pd, new QpInitAttributes().type(QpType.RC).sendCq(sendCq).recvCq(recvCq)
                    .cap(new QpCapabilities(1, 1, 1, 1, 0)));
            sendMr = pd.regMr(arena.allocate(PerftestWire.DEST_SIZE, 8), AccessFlag.of(AccessFlag.LOCAL_WRITE));
            recvMr = pd.regMr(arena.allocate(PerftestWire.DEST_SIZE, 8), AccessFlag.of(AccessFlag.LOCAL_WRITE));
            postRecv();
        }

        private void postRecv() {
            RecvWorkRequest r = new RecvWorkRequest().wrId(1).singleSge(recvMr.address(), PerftestWire.DEST_SIZE,
                    recvMr.lkey());
            if (!id.qp().postRecv(r)) {
                throw new VerbsException(r.postError(), "Function ibv_post_recv failed for RDMA_CM QP: "
                        + r.postErrorMessage());
            }
        }

        /**
         * rdma_client_connect: resolve, route, QP, one receive, connect with depth 0, retry {@code retry},
         * RNR retry 7; waits for ESTABLISHED.
         */
        static Control connect(RdmaCm cm, InetAddress source, InetSocketAddress server, int retry, StopSignal stop)
                throws IOException {
            CmEventChannel ch = cm.createEventChannel();
            CmId id = null;
            try {
                id = ch.createId(PortSpace.TCP);
                Control c = new Control(ch, id);
                id.resolveAddr(source == null ? null : new InetSocketAddress(source, 0), server, RESOLVE_TIMEOUT);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                try (CmEvent e = next(ch, stop, deadline, "the address of " + server)) {
                    if (e.type() == CmEventType.ADDR_ERROR) {
                        throw new IOException("rdma_resolve_addr " + server + " failed: " + e);
                    }
                    expect(e, CmEventType.ADDR_RESOLVED, "rdma_resolve_addr");
                }
                id.resolveRoute(RESOLVE_TIMEOUT);
                try (CmEvent e = next(ch, stop, deadline, "the route to " + server)) {
                    expect(e, CmEventType.ROUTE_RESOLVED, "rdma_resolve_route");
                }
                c.setUp();
                id.connect(new ConnParam().retryCount(retry).rnrRetryCount(7));
                try (CmEvent e = next(ch, stop, 0, "the server's answer")) {
                    if (e.type() != CmEventType.ESTABLISHED) {
                        throw new IOException("Unexpected CM event " + e.type().value() + " (" + e + "): is the server ("
                                + "the same command without a host name, with -R) running at " + server + "?");
                    }
                }
                return c;
            } catch (IOException | RuntimeException e) {
                closeQuietly(ch, id);
                throw e;
            }
        }

        /**
         * rdma_server_connect: bind, listen, take one CONNECT_REQUEST, QP, one receive, accept with retry
         * {@code retry} and RNR retry 7 (perftest 4.5 to 6.x: {@code conn_param.retry_count =
         * user_param->retry_count; conn_param.rnr_retry_count = 7;}, as rdma_client_connect) without waiting for
         * ESTABLISHED, as perftest, and destroy the listener so the test QPs can listen on the port again.
         */
        static Control accept(RdmaCm cm, InetSocketAddress bind, IntConsumer onBound, int timeoutMs, int retry,
                StopSignal stop) throws IOException {
            CmEventChannel ch = cm.createEventChannel();
            CmId listen = ch.createId(PortSpace.TCP);
            CmId id = null;
            try {
                listen.bindAddr(bind);
                listen.listen(1);
                if (onBound != null) {
                    onBound.accept(((InetSocketAddress) listen.localAddress()).getPort());
                }
                long deadline = timeoutMs > 0 ? System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs) : 0;
                try (CmEvent e = next(ch, stop, deadline, "a client")) {
                    if (e.type() != CmEventType.CONNECT_REQUEST) {
                        throw new IOException("bad event waiting for connect request " + e.type().value() + " (" + e + ")");
                    }
                    id = e.id();
                }
                Control c = new Control(ch, id);
                c.setUp();
                id.accept(new ConnParam().retryCount(retry).rnrRetryCount(7));
                listen.close();
                listen = null;
                return c;
            } catch (IOException | RuntimeException e) {
                if (listen != null) {
                    closeQuietly(null, listen);
                }
                closeQuietly(ch, id);
                throw e;
            }
        }

        @Override
        public void timeoutMs(int ms) {
            this.timeoutMs = ms;
        }

        @Override
        public void stopOn(StopSignal s) {
            this.stop = s;
        }

        @Override
        public boolean binaryKeys() {
            return true;
        }

        /** Takes a receive completion if one is there; looks at the CM events (DISCONNECTED). */
        private boolean poll() throws IOException {
            if (pending != null) {
                return true;
            }
            if (recvCq.poll(wc)) {
                check(wc, "receive");
                int n = Math.min(wc.byteLen(), PerftestWire.DEST_SIZE);
                pending = recvMr.segment().asSlice(0, n).toArray(ValueLayout.JAVA_BYTE);
                postRecv();
                return true;
            }
            drainEvents();
            return false;
        }

        /** Takes the control ID's events: DISCONNECTED (the peer's DREQ, or its DREP) means it went away. */
        private void drainEvents() {
            for (CmEvent e = channel.pollEvent(); e != null; e = channel.pollEvent()) {
                if (e.type() == CmEventType.DISCONNECTED) {
                    disconnected = true;
                }
                e.ack();
            }
        }

        private void check(WorkCompletion w, String what) throws IOException {
            if (w.status() != WcStatus.SUCCESS) {
                throw new IOException(w.status() == WcStatus.WR_FLUSH_ERR
                        ? "the peer closed the connection (the exchange's " + what + " was flushed)"
                        : "Bad wc status " + w.status().value() + " (" + w.status().description() + ") on the exchange's "
                        + what);
            }
        }

        @Override
        public boolean hasBytes() throws IOException {
            return poll();
        }

        @Override
        public int peerState() throws IOException {
            if (poll()) {
                return 1;
            }
            return disconnected ? -1 : 0;
        }

        @Override
        public void write(byte[] b) throws IOException {
            MemorySegment s = sendMr.segment();
            MemorySegment.copy(b, 0, s, ValueLayout.JAVA_BYTE, 0, b.length);
            SendWorkRequest w = new SendWorkRequest().opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED).wrId(2)
                    .singleSge(sendMr.address(), b.length, sendMr.lkey());
            if (!id.qp().postSend(w)) {
                throw new IOException("Function ibv_post_send failed: " + w.postErrorMessage());
            }
            await(() -> {
                if (sendCq.poll(wc)) {
                    check(wc, "SEND");
                    return true;
                }
                return false;
            }, "the SEND of " + b.length + " bytes to complete");
        }

        @Override
        public void readFully(byte[] r) throws IOException {
            await(this::poll, "the peer's message");
            System.arraycopy(pending, 0, r, 0, Math.min(r.length, pending.length));
            pending = null;
        }

        private interface Check {
            boolean done() throws IOException;
        }

        private void await(Check c, String what) throws IOException {
            long start = System.nanoTime();
            long stopSeen = 0;
            int spins = 0;
            while (!c.done()) {
                if (disconnected) {
                    throw new IOException("the peer closed the connection (its rdma_cm ID went away) while this side"
                            + " waited for " + what);
                }
                spins = BusyPoll.idle(spins);
                if (BusyPoll.yields(spins) && (spins & 255) == 0) {
                    long now = System.nanoTime();
                    if (stop != null && stop.stopped()) {
                        if (stopSeen == 0) {
                            stopSeen = now;
                        } else if (now - stopSeen > PerftestWire.Channel.STOP_GRACE_NS) {
                            throw new PerftestWire.StoppedException();
                        }
                    }
                    if (timeoutMs > 0 && now - start > TimeUnit.MILLISECONDS.toNanos(timeoutMs)) {
                        throw new IOException("the peer sent nothing for " + timeoutMs / 1000 + " s");
                    }
                    drainEvents(); // the CM events too, so a peer that went away is noticed
                }
            }
        }

        @Override
        public void close() {
            for (CmEvent e; (e = channel.pollEvent()) != null; ) {
                e.ack();
            }
            try {
                if (id.qp() != null) {
                    id.destroyQp();
                }
            } catch (VerbsException e) {
                // going away either way
            }
            for (AutoCloseable c : new AutoCloseable[] {sendMr, recvMr, sendCq, recvCq, pd}) {
                try {
                    if (c != null) {
                        c.close();
                    }
                } catch (Exception e) {
                    // going away either way
                }
            }
            arena.close();
            closeQuietly(channel, id);
        }

        @Override
        public String toString() {
            return "rdma_cm " + id.localAddress() + " <-> " + id.remoteAddress();
        }
    }

    private static void closeQuietly(CmEventChannel ch, CmId id) {
        if (ch != null) {
            for (CmEvent e; (e = ch.pollEvent()) != null; ) {
                e.ack();
            }
        }
        if (id != null) {
            try {
                id.close();
            } catch (VerbsException e) {
                // going away either way
            }
        }
        if (ch != null) {
            try {
                ch.close();
            } catch (VerbsException e) {
                // an ID of a request that never got its event acknowledged: the JVM's exit takes it
            }
        }
    }

    // ------------------------------------------------------------------ the test QPs

    /** What the role gives for each connected QP: the device (on the first) and the QP to create. */
    interface QpFactory {
        /**
         * Called once, with the device of the first connection, before any QP: create the PD, CQs and buffers.
         *
         * @param ctx the CM's context of the device
         */
        void resources(Context ctx);

        /**
         * @param i the QP's index
         * @return its creation attributes (type RC or UC, the role's CQs)
         */
        QpInitAttributes qpAttributes(int i);

        /** @return the role's PD */
        ProtectionDomain pd();
    }

    /**
     * The test QPs' connections ({@code cma_master}): {@code n} IDs on their own event channel; the client
     * resolves and connects each, the server listens on the port again and accepts {@code n} requests.
     */
    static final class TestQps implements AutoCloseable {
        private final CmEventChannel channel;
        private final List<CmId> ids = new ArrayList<>();
        private final boolean client;
        private CmId listen;

        private TestQps(CmEventChannel channel, boolean client) {
            this.channel = channel;
            this.client = client;
        }

        /** {@return the QPs, in order} */
        QueuePair[] qps() {
            QueuePair[] q = new QueuePair[ids.size()];
            for (int i = 0; i < q.length; i++) {
                q[i] = ids.get(i).qp();
            }
            return q;
        }

        /** {@return the first connection's ID (its route says which GID the QPs use)} */
        CmId first() {
            return ids.getFirst();
        }

        private static ConnParam param(int depth, int retry) {
            // perftest: depths out_reads for READ/atomics (else 0); retry_count and rnr_retry_count both retry
            return new ConnParam().responderResources(depth).initiatorDepth(depth).retryCount(retry)
                    .rnrRetryCount(Math.min(retry, 7));
        }

        /**
         * _rdma_cm_client_connection with rdma_cm_client_connection's retries: every QP's ID resolves and
         * connects; a REJECT (the server does not listen yet) starts over after 100 ms, 10 times at most.
         */
        static TestQps connect(RdmaCm cm, InetAddress source, InetSocketAddress server, int n, int depth, int retry,
                               QpFactory f, StopSignal stop) throws IOException {
            IOException last = null;
            boolean resourcesMade = false;
            for (int attempt = 0; attempt < CONNECT_ATTEMPTS; attempt++) {
                TestQps t = new TestQps(cm.createEventChannel(), true);
                try {
                    for (int i = 0; i < n; i++) {
                        CmId id = t.channel.createId(PortSpace.TCP);
                        id.attach(i);
                        t.ids.add(id);
                        id.resolveAddr(source == null ? null : new InetSocketAddress(source, 0), server, RESOLVE_TIMEOUT);
                    }
                    int left = n;
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
                    while (left > 0) {
                        try (CmEvent e = next(t.channel, stop, deadline, "the test QPs' connections")) {
                            CmId id = e.id();
                            int i = (Integer) id.attachment();
                            switch (e.type()) {
                                case ADDR_RESOLVED -> id.resolveRoute(RESOLVE_TIMEOUT);
                                case ROUTE_RESOLVED -> {
                                    if (!resourcesMade) {
                                        f.resources(id.context());
                                        resourcesMade = true;
                                    }
                                    id.createQp(f.pd(), f.qpAttributes(i));
                                    id.connect(param(depth, retry));
                                }
                                case ESTABLISHED -> left--;
                                case REJECTED, UNREACHABLE, ADDR_ERROR, ROUTE_ERROR, CONNECT_ERROR ->
                                    throw new IOException("RDMA CM event error: Event: " + e.type().rdmaName()
                                            + "; error: " + e.status() + (e.detail() != null ? " (" + e.detail() + ")" : ""));
                                default -> {
                                    // DISCONNECTED of an earlier attempt's ID, TIMEWAIT_EXIT: nothing to do
                                }
                            }
                        }
                    }
                    return t;
                } catch (IOException e) {
                    last = e;
                    t.close();
                    if (e instanceof PerftestWire.StoppedException) {
                        throw e;
                    }
                    java.util.concurrent.locks.LockSupport.parkNanos(CONNECT_RETRY_NS); // usleep(100000), as perftest
                } catch (RuntimeException e) {
                    t.close();
                    throw e;
                }
            }
            throw new IOException("Failed to connect RDMA CM client, tried " + CONNECT_ATTEMPTS + " times: "
                    + (last == null ? "" : last.getMessage()));
        }

        /**
         * The server's half of rdma_cm_server_connection that must come first: bind the port again and listen,
         * before the hand-shake that lets the client connect. perftest's client connects its test QPs as soon as
         * that hand-shake is done, and over iWARP siw's connect is a TCP connect that is refused (ECONNREFUSED,
         * REJECTED at the client) when nothing listens yet; the client's retry path of perftest 4.5 then crashes.
         * Listening early changes nothing on the wire for a client that waits.
         */
        static TestQps listen(RdmaCm cm, InetSocketAddress bind, int n) {
            TestQps t = new TestQps(cm.createEventChannel(), false);
            try {
                t.listen = t.channel.createId(PortSpace.TCP);
                t.listen.bindAddr(bind);
                t.listen.listen(n);
                return t;
            } catch (RuntimeException e) {
                t.close();
                throw e;
            }
        }

        /**
         * The rest of rdma_cm_server_connection, on a {@link #listen listening} set: for each of {@code n}
         * requests create the QP and accept (no wait for ESTABLISHED); then destroy the listener.
         */
        void acceptAll(int n, int depth, int retry, QpFactory f, StopSignal stop, PerftestWire.Transport control)
                throws IOException {
            try {
                boolean resourcesMade = false;
                for (int i = 0; i < n; ) {
                    CmEvent got = channel.getEvent(CmExamples.EVENT_SLICE);
                    if (got == null) {
                        if (stop != null && stop.stopped()) {
                            throw new PerftestWire.StoppedException();
                        }
                        if (control.peerState() < 0) {
                            throw new IOException("the client closed the exchange before it connected its test QPs");
                        }
                        continue;
                    }
                    try (CmEvent e = got) {
                        if (e.type() != CmEventType.CONNECT_REQUEST) {
                            continue; // an event of an accepted connection (ESTABLISHED): nothing to do
                        }
                        CmId id = e.id();
                        id.attach(i);
                        ids.add(id);
                        if (!resourcesMade) {
                            f.resources(id.context());
                            resourcesMade = true;
                        }
                        id.createQp(f.pd(), f.qpAttributes(i));
                        id.accept(param(depth, retry));
                        i++;
                    }
                }
                listen.close();
                listen = null;
            } catch (IOException | RuntimeException e) {
                close();
                throw e;
            }
        }

        /**
         * rdma_cm_disconnect_nodes (the client disconnects each QP and waits for its DISCONNECTED), then the
         * IDs' QPs and the IDs go; the server only closes (its peer has disconnected, or the close sends the
         * DREQ).
         */
        @Override
        public void close() {
            if (client) {
                int connected = 0;
                for (CmId id : ids) {
                    try {
                        id.disconnect();
                        connected++;
                    } catch (VerbsException e) {
                        // never connected (a failed attempt)
                    }
                }
                long deadline = System.nanoTime() + DISCONNECT_WAIT.toNanos();
                while (connected > 0 && System.nanoTime() - deadline < 0) {
                    CmEvent e = channel.getEvent(CmExamples.EVENT_SLICE);
                    if (e != null) {
                        try (e) {
                            if (e.type() == CmEventType.DISCONNECTED) {
                                connected--;
                            }
                        }
                    }
                }
            }
            for (CmEvent e; (e = channel.pollEvent()) != null; ) {
                e.ack();
            }
            for (CmId id : ids) {
                try {
                    if (id.qp() != null) {
                        id.destroyQp();
                    }
                } catch (VerbsException e) {
                    // going away either way
                }
                closeQuietly(null, id);
            }
            ids.clear();
            if (listen != null) {
                closeQuietly(null, listen);
            }
            try {
                channel.close();
            } catch (VerbsException e) {
                // IDs of requests that arrived after the last accept: the JVM's exit takes them
            }
        }
    }
}
