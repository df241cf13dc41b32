// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.SocketAddress;
import java.time.Duration;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.CmOption;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * {@code rdma4j ucmatose}: rdma-core's {@code ucmatose} ({@code librdmacm/examples/cmatose.c}) over the CM
 * API, with its flags, its lines and its exit status. A server accepts {@code -c} RC connections, sends
 * {@code -C} messages of {@code -S} bytes on each, receives as many, and disconnects; a client connects
 * {@code -c} times, receives, replies, and answers the disconnects. Each connection has its own PD, two CQs
 * and a QP created through the CM ID; the client asks for 1 responder resource and initiator depth and a
 * retry count of 5, the server accepts with the defaults (librdmacm's NULL parameters).
 */
public final class Ucmatose extends CmExamples.Tool {
    private static final int EINTR = CmExamples.EINTR;

    private int connections = 1;
    private int messageSize = 100;
    private int messageCount = 10;
    private String port = "7471";
    private boolean setTos;
    private int tos;
    private boolean migrate;
    private String dstAddr;
    private String srcAddr;
    private boolean ibFamily;
    private PortSpace portSpace = PortSpace.TCP;
    private boolean setTimeout;
    private int timeout;

    private CmEventChannel channel;
    private Node[] nodes;
    private int connIndex;
    private int connectsLeft;
    private int disconnectsLeft;
    private SocketAddress srcSockaddr;
    private SocketAddress dstSockaddr;

    /** One connection ({@code struct cmatest_node}). */
    private static final class Node {
        final int id;
        CmId cmaId;
        boolean connected;
        ProtectionDomain pd;
        CompletionQueue sendCq;
        CompletionQueue recvCq;
        Arena arena;
        MemoryRegion mr;

        Node(int id) {
            this.id = id;
        }
    }

    private Ucmatose(RdmaCm cm, PrintStream out, PrintStream err, StopSignal stop) {
        super("cmatose", cm, out, err, stop);
    }

    /**
     * Runs ucmatose on the process's CM providers.
     *
     * @param args its arguments
     * @param out  standard output
     * @param err  standard error
     * @param stop stops a run (Ctrl-C)
     * @return the exit status (ucmatose returns its {@code ret}: 0, a negative errno, or an event status)
     */
    public static int main(String[] args, PrintStream out, PrintStream err, StopSignal stop) {
        return main(args, RdmaCm.system(), out, err, stop);
    }

    /**
     * Runs ucmatose on the given CM providers.
     *
     * @param args its arguments
     * @param cm   the providers
     * @param out  standard output
     * @param err  standard error
     * @param stop stops a run
     * @return the exit status
     */
    public static int main(String[] args, RdmaCm cm, PrintStream out, PrintStream err, StopSignal stop) {
        return new Ucmatose(cm, out, err, stop).exec(args);
    }

    @Override
    boolean parse(String[] args) {
        Getopt g = new Getopt(args, "s:b:f:P:c:C:S:t:p:a:m");
        int op;
        while ((op = g.next()) != -1) {
            switch (op) {
                case 's' -> dstAddr = g.arg();
                case 'b' -> srcAddr = g.arg();
                case 'f' -> ibFamily = addressFormat(g.arg(), ibFamily);
                case 'P' -> {
                    String f = g.arg().toLowerCase(java.util.Locale.ROOT);
                    if (f.startsWith("ib")) {
                        portSpace = PortSpace.IB;
                    } else if (!f.startsWith("tcp")) {
                        err.println("Warning: unknown port space format");
                    }
                }
                case 'c' -> connections = CmExamples.atoi(g.arg());
                case 'C' -> messageCount = CmExamples.atoi(g.arg());
                case 'S' -> messageSize = CmExamples.atoi(g.arg());
                case 't' -> {
                    setTos = true;
                    tos = (int) (CmExamples.strtoul0(g.arg()) & 0xFF);
                }
                case 'p' -> port = g.arg();
                case 'm' -> migrate = true;
                case 'a' -> {
                    setTimeout = true;
                    timeout = (int) (CmExamples.strtoul0(g.arg()) & 0xFF);
                }
                default -> {
                    usage();
                    return false;
                }
            }
        }
        return true;
    }

    private void usage() {
        out.println("usage: ucmatose");
        out.println("\t[-s server_address]");
        out.println("\t[-b bind_address]");
        out.println("\t[-f address_format]");
        out.println("\t    name, ip, ipv6, or gid");
        out.println("\t[-P port_space]");
        out.println("\t    tcp or ib");
        out.println("\t[-c connections]");
        out.println("\t[-C message_count]");
        out.println("\t[-S message_size]");
        out.println("\t[-t type_of_service]");
        out.println("\t[-p port_number]");
        out.println("\t[-m(igrate)]");
        out.println("\t[-a ack_timeout]");
    }

    @Override
    int run() {
        if (connections < 0) {
            connections = 0;
        }
        connectsLeft = connections;
        try {
            channel = cm.createEventChannel();
        } catch (VerbsException e) {
            CmExamples.perror(err, "failed to create RDMA CM event channel", e);
            return 1;
        }
        if (!allocNodes()) {
            return 1;
        }
        int ret;
        try {
            ret = dstAddr != null ? runClient() : runServer();
        } catch (VerbsException e) {
            CmExamples.perror(err, "cmatose", e);
            ret = CmExamples.negErrno(e);
        }
        out.println("test complete");
        destroyNodes();
        try {
            channel.close();
        } catch (VerbsException e) {
            CmExamples.perror(err, "cmatose: rdma_destroy_event_channel", e);
        }
        out.printf("return status %d\n", ret);
        return ret;
    }

    // ------------------------------------------------------------------ nodes

    private boolean allocNodes() {
        nodes = new Node[connections];
        for (int i = 0; i < connections; i++) {
            nodes[i] = new Node(i);
            if (dstAddr != null) {
                try {
                    nodes[i].cmaId = channel.createId(portSpace);
                    nodes[i].cmaId.attach(nodes[i]);
                } catch (VerbsException e) {
                    CmExamples.perror(err, "cmatose: rdma_create_id", e);
                    for (int j = 0; j < i; j++) {
                        nodes[j].cmaId.close();
                    }
                    return false;
                }
            }
        }
        return true;
    }

    private int initNode(Node node) {
        try {
            node.pd = node.cmaId.context().allocPd();
        } catch (VerbsException e) {
            out.println("cmatose: unable to allocate PD");
            return -Errno.ENOMEM.value();
        }
        int cqe = messageCount != 0 ? messageCount : 1;
        try {
            node.sendCq = node.cmaId.context().createCq(cqe, null, 0);
            node.recvCq = node.cmaId.context().createCq(cqe, null, 0);
        } catch (VerbsException e) {
            out.println("cmatose: unable to create CQ");
            return -Errno.ENOMEM.value();
        }
        QpInitAttributes init = new QpInitAttributes().type(QpType.RC).sendCq(node.sendCq).recvCq(node.recvCq)
                .sqSigAll(true).cap(new QpCapabilities(cqe, cqe, 1, 1, 0));
        try {
            node.cmaId.createQp(node.pd, init);
        } catch (VerbsException e) {
            CmExamples.perror(err, "cmatose: unable to create QP", e);
            return CmExamples.negErrno(e);
        }
        return createMessage(node);
    }

    private int createMessage(Node node) {
        if (messageSize == 0) {
            messageCount = 0;
        }
        if (messageCount == 0) {
            return 0;
        }
        node.arena = Arena.ofShared();
        MemorySegment mem;
        try {
            mem = node.arena.allocate(messageSize, 8);
        } catch (RuntimeException | OutOfMemoryError e) {
            out.println("failed message allocation");
            return -1;
        }
        try {
            node.mr = node.pd.regMr(mem, AccessFlag.of(AccessFlag.LOCAL_WRITE));
        } catch (VerbsException e) {
            out.println("failed to reg MR");
            return -1;
        }
        return 0;
    }

    private int postRecvs(Node node) {
        if (messageCount == 0) {
            return 0;
        }
        RecvWorkRequest wr = new RecvWorkRequest().wrId(node.id).singleSge(node.mr.address(), messageSize, node.mr.lkey());
        for (int i = 0; i < messageCount; i++) {
            if (!node.cmaId.qp().postRecv(wr)) {
                int e = wr.postError() == null ? Errno.ENOMEM.value() : wr.postError().value();
                out.printf("failed to post receives: %d\n", e);
                return e;
            }
        }
        return 0;
    }

    private int postSends(Node node) {
        if (!node.connected || messageCount == 0) {
            return 0;
        }
        SendWorkRequest wr = new SendWorkRequest().opcode(WrOpcode.SEND).sendFlags(0).wrId(node.id)
                .singleSge(node.mr.address(), messageSize, node.mr.lkey());
        for (int i = 0; i < messageCount; i++) {
            if (!node.cmaId.qp().postSend(wr)) {
                int e = wr.postError() == null ? Errno.ENOMEM.value() : wr.postError().value();
                out.printf("failed to post sends: %d\n", e);
                return e;
            }
        }
        return 0;
    }

    private void destroyNode(Node node) {
        if (node.cmaId != null) {
            // destroy the RDMA ID after all device resources
            destroy(node.cmaId, node.sendCq, node.recvCq, node.mr, node.pd, node.arena);
        }
    }

    private void destroyNodes() {
        for (Node n : nodes) {
            destroyNode(n);
        }
    }

    // ------------------------------------------------------------------ events

    private void connectError() {
        connectsLeft--;
    }

    private int addrHandler(Node node) {
        if (setTos) {
            try {
                node.cmaId.setOption(CmOption.TOS, tos);
            } catch (VerbsException e) {
                CmExamples.perror(err, "cmatose: set TOS option failed", e);
            }
        }
        if (setTimeout) {
            try {
                node.cmaId.setOption(CmOption.ACK_TIMEOUT, timeout);
            } catch (VerbsException e) {
                CmExamples.perror(err, "cmatose: set ack timeout option failed", e);
            }
        }
        try {
            node.cmaId.resolveRoute(Duration.ofMillis(2000));
        } catch (VerbsException e) {
            CmExamples.perror(err, "cmatose: resolve route failed", e);
            connectError();
            return CmExamples.negErrno(e);
        }
        return 0;
    }

    private int routeHandler(Node node) {
        int ret = initNode(node);
        if (ret == 0) {
            ret = postRecvs(node);
        }
        if (ret == 0) {
            ConnParam p = new ConnParam().responderResources(1).initiatorDepth(1).retryCount(5);
            try {
                node.cmaId.connect(p);
            } catch (VerbsException e) {
                CmExamples.perror(err, "cmatose: failure connecting", e);
                ret = CmExamples.negErrno(e);
            }
        }
        if (ret != 0) {
            connectError();
        }
        return ret;
    }

    private int connectHandler(CmId cmaId) {
        int ret;
        if (connIndex == connections) {
            ret = -Errno.ENOMEM.value();
            rejected(cmaId);
        } else {
            Node node = nodes[connIndex++];
            node.cmaId = cmaId;
            cmaId.attach(node);
            ret = initNode(node);
            if (ret == 0 && setTimeout) {
                try {
                    cmaId.setOption(CmOption.ACK_TIMEOUT, timeout);
                } catch (VerbsException e) {
                    CmExamples.perror(err, "cmatose: set ack timeout option failed", e);
                }
            }
            if (ret == 0) {
                ret = postRecvs(node);
            }
            if (ret == 0) {
                try {
                    cmaId.accept(null);
                    return 0;
                } catch (VerbsException e) {
                    CmExamples.perror(err, "cmatose: failure accepting", e);
                    ret = CmExamples.negErrno(e);
                }
            }
            // the node's resources stay for destroyNodes; the ID is the event's, closed by the reject path
            releaseUnaccepted(node);
            connectError();
        }
        out.println("cmatose: failing connection request");
        try {
            cmaId.reject(null);
        } catch (VerbsException e) {
            CmExamples.perror(err, "cmatose: rdma_reject", e);
        }
        return ret;
    }

    /** A request that could not be accepted: its resources go, its ID is closed after its event. */
    private void releaseUnaccepted(Node node) {
        CmId id = node.cmaId;
        node.cmaId = null; // as cmatose: the node forgets the ID
        if (id.qp() != null) {
            id.destroyQp();
        }
        quiet(node.sendCq, node.recvCq, node.mr, node.pd, node.arena);
        node.sendCq = node.recvCq = null;
        node.mr = null;
        node.pd = null;
        node.arena = null;
        rejected(id);
    }

    private int cmaHandler(CmEvent event) {
        CmId id = event.id();
        Node node = id.attachment() instanceof Node n ? n : null;
        return switch (event.type()) {
            case ADDR_RESOLVED -> addrHandler(node);
            case ROUTE_RESOLVED -> routeHandler(node);
            case CONNECT_REQUEST -> connectHandler(id);
            case ESTABLISHED -> {
                if (node != null) {
                    node.connected = true;
                }
                connectsLeft--;
                disconnectsLeft++;
                yield 0;
            }
            case ADDR_ERROR, ROUTE_ERROR, CONNECT_ERROR, UNREACHABLE, REJECTED -> {
                out.printf("cmatose: event: %s, error: %d\n", event.type().rdmaName(), event.status());
                if (event.detail() != null) {
                    err.println("\t(" + event.detail() + ")");
                }
                connectError();
                yield event.status();
            }
            case DISCONNECTED -> {
                try {
                    id.disconnect();
                } catch (VerbsException e) {
                    // rdma_disconnect's return is ignored by cmatose
                }
                disconnectsLeft--;
                yield 0;
            }
            default -> 0; // DEVICE_REMOVAL: cleanup will occur after the test completes
        };
    }

    /**
     * connect_events / disconnect_events: handle events while {@code left} says so.
     *
     * @param connect which counter to watch
     * @return 0, or the first handler's non-zero result
     */
    private int events(boolean connect, String phase) {
        int ret = 0;
        while ((connect ? connectsLeft : disconnectsLeft) > 0 && ret == 0) {
            CmEvent e = CmExamples.getEvent(channel, stop);
            if (e == null) {
                err.println("cmatose: failure in rdma_get_cm_event in " + phase + ": Interrupted system call (Ctrl-C)");
                return -EINTR;
            }
            try {
                ret = cmaHandler(e);
            } finally {
                e.ack();
            }
            closeRejected();
        }
        return ret;
    }

    private int pollCqs(boolean recv) {
        for (Node n : nodes) {
            if (!n.connected) {
                continue;
            }
            int ret = CmExamples.pollUntil(recv ? n.recvCq : n.sendCq, messageCount, stop, null);
            if (ret != 0) {
                out.printf("cmatose: failed polling CQ: %d\n", ret);
                if (ret == -Errno.ETIMEDOUT.value()) {
                    err.printf("\t(connection %d: no %s completion for %d s)\n", n.id, recv ? "receive" : "send",
                            CmExamples.STALL_NS / 1_000_000_000L);
                }
                return ret;
            }
        }
        return 0;
    }

    private int migrateChannel(CmId listenId) {
        out.println("migrating to new event channel");
        CmEventChannel ch;
        try {
            ch = cm.createEventChannel();
        } catch (VerbsException e) {
            CmExamples.perror(err, "cmatose: failed to create event channel", e);
            return -1;
        }
        try {
            if (listenId != null) {
                listenId.migrate(ch);
            }
            for (Node n : nodes) {
                if (n.cmaId != null) {
                    n.cmaId.migrate(ch);
                }
            }
        } catch (VerbsException e) {
            CmExamples.perror(err, "cmatose: failure migrating to channel", e);
            return CmExamples.negErrno(e);
        }
        channel.close();
        channel = ch;
        return 0;
    }

    // ------------------------------------------------------------------ server and client

    private int runServer() {
        out.println("cmatose: starting server");
        CmId listenId;
        try {
            listenId = channel.createId(portSpace);
        } catch (VerbsException e) {
            CmExamples.perror(err, "cmatose: listen request failed", e);
            return CmExamples.negErrno(e);
        }
        int ret;
        try {
            ret = serve(listenId);
        } finally {
            try {
                listenId.close();
            } catch (VerbsException e) {
                CmExamples.perror(err, "cmatose: rdma_destroy_id", e);
            }
        }
        return ret;
    }

    private int serve(CmId listenId) {
        try {
            srcSockaddr = CmExamples.rdmaAddr(srcAddr, null, port, portSpace, ibFamily)[0];
        } catch (CmExamples.GaiException e) {
            out.printf("cmatose: getrdmaaddr error: %s\n", e.getMessage());
            return -2;
        }
        try {
            listenId.bindAddr(srcSockaddr);
        } catch (VerbsException e) {
            CmExamples.perror(err, "cmatose: bind address failed", e);
            return CmExamples.negErrno(e);
        }
        try {
            listenId.listen(0);
        } catch (VerbsException e) {
            CmExamples.perror(err, "cmatose: failure trying to listen", e);
            return CmExamples.negErrno(e);
        }
        int ret = events(true, "connect events");
        if (ret != 0) {
            return ret;
        }
        if (messageCount != 0) {
            out.println("initiating data transfers");
            for (Node n : nodes) {
                ret = postSends(n);
                if (ret != 0) {
                    return ret;
                }
            }
            out.println("completing sends");
            ret = pollCqs(false);
            if (ret != 0) {
                return ret;
            }
            out.println("receiving data transfers");
            ret = pollCqs(true);
            if (ret != 0) {
                return ret;
            }
            out.println("data transfers complete");
        }
        if (migrate) {
            ret = migrateChannel(listenId);
            if (ret != 0) {
                return ret;
            }
        }
        out.println("cmatose: disconnecting");
        for (Node n : nodes) {
            if (!n.connected) {
                continue;
            }
            n.connected = false;
            try {
                n.cmaId.disconnect();
            } catch (VerbsException e) {
                // cmatose ignores rdma_disconnect's result
            }
        }
        ret = events(false, "disconnect events");
        out.println("disconnected");
        return ret;
    }

    private int runClient() {
        out.println("cmatose: starting client");
        SocketAddress[] a;
        try {
            a = CmExamples.rdmaAddr(srcAddr, dstAddr, port, portSpace, ibFamily);
        } catch (CmExamples.GaiException e) {
            out.printf("cmatose: getaddrinfo error: %s\n", e.getMessage());
            return -2;
        }
        srcSockaddr = a[0];
        dstSockaddr = a[1];
        out.println("cmatose: connecting");
        for (Node n : nodes) {
            try {
                n.cmaId.resolveAddr(srcSockaddr, dstSockaddr, Duration.ofMillis(2000));
            } catch (VerbsException e) {
                CmExamples.perror(err, "cmatose: failure getting addr", e);
                connectError();
                return CmExamples.negErrno(e);
            }
        }
        int ret = events(true, "connect events");
        if (ret == 0 && messageCount != 0) {
            out.println("receiving data transfers");
            ret = pollCqs(true);
            if (ret == 0) {
                out.println("sending replies");
                for (Node n : nodes) {
                    ret = postSends(n);
                    if (ret != 0) {
                        break;
                    }
                }
            }
            if (ret == 0) {
                out.println("data transfers complete");
            }
        }
        if (ret == 0 && migrate) {
            ret = migrateChannel(null);
            if (ret != 0) {
                return ret;
            }
        }
        int ret2 = events(false, "disconnect events");
        return ret2 != 0 ? ret2 : ret;
    }
}
