// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.Semaphore;

import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * {@code rdma4j rping}: rdma-core's rping (librdmacm/examples/rping.c) with its flags, its 16-byte
 * {@code {be64 buf, be32 rkey, be32 size}} exchange and its output, over the CM API, so it pairs with
 * Linux's rping in either role. Per ping: the client SENDs its start buffer's address; the server RDMA READs
 * it, SENDs a go-ahead; the client SENDs its sink buffer's address; the server RDMA WRITEs the data back and
 * SENDs a go-ahead; the client compares ({@code -V}) and prints ({@code -v}).
 *
 * <p>This class holds the options, the CM event thread and the server's and client's test loops; a connection's
 * resources and its CQ thread are its control block, {@code RpingCb}.
 */
public final class Rping {
    /** rping's states ({@code enum test_state}), with its numbers: they appear in its error messages. */
    enum State {
        IDLE(1), CONNECT_REQUEST(2), ADDR_RESOLVED(3), ROUTE_RESOLVED(4), CONNECTED(5), RDMA_READ_ADV(6),
        RDMA_READ_COMPLETE(7), RDMA_WRITE_ADV(8), RDMA_WRITE_COMPLETE(9), DISCONNECTED(10), ERROR(11);

        final int value;

        State(int value) {
            this.value = value;
        }
    }

    /** RPING_BUFSIZE. */
    static final int BUFSIZE = 64 * 1024;
    /** RPING_SQ_DEPTH. */
    static final int SQ_DEPTH = 16;
    /**
     * RPING_MIN_BUFSIZE, {@code sizeof(stringify(INT_MAX)) + sizeof(RPING_MSG_FMT)}: 23 as Debian's rping
     * builds it (seen in the VM: "valid range is 23 to 65536"; stringify gives "INT_MAX", 8 bytes).
     */
    static final int MIN_BUFSIZE = 8 + 15;

    private boolean server;
    private boolean serverSet;
    private InetAddress addr;
    private InetAddress source;
    private int port = 7174;
    private int count;
    int size = 64;
    private boolean verbose;
    private boolean validate;
    private boolean debug;
    private boolean persistent;
    boolean selfQp;
    private final PrintStream out;
    final PrintStream err;
    final StopSignal stop;
    private final RdmaCm cm;

    private Rping(RdmaCm cm, PrintStream out, PrintStream err, StopSignal stop) {
        this.cm = cm;
        this.out = out;
        this.err = err;
        this.stop = stop;
    }

    /**
     * Runs rping on the process's CM providers.
     *
     * @param args rping's arguments
     * @param out  standard output
     * @param err  standard error
     * @param stop stops a run
     * @return the exit status
     */
    public static int main(String[] args, PrintStream out, PrintStream err, StopSignal stop) {
        return main(args, RdmaCm.system(), out, err, stop);
    }

    /**
     * Runs rping on the given providers.
     *
     * @param args rping's arguments
     * @param cm   the CM providers
     * @param out  standard output
     * @param err  standard error
     * @param stop stops a run
     * @return the exit status
     */
    public static int main(String[] args, RdmaCm cm, PrintStream out, PrintStream err, StopSignal stop) {
        Rping r = new Rping(cm, out, err, stop);
        int rc = r.parse(args);
        if (rc != 0) {
            return rc;
        }
        return r.run();
    }

    void debug(String fmt, Object... a) {
        if (debug) {
            out.printf(fmt, a);
        }
    }

    private int parse(String[] args) {
        Getopt g = new Getopt(args, "a:I:Pp:C:S:t:scvVdq");
        int op;
        int ret = 0;
        addr = InetAddress.ofLiteral("0.0.0.0");
        while ((op = g.next()) != -1) {
            switch (op) {
                case 'a' -> {
                    InetAddress a = lookup(g.arg());
                    if (a == null) {
                        ret = 1;
                    } else {
                        addr = a;
                    }
                }
                case 'I' -> {
                    source = lookup(g.arg());
                    if (source == null) {
                        ret = 1;
                    }
                }
                case 'P' -> persistent = true;
                case 'p' -> {
                    port = atoi(g.arg());
                    debug("port %d\n", port);
                }
                case 's' -> {
                    server = true;
                    serverSet = true;
                    debug("server\n");
                }
                case 'c' -> {
                    server = false;
                    serverSet = true;
                    debug("client\n");
                }
                case 'S' -> {
                    size = atoi(g.arg());
                    if (size < MIN_BUFSIZE || size > BUFSIZE - 1) {
                        err.printf("Invalid size %d (valid range is %d to %d)\n", size, MIN_BUFSIZE, BUFSIZE);
                        ret = 22;
                    } else {
                        debug("size %d\n", size);
                    }
                }
                case 'C' -> {
                    count = atoi(g.arg());
                    if (count < 0) {
                        err.printf("Invalid count %d\n", count);
                        ret = 22;
                    } else {
                        debug("count %d\n", count);
                    }
                }
                case 'v' -> {
                    verbose = true;
                    debug("verbose\n");
                }
                case 'V' -> {
                    validate = true;
                    debug("validate data\n");
                }
                case 'd' -> debug = true;
                case 'q' -> selfQp = true;
                default -> {
                    usage();
                    return 22;
                }
            }
        }
        if (ret != 0) {
            return ret;
        }
        if (!serverSet) {
            usage();
            return 22;
        }
        return 0;
    }

