// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.SocketAddress;
import java.time.Duration;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Errno;
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
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * {@code rdma4j rdma_server} and {@code rdma4j rdma_client}: rdma-core's two smallest librdmacm examples
 * ({@code librdmacm/examples/rdma_server.c}, {@code rdma_client.c}), written with librdmacm's synchronous
 * calls ({@code rdma_create_ep}, {@code rdma_get_request}, {@code rdma_reg_msgs}, {@code rdma_post_recv},
 * {@code rdma_get_recv_comp}, ...), which this class provides over the CM API as librdmacm builds them: each
 * synchronous ID has its own event channel and waits for its own events; its QP gets CQs with completion
 * channels, its PD is one per device. The client sends 16 bytes (inline when the device allows 16 inline
 * bytes), the server answers with 16, both disconnect. Port 7471, TCP port space.
 */
public final class RdmaServerClient {
    private static final int MSG = 16;

    private final String name;
    private final RdmaCm cm;
    private final PrintStream out;
    private final PrintStream err;
    private final StopSignal stop;
    private String server;
    private String port = "7471";

    private RdmaServerClient(String name, String server, RdmaCm cm, PrintStream out, PrintStream err, StopSignal stop) {
        this.name = name;
        this.server = server;
        this.cm = cm;
        this.out = out;
        this.err = err;
        this.stop = stop;
    }

    /**
     * {@code rdma_server [-s server_address] [-p port_number]}.
     *
     * @param args its arguments
     * @param out  standard output
     * @param err  standard error
     * @param stop stops a run (Ctrl-C)
     * @return the exit status
     */
    public static int server(String[] args, PrintStream out, PrintStream err, StopSignal stop) {
        return server(args, RdmaCm.system(), out, err, stop);
    }

    /**
     * rdma_server on the given CM providers.
     *
     * @param args its arguments
     * @param cm   the providers
     * @param out  standard output
     * @param err  standard error
     * @param stop stops a run
     * @return the exit status
     */
    public static int server(String[] args, RdmaCm cm, PrintStream out, PrintStream err, StopSignal stop) {
        return new RdmaServerClient("rdma_server", "0.0.0.0", cm, out, err, stop).main(args, true);
    }

    /**
     * {@code rdma_client [-s server_address] [-p port_number]}.
     *
     * @param args its arguments
     * @param out  standard output
     * @param err  standard error
     * @param stop stops a run (Ctrl-C)
     * @return the exit status
     */
    public static int client(String[] args, PrintStream out, PrintStream err, StopSignal stop) {
        return client(args, RdmaCm.system(), out, err, stop);
    }

    /**
     * rdma_client on the given CM providers.
     *
     * @param args its arguments
     * @param cm   the providers
     * @param out  standard output
     * @param err  standard error
     * @param stop stops a run
     * @return the exit status
     */
    public static int client(String[] args, RdmaCm cm, PrintStream out, PrintStream err, StopSignal stop) {
        return new RdmaServerClient("rdma_client", "127.0.0.1", cm, out, err, stop).main(args, false);
    }

    private int main(String[] args, boolean passive) {
        stop.enter();
        try {
            Getopt g = new Getopt(args, "s:p:");
            int op;
            while ((op = g.next()) != -1) {
                switch (op) {
                    case 's' -> server = g.arg();
                    case 'p' -> port = g.arg();
                    default -> {
                        out.println("usage: " + name);
                        out.println("\t[-s server_address]");
                        out.println("\t[-p port_number]");
                        return 1;
                    }
                }
            }
            out.println(name + ": start");
            int ret;
            try (Arena arena = Arena.ofShared()) {
                ret = passive ? runServer(arena) : runClient(arena);
            }
            out.printf("%s: end %d\n", name, ret);
            return stop.stopped() ? 130 : ret & 0xFF;
        } finally {
            out.flush();
            stop.exit();
        }
    }

    // ------------------------------------------------------------------ librdmacm's synchronous calls

