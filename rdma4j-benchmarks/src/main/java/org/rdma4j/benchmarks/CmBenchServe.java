// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.benchmarks;

import static org.rdma4j.benchmarks.CmBench.CAP;
import static org.rdma4j.benchmarks.CmBench.ECHO;
import static org.rdma4j.benchmarks.CmBench.WAIT;
import static org.rdma4j.benchmarks.CmBench.stdinEof;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.foreign.Arena;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.Map;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * {@code CmBench serve CM_PORT TCP_PORT}: the peer of {@code latency} and {@code hold}. Accepts every CM
 * connection (echoes the SENDs of the one whose private data starts with {@code ECHO}, tears down on
 * DISCONNECTED) and every TCP connection (echoes until EOF), until its standard input closes.
 */
final class CmBenchServe {
    private CmBenchServe() {
    }

    /**
     * One accepted connection of {@code serve}: its QP; for the echo connection also a completion channel, CQs on
     * it, a receive buffer and a thread that echoes each SEND, woken by the channel (so that the round trip
     * measured beside the CM pays the same thread wake-ups as a MAD exchange, and no spinning thread of this
     * process takes a core from the other process or from this one's CM agent).
     */
    private static final class Conn {
        final CmId id;
        private final MemoryRegion mr;
        private final CompletionChannel channel;
        private final CompletionQueue scq;
        private final CompletionQueue rcq;
        private final Thread echo;
        private volatile boolean stop;

        Conn(CmId id, ProtectionDomain pd, Arena arena, boolean echoes) {
            this.id = id;
            if (!echoes) {
                id.createQp(pd, new QpInitAttributes().type(QpType.RC).cap(CAP));
                mr = null;
                channel = null;
                scq = null;
                rcq = null;
                echo = null;
                return;
            }
            Context ctx = id.context();
            channel = ctx.createCompChannel();
            scq = ctx.createCq(CAP.maxSendWr(), channel, 0);
            rcq = ctx.createCq(CAP.maxRecvWr(), channel, 0);
            id.createQp(pd, new QpInitAttributes().type(QpType.RC).sendCq(scq).recvCq(rcq).cap(CAP));
            mr = pd.regMr(arena.allocate(64, 8), EnumSet.of(AccessFlag.LOCAL_WRITE));
            post();
            scq.reqNotify(false);
            rcq.reqNotify(false);
            echo = Thread.ofPlatform().daemon().name("echo").start(this::echoLoop);
        }

        private void post() {
            id.qp().postRecv(new RecvWorkRequest().singleSge(mr.address(), 64, mr.lkey()));
        }

        private void echoLoop() {
            WorkCompletion wc = new WorkCompletion();
            while (!stop) {
                CompletionQueue cq = channel.getCqEvent(Duration.ofMillis(100));
                if (cq == null) {
                    continue;
                }
                cq.ackEvents(1);
                cq.reqNotify(false);
                while (cq.poll(wc)) {
                    if (cq == rcq && wc.status().name().equals("SUCCESS")) {
                        int n = wc.byteLen();
                        post();
                        id.qp().postSend(new SendWorkRequest().opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                                .singleSge(mr.address(), n, mr.lkey()));
                    }
                }
            }
        }

        void close() throws InterruptedException {
            if (echo != null) {
                stop = true;
                echo.interrupt();
                echo.join(WAIT.toMillis());
            }
            id.destroyQp();
            if (echo != null) {
                scq.close();
                rcq.close();
                channel.close();
                mr.close();
            }
            id.close();
        }
    }

    static void serve(int cmPort, int tcpPort) throws Exception {
        RdmaCm cm = RdmaCm.system();
        // bound before "serving" is printed, so the client never finds it missing; a bind failure ends serve
        ServerSocket tss = new ServerSocket();
        tss.setReuseAddress(true);
        tss.bind(new InetSocketAddress(tcpPort), 1024);
        Thread tcp = Thread.ofPlatform().daemon().name("tcp-serve").start(() -> serveTcp(tss));
        Map<CmId, Conn> conns = new HashMap<>();
        Map<Context, ProtectionDomain> pds = new HashMap<>();
        try (Arena arena = Arena.ofShared(); CmEventChannel ch = cm.createEventChannel()) {
            CmId listen = ch.createId(PortSpace.TCP);
            listen.bindAddr(new InetSocketAddress(InetAddress.ofLiteral("::"), cmPort));
            listen.listen(0);
            System.out.println("serving cm " + cmPort + " tcp " + tcpPort);
            System.out.flush();
            while (!stdinEof) {
                CmEvent e = ch.getEvent(Duration.ofMillis(50));
                if (e == null) {
                    continue;
                }
                try (e) {
                    CmId id = e.id();
                    switch (e.type()) {
                        case CONNECT_REQUEST -> {
                            ProtectionDomain pd = pds.computeIfAbsent(id.context(), Context::allocPd);
                            byte[] pdata = e.privateData();
                            Conn c = new Conn(id, pd, arena, pdata != null && pdata.length > 0 && pdata[0] == ECHO);
                            conns.put(id, c);
                            id.accept(new ConnParam().responderResources(1).initiatorDepth(1).retryCount(6)
                                    .rnrRetryCount(7));
                        }
                        case DISCONNECTED -> {
                            Conn c = conns.remove(id);
                            if (c != null) {
                                // the DREP first, then the teardown, as rdma-core's cmtime server does
                                // (server_disconnect: rdma_disconnect on DISCONNECTED): the peer's
                                // disconnect ends when the DREP arrives
                                id.disconnect();
                                e.ack();
                                c.close();
                            }
                        }
                        default -> {
                            // ESTABLISHED, TIMEWAIT_EXIT: nothing to do
                        }
                    }
                }
            }
            listen.close();
            for (Conn c : conns.values()) {
                c.close();
            }
            tcp.interrupt();
        }
    }

    /** Echoes each connection until its EOF; one connection's failure (a reset) does not end the server. */
    private static void serveTcp(ServerSocket ss) {
        try (ss) {
            while (!stdinEof) {
                try (Socket s = ss.accept()) {
                    InputStream in = s.getInputStream();
                    OutputStream out = s.getOutputStream();
                    byte[] b = new byte[64];
                    for (int n; (n = in.read(b)) > 0; ) {
                        out.write(b, 0, n);
                    }
                } catch (IOException e) {
                    if (ss.isClosed()) {
                        return;
                    }
                    System.err.println("tcp serve: one connection: " + e.getMessage());
                }
            }
        } catch (IOException e) {
            System.err.println("tcp serve: " + e.getMessage());
        }
    }
}