    private InetAddress lookup(String host) {
        try {
            return InetAddress.getByName(host);
        } catch (UnknownHostException e) {
            out.printf("getaddrinfo failed (%s) - invalid hostname or IP address\n", "Name or service not known");
            return null;
        }
    }

    private static int atoi(String s) {
        int i = 0;
        int sign = 1;
        s = s.strip();
        if (!s.isEmpty() && (s.charAt(0) == '-' || s.charAt(0) == '+')) {
            sign = s.charAt(0) == '-' ? -1 : 1;
            s = s.substring(1);
        }
        long v = 0;
        while (i < s.length() && Character.isDigit(s.charAt(i)) && v < Integer.MAX_VALUE) {
            v = v * 10 + (s.charAt(i++) - '0');
        }
        return (int) (sign * Math.min(v, Integer.MAX_VALUE));
    }

    private void usage() {
        out.printf("%s -s [-vVd] [-S size] [-C count] [-a addr] [-p port]\n", "rping");
        out.printf("%s -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]\n", "rping");
        out.print("\t-c\t\tclient side\n");
        out.print("\t-I\t\tSource address to bind to for client.\n");
        out.print("\t-s\t\tserver side.  To bind to any address with IPv6 use -a ::0\n");
        out.print("\t-v\t\tdisplay ping data to stdout\n");
        out.print("\t-V\t\tvalidate ping data\n");
        out.print("\t-d\t\tdebug printfs\n");
        out.print("\t-S size \tping data size\n");
        out.print("\t-C count\tping count times\n");
        out.print("\t-a addr\t\taddress\n");
        out.print("\t-p port\t\tport\n");
        out.print("\t-P\t\tpersistent server mode allowing multiple connections\n");
        out.print("\t-q\t\tuse self-created, self-modified QP\n");
    }

    // ------------------------------------------------------------------ the CM thread (cm_thread + rping_cma_event_handler)

    private volatile RpingCb listenCb;
    private volatile RpingCb activeCb;
    private volatile int exitStatus;
    private volatile boolean cmStop;
    private final java.util.concurrent.ConcurrentHashMap<CmId, RpingCb> byId = new java.util.concurrent.ConcurrentHashMap<>();
    private final Semaphore acceptReady = new Semaphore(1);
    private volatile CmId childId;

    private void cmLoop(CmEventChannel ch) {
        while (!cmStop) {
            CmEvent e;
            try {
                e = ch.getEvent(Duration.ofMillis(100));
            } catch (VerbsException closed) {
                return;
            }
            if (e == null) {
                continue;
            }
            try {
                if (handle(e) != 0) {
                    exitStatus = 255; // rping exits from its CM thread with -1
                }
            } finally {
                e.ack();
            }
        }
    }