    /** The stop signal ended a wait: an EINTR for the caller's perror. */
    private static VerbsException interrupted(String call) {
        return new VerbsException(Errno.EINVAL, call + ": interrupted (Ctrl-C)");
    }

    /**
     * A synchronous CM ID ({@code rdma_create_ep}'s kind): its own event channel; every call that produces
     * an event waits for it ({@code ucma_complete}: REJECTED is ECONNREFUSED, a negative status its errno).
     */
    private final class SyncId implements AutoCloseable {
        final CmEventChannel channel;
        final CmId id;
        CmEvent event;
        ProtectionDomain pd;
        boolean ownsPd;
        CompletionChannel sendCh;
        CompletionChannel recvCh;
        CompletionQueue sendCq;
        CompletionQueue recvCq;
        QpInitAttributes initAttr;

        SyncId(CmEventChannel channel, CmId id) {
            this.channel = channel;
            this.id = id;
        }

        /** ucma_complete: acks the previous event, waits for the next one, maps its status to an errno. */
        CmEvent complete(String call) {
            ackEvent();
            while ((event = channel.getEvent(CmExamples.EVENT_SLICE)) == null) {
                if (stop.stopped()) {
                    throw interrupted(call);
                }
            }
            int st = event.status();
            if (st != 0) {
                String why = event.type().rdmaName() + ", status " + st
                        + (event.detail() != null ? ": " + event.detail() : "");
                if (event.type() == CmEventType.REJECTED) {
                    throw new VerbsException(Errno.ECONNREFUSED, call + ": " + why);
                }
                Errno e = Errno.of(st);
                throw new VerbsException(e == null ? Errno.EINVAL : e, call + ": " + why);
            }
            return event;
        }

        void ackEvent() {
            if (event != null) {
                event.ack();
                event = null;
            }
        }

        /** rdma_create_qp with a NULL PD: the device's PD, and CQs with completion channels (ucma_create_cqs). */
        QueuePair createQp(QpInitAttributes attrs) {
            var ctx = id.context();
            pd = ctx.allocPd();
            ownsPd = true;
            QpCapabilities cap = attrs.cap();
            sendCh = ctx.createCompChannel();
            sendCq = ctx.createCq(Math.max(cap.maxSendWr(), 1), sendCh, 0);
            recvCh = ctx.createCompChannel();
            recvCq = ctx.createCq(Math.max(cap.maxRecvWr(), 1), recvCh, 0);
            return id.createQp(pd, new QpInitAttributes().type(QpType.RC).sendCq(sendCq).recvCq(recvCq)
                    .sqSigAll(attrs.sqSigAll()).cap(cap));
        }

        /** rdma_get_send_comp / rdma_get_recv_comp: poll, arm, poll, wait on the channel; the count polled. */
        int getComp(boolean recv, WorkCompletion wc) {
            CompletionQueue cq = recv ? recvCq : sendCq;
            CompletionChannel ch = recv ? recvCh : sendCh;
            while (true) {
                if (cq.poll(wc)) {
                    return 1;
                }
                cq.reqNotify(false);
                if (cq.poll(wc)) {
                    return 1;
                }
                CompletionQueue got = null;
                while (got == null) {
                    if (stop.stopped()) {
                        throw interrupted(recv ? "rdma_get_recv_comp" : "rdma_get_send_comp");
                    }
                    got = ch.getCqEvent(CmExamples.EVENT_SLICE);
                }
                got.ackEvents(1);
            }
        }

        @Override
        public void close() {
            ackEvent();
            if (id.qp() != null) {
                id.destroyQp();
            }
            for (AutoCloseable c : new AutoCloseable[] {sendCq, recvCq, sendCh, recvCh}) {
                if (c != null) {
                    try {
                        c.close();
                    } catch (Exception e) {
                        err.println(name + ": cleanup: " + e.getMessage());
                    }
                }
            }
            if (ownsPd) {
                pd.close();
            }
            id.close();
            channel.close();
        }
    }