    private int handle(CmEvent e) {
        CmId id = e.id();
        RpingCb cb = byId.getOrDefault(id, activeCb);
        boolean parent = id == (server ? listenCb.id : activeCb.id);
        debug("cma_event type %s cma_id %s (%s)\n", e.type().rdmaName(), id, parent ? "parent" : "child");
        switch (e.type()) {
            case ADDR_RESOLVED -> {
                cb.state = State.ADDR_RESOLVED;
                try {
                    id.resolveRoute(Duration.ofMillis(2000));
                } catch (VerbsException ex) {
                    cb.state = State.ERROR;
                    err.println("rdma_resolve_route: " + ex.getMessage());
                    cb.sem.release();
                }
            }
            case ROUTE_RESOLVED -> {
                cb.state = State.ROUTE_RESOLVED;
                cb.sem.release();
            }
            case CONNECT_REQUEST -> {
                try {
                    acceptReady.acquire();
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    return -1;
                }
                listenCb.state = State.CONNECT_REQUEST;
                childId = id;
                debug("child cma %s\n", id);
                listenCb.sem.release();
            }
            case CONNECT_RESPONSE -> {
                debug("CONNECT_RESPONSE\n");
                cb.state = State.CONNECTED;
                cb.sem.release();
            }
            case ESTABLISHED -> {
                debug("ESTABLISHED\n");
                if (!cb.isServer) {
                    cb.state = State.CONNECTED;
                }
                cb.sem.release();
            }
            case ADDR_ERROR, ROUTE_ERROR, CONNECT_ERROR, UNREACHABLE, REJECTED -> {
                err.printf("cma event %s, error %d\n", e.type().rdmaName(), e.status());
                cb.sem.release();
                return -1;
            }
            case DISCONNECTED -> {
                err.printf("%s DISCONNECT EVENT...\n", cb.isServer ? "server" : "client");
                cb.state = State.DISCONNECTED;
                cb.sem.release();
            }
            case DEVICE_REMOVAL -> {
                err.print("cma detected device removal!!!!\n");
                cb.state = State.ERROR;
                cb.sem.release();
                return -1;
            }
            default -> err.printf("unhandled event: %s, ignoring\n", e.type().rdmaName());
        }
        return 0;
    }

    // ------------------------------------------------------------------ main

    private int run() {
        CmEventChannel ch;
        CmId id;
        try {
            ch = cm.createEventChannel();
            id = ch.createId(PortSpace.TCP);
        } catch (VerbsException e) {
            err.println("rdma_create_id: " + e.getMessage());
            return 1;
        }
        RpingCb cb = new RpingCb(this, server, id);
        if (server) {
            listenCb = cb;
        } else {
            activeCb = cb;
        }
        byId.put(id, cb);
        Thread cmThread = Thread.ofPlatform().daemon().name("rping-cm").start(() -> cmLoop(ch));
        int ret;
        try {
            if (server) {
                ret = persistent ? runPersistentServer(cb) : runServer(cb);
            } else {
                ret = runClient(cb);
            }
        } catch (VerbsException e) {
            err.println(e.getMessage());
            ret = 1;
        } finally {
            cmStop = true;
            try {
                cmThread.join(2_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            drainAndClose(ch, id);
        }
        return exitStatus != 0 ? exitStatus : ret == 0 ? 0 : 1;
    }

    private void drainAndClose(CmEventChannel ch, CmId id) {
        for (CmEvent e; (e = ch.pollEvent()) != null; ) {
            e.ack();
        }
        for (CmId c : byId.keySet()) {
            try {
                c.close();
            } catch (VerbsException ignored) {
                // best effort at exit
            }
        }
        try {
            id.close();
            ch.close();
        } catch (VerbsException e) {
            err.println("rdma_destroy_event_channel: " + e.getMessage());
        }
    }

    private InetSocketAddress sockaddr(InetAddress a) {
        return new InetSocketAddress(a, port);
    }

    private int bindServer(RpingCb cb) {
        try {
            cb.id.bindAddr(sockaddr(addr));
        } catch (VerbsException e) {
            err.println("rdma_bind_addr: " + e.getMessage());
            return -1;
        }
        debug("rdma_bind_addr successful\n");
        debug("rdma_listen\n");
        cb.id.listen(3);
        return 0;
    }

    private int runServer(RpingCb listen) {
        if (bindServer(listen) != 0) {
            return -1;
        }
        if (!listen.waitSem() || listen.state != State.CONNECT_REQUEST) {
            err.printf("wait for CONNECT_REQUEST state %d\n", listen.state.value);
            return -1;
        }
        RpingCb cb = new RpingCb(this, true, childId);
        byId.put(childId, cb);
        try (cb) {
            return serveOne(cb);
        }
    }

    private int serveOne(RpingCb cb) {
        cb.setupQp();
        cb.setupBuffers();
        if (!cb.postRecv()) {
            err.printf("ibv_post_recv failed: %d\n", 12);
            return -1;
        }
        cb.startCq();
        if (accept(cb) != 0) {
            err.printf("connect error %d\n", -1);
            return -1;
        }
        int ret = testServer(cb);
        if (ret != 0) {
            err.printf("rping server failed: %d\n", ret);
        }
        cb.disconnect();
        return ret;
    }

    private int runPersistentServer(RpingCb listen) {
        if (bindServer(listen) != 0) {
            return -1;
        }
        while (!stop.stopped()) {
            if (!listen.waitSem()) {
                return 0;
            }
            if (listen.state != State.CONNECT_REQUEST) {
                err.printf("wait for CONNECT_REQUEST state %d\n", listen.state.value);
                return -1;
            }
            RpingCb cb = new RpingCb(this, true, childId);
            byId.put(childId, cb);
            acceptReady.release();
            Thread.ofPlatform().daemon().name("rping-server").start(() -> {
                try (cb) {
                    serveOne(cb);
                } catch (VerbsException e) {
                    err.println(e.getMessage());
                } finally {
                    byId.remove(cb.id);
                    try {
                        cb.id.close();
                    } catch (VerbsException ignored) {
                        // events still unacknowledged: closed at exit
                    }
                }
            });
        }
        return 0;
    }

    private int accept(RpingCb cb) {
        debug("accepting client connection request\n");
        try {
            if (selfQp) {
                selfModify(cb);
                cb.id.accept(rpingParam(cb));
            } else {
                cb.id.accept(null);
            }
        } catch (VerbsException e) {
            err.println("rdma_accept: " + e.getMessage());
            return -1;
        }
        if (!cb.waitSem() || cb.state == State.ERROR) {
            err.printf("wait for CONNECTED state %d\n", cb.state.value);
            return -1;
        }
        return 0;
    }

    /**
     * rping_init_conn_param: responder resources and initiator depth 1, retry 7 AND RNR retry 7, the QPN with
     * {@code -q}; rdma-core's rping.c has set both retries since "rping: Add option to create QP independently"
     * (5f8867851, in every release since v24, so in the v44.0 of the VM's rdma-core 44). The client connects with
     * it; the server accepts with it under {@code -q} and with NULL (librdmacm's defaults) otherwise.
     */
    private ConnParam rpingParam(RpingCb cb) {
        ConnParam p = new ConnParam().responderResources(1).initiatorDepth(1).retryCount(7).rnrRetryCount(7);
        if (selfQp) {
            p.qpNum(cb.qp.qpNum());
        }
        return p;
    }

    private static void selfModify(RpingCb cb) {
        cb.qp.modify(cb.id.initQpAttr(QpState.INIT));
        cb.qp.modify(cb.id.initQpAttr(QpState.RTR));
        cb.qp.modify(cb.id.initQpAttr(QpState.RTS));
    }

    private int testServer(RpingCb cb) {
        int ret = 0;
        while (true) {
            if (!cb.waitSem() || cb.state != State.RDMA_READ_ADV) {
                err.printf("wait for RDMA_READ_ADV state %d\n", cb.state.value);
                ret = -1;
                break;
            }
            debug("server received sink adv\n");
            if (!cb.qp.postSend(new SendWorkRequest().opcode(WrOpcode.RDMA_READ).sendFlags(SendFlags.SIGNALED)
                    .singleSge(cb.rdmaMr.address(), cb.remoteLen, cb.rdmaMr.lkey())
                    .remoteAddr(cb.remoteAddr).rkey(cb.remoteRkey))) {
                err.printf("post send error %d\n", 22);
                ret = -1;
                break;
            }
            debug("server posted rdma read req \n");
            if (!cb.waitSem() || cb.state != State.RDMA_READ_COMPLETE) {
                err.printf("wait for RDMA_READ_COMPLETE state %d\n", cb.state.value);
                ret = -1;
                break;
            }
            debug("server received read complete\n");
            if (verbose) {
                out.printf("server ping data: %s\n", cString(cb.rdmaMr.segment()));
            }
            if (!cb.postSendInfo()) {
                err.printf("post send error %d\n", 22);
                ret = -1;
                break;
            }
            debug("server posted go ahead\n");
            if (!cb.waitSem() || cb.state != State.RDMA_WRITE_ADV) {
                err.printf("wait for RDMA_WRITE_ADV state %d\n", cb.state.value);
                ret = -1;
                break;
            }
            debug("server received sink adv\n");
            int len = cString(cb.rdmaMr.segment()).length() + 1;
            debug("rdma write from lkey %x laddr %x len %d\n", cb.rdmaMr.lkey(), cb.rdmaMr.address(), len);
            if (!cb.qp.postSend(new SendWorkRequest().opcode(WrOpcode.RDMA_WRITE).sendFlags(SendFlags.SIGNALED)
                    .singleSge(cb.rdmaMr.address(), len, cb.rdmaMr.lkey()).remoteAddr(cb.remoteAddr).rkey(cb.remoteRkey))) {
                err.printf("post send error %d\n", 22);
                ret = -1;
                break;
            }
            if (!cb.waitSem() || cb.state != State.RDMA_WRITE_COMPLETE) {
                err.printf("wait for RDMA_WRITE_COMPLETE state %d\n", cb.state.value);
                ret = -1;
                break;
            }
            debug("server rdma write complete \n");
            if (!cb.postSendInfo()) {
                err.printf("post send error %d\n", 22);
                ret = -1;
                break;
            }
            debug("server posted go ahead\n");
        }
        return cb.state == State.DISCONNECTED ? 0 : ret;
    }

    private static String cString(MemorySegment s) {
        long n = 0;
        while (n < s.byteSize() && s.get(ValueLayout.JAVA_BYTE, n) != 0) {
            n++;
        }
        return new String(s.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.ISO_8859_1);
    }

    private int runClient(RpingCb cb) {
        try {
            cb.id.resolveAddr(source == null ? null : new InetSocketAddress(source, 0), sockaddr(addr),
                    Duration.ofMillis(2000));
        } catch (VerbsException e) {
            err.println("rdma_resolve_addr: " + e.getMessage());
            return -1;
        }
        if (!cb.waitSem() || cb.state != State.ROUTE_RESOLVED) {
            err.printf("waiting for addr/route resolution state %d\n", cb.state.value);
            return -1;
        }
        debug("rdma_resolve_addr - rdma_resolve_route successful\n");
        try (cb) {
            cb.setupQp();
            cb.setupBuffers();
            if (!cb.postRecv()) {
                err.printf("ibv_post_recv failed: %d\n", 12);
                return -1;
            }
            cb.startCq();
            if (connectClient(cb) != 0) {
                err.printf("connect error %d\n", -1);
                return -1;
            }
            int ret = testClient(cb);
            if (ret != 0) {
                err.printf("rping client failed: %d\n", ret);
            }
            cb.disconnect();
            return ret;
        }
    }

    private int connectClient(RpingCb cb) {
        try {
            cb.id.connect(rpingParam(cb));
        } catch (VerbsException e) {
            err.println("rdma_connect: " + e.getMessage());
            return -1;
        }
        if (!cb.waitSem() || cb.state != State.CONNECTED) {
            err.printf("wait for CONNECTED state %d\n", cb.state.value);
            return -1;
        }
        if (selfQp) {
            try {
                selfModify(cb);
                cb.id.establish();
            } catch (VerbsException e) {
                err.println("rdma_establish: " + e.getMessage());
                return -1;
            }
        }
        debug("rdma_connect successful\n");
        return 0;
    }

    private int testClient(RpingCb cb) {
        int ret = 0;
        int start = 65;
        MemorySegment sb = cb.startMr.segment();
        MemorySegment rb = cb.rdmaMr.segment();
        for (int ping = 0; count == 0 || ping < count; ping++) {
            if (stop.stopped()) {
                break;
            }
            cb.state = State.RDMA_READ_ADV;
            byte[] head = ("rdma-ping-" + ping + ": ").getBytes(StandardCharsets.ISO_8859_1);
            int cc = Math.min(head.length, size - 1);
            MemorySegment.copy(head, 0, sb, ValueLayout.JAVA_BYTE, 0, cc);
            int c = start;
            for (int i = cc; i < size; i++) {
                sb.set(ValueLayout.JAVA_BYTE, i, (byte) c);
                c++;
                if (c > 122) {
                    c = 65;
                }
            }
            start++;
            if (start > 122) {
                start = 65;
            }
            sb.set(ValueLayout.JAVA_BYTE, size - 1, (byte) 0);
            cb.formatSend(cb.startMr);
            if (!cb.postSendInfo()) {
                err.printf("post send error %d\n", 22);
                ret = -1;
                break;
            }
            if (!cb.waitSem() || cb.state != State.RDMA_WRITE_ADV) {
                err.printf("wait for RDMA_WRITE_ADV state %d\n", cb.state.value);
                ret = -1;
                break;
            }
            cb.formatSend(cb.rdmaMr);
            if (!cb.postSendInfo()) {
                err.printf("post send error %d\n", 22);
                ret = -1;
                break;
            }
            if (!cb.waitSem() || cb.state != State.RDMA_WRITE_COMPLETE) {
                err.printf("wait for RDMA_WRITE_COMPLETE state %d\n", cb.state.value);
                ret = -1;
                break;
            }
            if (validate && MemorySegment.mismatch(sb, 0, size, rb, 0, size) != -1) {
                err.print("data mismatch!\n");
                ret = -1;
                break;
            }
            if (verbose) {
                out.printf("ping data: %s\n", cString(rb));
            }
        }
        return cb.state == State.DISCONNECTED ? 0 : ret;
    }

}