    /** rdma_create_ep: a passive ID bound to the address, or an active one resolved and with its QP. */
    private SyncId createEp(SocketAddress src, SocketAddress dst, QpInitAttributes attr) {
        CmEventChannel ch = cm.createEventChannel();
        CmId id;
        try {
            id = ch.createId(PortSpace.TCP);
        } catch (VerbsException e) {
            ch.close();
            throw e;
        }
        SyncId s = new SyncId(ch, id);
        try {
            if (dst == null) {
                id.bindAddr(src);
                s.initAttr = attr; // QPs of its requests are made with these
            } else {
                id.resolveAddr(src, dst, Duration.ofMillis(2000));
                s.complete("rdma_resolve_addr");
                id.resolveRoute(Duration.ofMillis(2000));
                s.complete("rdma_resolve_route");
                s.createQp(attr);
            }
            return s;
        } catch (RuntimeException e) {
            try {
                s.close();
            } catch (RuntimeException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
    }

    /** rdma_get_request: the next CONNECT_REQUEST; the new ID gets its own channel and a QP made as the listener's. */
    private SyncId getRequest(SyncId listen) {
        CmEvent got;
        while ((got = listen.channel.getEvent(CmExamples.EVENT_SLICE)) == null) {
            if (stop.stopped()) {
                throw interrupted("rdma_get_request");
            }
        }
        try (CmEvent e = got) {
            if (e.type() != CmEventType.CONNECT_REQUEST) {
                throw new VerbsException(Errno.EINVAL, "rdma_get_request: got " + e);
            }
            CmEventChannel ch = cm.createEventChannel();
            e.id().migrate(ch);
            SyncId s = new SyncId(ch, e.id());
            try {
                if (listen.initAttr != null) {
                    s.createQp(listen.initAttr);
                }
            } catch (RuntimeException ex) {
                s.close();
                throw ex;
            }
            return s;
        }
    }

    private static QpInitAttributes epAttr() {
        // max_send_wr = max_recv_wr = 1, one SGE each, 16 inline bytes, every send signaled
        return new QpInitAttributes().type(QpType.RC).sqSigAll(true).cap(new QpCapabilities(1, 1, 1, 1, MSG));
    }

    // ------------------------------------------------------------------ rdma_server.c / rdma_client.c

    private int runServer(Arena arena) {
        SocketAddress src;
        try {
            src = CmExamples.rdmaAddr(server, null, port, PortSpace.TCP, false)[0];
        } catch (CmExamples.GaiException e) {
            out.printf("rdma_getaddrinfo: %s\n", e.getMessage());
            return -2;
        }
        SyncId listen;
        try {
            listen = createEp(src, null, epAttr());
        } catch (VerbsException e) {
            CmExamples.perror(err, "rdma_create_ep", e);
            return -1;
        }
        try (listen) {
            try {
                listen.id.listen(0);
            } catch (VerbsException e) {
                CmExamples.perror(err, "rdma_listen", e);
                return -1;
            }
            SyncId id;
            try {
                id = getRequest(listen);
            } catch (VerbsException e) {
                CmExamples.perror(err, "rdma_get_request", e);
                return -1;
            }
            try (id) {
                return serve(arena, id);
            }
        }
    }

    /**
     * The 16-byte messages of both examples: inline sends when the QP allows 16 inline bytes (else the
     * example's "doesn't support IBV_SEND_INLINE" line and a registered send buffer), {@code rdma_reg_msgs} of
     * the receive buffer, and the one receive posted before connecting or accepting.
     */
    private final class Msgs implements AutoCloseable {
        final QueuePair qp;
        final MemorySegment sendMsg;
        final MemoryRegion mr;
        final MemoryRegion sendMr;
        final int sendFlags;

        Msgs(Arena arena, SyncId id) {
            qp = id.id.qp();
            boolean inline = qp.cap().maxInlineData() >= MSG;
            if (!inline) {
                out.println(name + ": device doesn't support IBV_SEND_INLINE, using sge sends");
            }
            sendFlags = inline ? SendFlags.INLINE : 0;
            MemorySegment recvMsg = arena.allocate(MSG, 8);
            sendMsg = arena.allocate(MSG, 8);
            mr = id.pd.regMr(recvMsg, AccessFlag.of(AccessFlag.LOCAL_WRITE));
            sendMr = inline ? null : id.pd.regMr(sendMsg, AccessFlag.of(AccessFlag.LOCAL_WRITE));
        }

        boolean postRecv() {
            RecvWorkRequest rwr = new RecvWorkRequest().singleSge(mr.address(), MSG, mr.lkey());
            if (!qp.postRecv(rwr)) {
                err.println("rdma_post_recv: " + rwr.postError().message());
                return false;
            }
            return true;
        }

        /** rdma_post_send, then rdma_get_send_comp (first = the send) or the receive first (last = the send). */
        int exchange(SyncId id, boolean sendFirst) {
            WorkCompletion wc = new WorkCompletion();
            String call = "rdma_get_recv_comp";
            try {
                if (!sendFirst) {
                    id.getComp(true, wc);
                }
                if (postSend(qp, sendMsg, sendMr, sendFlags, "rdma_post_send") != 0) {
                    return -1;
                }
                call = "rdma_get_send_comp";
                id.getComp(false, wc);
                if (sendFirst) {
                    call = "rdma_get_recv_comp";
                    id.getComp(true, wc);
                }
                return 0;
            } catch (VerbsException e) {
                CmExamples.perror(err, call, e);
                return -1;
            }
        }

        @Override
        public void close() {
            if (sendMr != null) {
                sendMr.close();
            }
            mr.close();
        }
    }

    private int serve(Arena arena, SyncId id) {
        try (Msgs m = new Msgs(arena, id)) {
            if (!m.postRecv()) {
                return -1;
            }
            try {
                id.id.accept(null);
                id.complete("rdma_accept");
            } catch (VerbsException e) {
                CmExamples.perror(err, "rdma_accept", e);
                return -1;
            }
            int ret = m.exchange(id, false);
            disconnect(id);
            return ret;
        }
    }

    private int postSend(QueuePair qp, MemorySegment msg, MemoryRegion mr, int flags, String call) {
        SendWorkRequest wr = new SendWorkRequest().opcode(WrOpcode.SEND).sendFlags(flags);
        if (mr == null) {
            wr.numSge(1).sge(0).inline(msg); // rdma_post_send with a NULL MR: inline, no L_Key
        } else {
            wr.singleSge(msg.address(), MSG, mr.lkey());
        }
        if (!qp.postSend(wr)) {
            err.println(call + ": " + wr.postError().message());
            err.println("\t(" + wr.postErrorMessage() + ")");
            return -1;
        }
        return 0;
    }

    /**
     * rdma_disconnect on a synchronous ID: sends the DREQ (or the DREP), then waits for the ID's next event
     * (DISCONNECTED: the peer's DREP or DREQ). The examples ignore the result.
     */
    private void disconnect(SyncId id) {
        try {
            id.id.disconnect();
            id.complete("rdma_disconnect");
        } catch (VerbsException e) {
            // the examples ignore rdma_disconnect's result
        }
    }

    private int runClient(Arena arena) {
        SocketAddress[] a;
        try {
            a = CmExamples.rdmaAddr(null, server, port, PortSpace.TCP, false);
        } catch (CmExamples.GaiException e) {
            out.printf("rdma_getaddrinfo: %s\n", e.getMessage());
            return -2;
        }
        SyncId id;
        try {
            id = createEp(a[0], a[1], epAttr());
        } catch (VerbsException e) {
            CmExamples.perror(err, "rdma_create_ep", e);
            return -1;
        }
        try (id; Msgs m = new Msgs(arena, id)) {
            if (!m.postRecv()) {
                return -1;
            }
            try {
                id.id.connect(null);
                id.complete("rdma_connect");
            } catch (VerbsException e) {
                CmExamples.perror(err, "rdma_connect", e);
                return -1;
            }
            int ret = m.exchange(id, true);
            disconnect(id);
            return ret;
        }
    }
}
