// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.net.SocketAddress;
import java.time.Duration;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.CmOption;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RdmaCm;
import org.rdma4j.verbs.cm.UdParam;

/**
 * {@code rdma4j udaddy}: rdma-core's {@code udaddy} ({@code librdmacm/examples/udaddy.c}) over the CM API: UD
 * "connections" resolved through SIDR in the UDP port space (port 7174). The client resolves the server's
 * QP number and Q_Key (SIDR_REQ/SIDR_REP), sends {@code -C} messages of {@code -S} bytes with its QP number
 * as immediate data, and waits for as many replies; the server accepts with its QP number, builds its reply
 * address from the first message's GRH ({@code ibv_create_ah_from_wc}), and answers each message. Same
 * flags, lines and exit status as udaddy.
 */
public final class Udaddy extends CmExamples.Tool {
    /** sizeof(struct ibv_grh): the area in front of every UD receive. */
    private static final int GRH = 40;

    private int connections = 1;
    private int messageSize = 100;
    private int messageCount = 10;
    private final String port = "7174";
    private boolean setTos;
    private int tos;
    private String dstAddr;
    private String srcAddr;
    private boolean ibFamily;
    private int portSpace = PortSpace.UDP.value();

    private CmEventChannel channel;
    private Node[] nodes;
    private int connIndex;
    private int connectsLeft;

    /** One peer ({@code struct cmatest_node}). */
    private static final class Node {
        final int id;
        CmId cmaId;
        boolean connected;
        ProtectionDomain pd;
        CompletionQueue cq;
        Arena arena;
        MemoryRegion mr;
        AddressHandle ah;
        int remoteQpn;
        int remoteQkey;

        Node(int id) {
            this.id = id;
        }
    }

    private Udaddy(RdmaCm cm, PrintStream out, PrintStream err, StopSignal stop) {
        super("udaddy", cm, out, err, stop);
    }

    /**
     * Runs udaddy on the process's CM providers.
     *
     * @param args its arguments
     * @param out  standard output
     * @param err  standard error
     * @param stop stops a run (Ctrl-C)
     * @return the exit status (udaddy's {@code ret})
     */
    public static int main(String[] args, PrintStream out, PrintStream err, StopSignal stop) {
        return main(args, RdmaCm.system(), out, err, stop);
    }

    /**
     * Runs udaddy on the given CM providers.
     *
     * @param args its arguments
     * @param cm   the providers
     * @param out  standard output
     * @param err  standard error
     * @param stop stops a run
     * @return the exit status
     */
    public static int main(String[] args, RdmaCm cm, PrintStream out, PrintStream err, StopSignal stop) {
        return new Udaddy(cm, out, err, stop).exec(args);
    }

    @Override
    boolean parse(String[] args) {
        Getopt g = new Getopt(args, "s:b:c:C:S:t:p:P:f:");
        int op;
        while ((op = g.next()) != -1) {
            switch (op) {
                case 's' -> dstAddr = g.arg();
                case 'b' -> srcAddr = g.arg();
                case 'c' -> connections = CmExamples.atoi(g.arg());
                case 'C' -> messageCount = CmExamples.atoi(g.arg());
                case 'S' -> messageSize = CmExamples.atoi(g.arg());
                case 't' -> {
                    setTos = true;
                    tos = (int) (CmExamples.strtoul0(g.arg()) & 0xFF);
                }
                case 'p' -> portSpace = (int) CmExamples.strtoul0(g.arg()); // udaddy: -p is the port space
                case 'f' -> ibFamily = addressFormat(g.arg(), ibFamily);
                case 'P' -> {
                    String f = g.arg().toLowerCase(java.util.Locale.ROOT);
                    if (f.startsWith("ipoib")) {
                        portSpace = PortSpace.IPOIB.value();
                    } else if (!f.startsWith("udp")) {
                        err.println("Warning: unknown port space format");
                    }
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
        out.println("usage: udaddy");
        out.println("\t[-s server_address]");
        out.println("\t[-b bind_address]");
        out.println("\t[-f address_format]");
        out.println("\t    name, ip, ipv6, or gid");
        out.println("\t[-P port_space]");
        out.println("\t    udp or ipoib");
        out.println("\t[-c connections]");
        out.println("\t[-C message_count]");
        out.println("\t[-S message_size]");
        out.println("\t[-t type_of_service]");
        out.printf("\t[-p port_space - %#x for UDP (default), %#x for IPOIB]\n", PortSpace.UDP.value(),
                PortSpace.IPOIB.value());
    }

    /** rdma_create_id with udaddy's numeric port space: an unknown one is EINVAL, as the kernel answers. */
    private CmId createId() {
        PortSpace ps;
        try {
            ps = PortSpace.ofValue(portSpace);
        } catch (IllegalArgumentException e) {
            throw new VerbsException(Errno.EINVAL, "rdma_create_id: " + e.getMessage());
        }
        return channel.createId(ps, QpType.UD);
    }

    private PortSpace space() {
        try {
            return PortSpace.ofValue(portSpace);
        } catch (IllegalArgumentException e) {
            return PortSpace.UDP;
        }
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
        nodes = new Node[connections];
        for (int i = 0; i < connections; i++) {
            nodes[i] = new Node(i);
            if (dstAddr != null) {
                try {
                    nodes[i].cmaId = createId();
                    nodes[i].cmaId.attach(nodes[i]);
                } catch (VerbsException e) {
                    CmExamples.perror(err, "udaddy: rdma_create_id", e);
                    for (int j = 0; j < i; j++) {
                        nodes[j].cmaId.close();
                    }
                    return 1;
                }
            }
        }
        int ret;
        try {
            ret = dstAddr != null ? runClient() : runServer();
        } catch (VerbsException e) {
            CmExamples.perror(err, "udaddy", e);
            ret = CmExamples.negErrno(e);
        }
        out.println("test complete");
        for (Node n : nodes) {
            destroyNode(n);
        }
        closeRejected();
        try {
            channel.close();
        } catch (VerbsException e) {
            CmExamples.perror(err, "udaddy: rdma_destroy_event_channel", e);
        }
        out.printf("return status %d\n", ret);
        return ret;
    }

    // ------------------------------------------------------------------ nodes

    private int verifyTestParams(Node node) {
        int mtu = node.cmaId.context().queryPort(node.cmaId.portNum()).activeMtu().bytes();
        if (messageCount != 0 && messageSize > mtu) {
            out.printf("udaddy: message_size %d is larger than active mtu %d\n", messageSize, mtu);
            return -Errno.EINVAL.value();
        }
        return 0;
    }

    private int initNode(Node node) {
        try {
            node.pd = node.cmaId.context().allocPd();
        } catch (VerbsException e) {
            out.println("udaddy: unable to allocate PD");
            return -Errno.ENOMEM.value();
        }
        int cqe = messageCount != 0 ? messageCount * 2 : 2;
        try {
            node.cq = node.cmaId.context().createCq(cqe, null, 0);
        } catch (VerbsException e) {
            out.println("udaddy: unable to create CQ");
            return -Errno.ENOMEM.value();
        }
        int wr = messageCount != 0 ? messageCount : 1;
        QpInitAttributes init = new QpInitAttributes().type(QpType.UD).sendCq(node.cq).recvCq(node.cq)
                .sqSigAll(false).cap(new QpCapabilities(wr, wr, 1, 1, 0));
        try {
            node.cmaId.createQp(node.pd, init);
        } catch (VerbsException e) {
            CmExamples.perror(err, "udaddy: unable to create QP", e);
            return CmExamples.negErrno(e);
        }
        if (messageSize == 0) {
            messageCount = 0;
        }
        if (messageCount == 0) {
            return 0;
        }
        node.arena = Arena.ofShared();
        try {
            node.mr = node.pd.regMr(node.arena.allocate(messageSize + GRH, 8), AccessFlag.of(AccessFlag.LOCAL_WRITE));
        } catch (VerbsException e) {
            out.println("failed to reg MR");
            out.printf("udaddy: failed to create messages: %d\n", -1);
            return -1;
        }
        return 0;
    }

    private int postRecvs(Node node) {
        if (messageCount == 0) {
            return 0;
        }
        RecvWorkRequest wr = new RecvWorkRequest().wrId(node.id)
                .singleSge(node.mr.address(), messageSize + GRH, node.mr.lkey());
        for (int i = 0; i < messageCount; i++) {
            if (!node.cmaId.qp().postRecv(wr)) {
                int e = wr.postError() == null ? Errno.ENOMEM.value() : wr.postError().value();
                out.printf("failed to post receives: %d\n", e);
                return e;
            }
        }
        return 0;
    }

    private int postSends(Node node, int signalFlag) {
        if (!node.connected || messageCount == 0) {
            return 0;
        }
        SendWorkRequest wr = new SendWorkRequest().opcode(WrOpcode.SEND_WITH_IMM).sendFlags(signalFlag).wrId(node.id)
                .immData(node.cmaId.qp().qpNum()).ah(node.ah).remoteQpn(node.remoteQpn).remoteQkey(node.remoteQkey)
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
            quiet(node.ah);
            destroy(node.cmaId, node.cq, node.mr, node.pd, node.arena);
        }
    }

    // ------------------------------------------------------------------ events

    private int addrHandler(Node node) {
        if (setTos) {
            try {
                node.cmaId.setOption(CmOption.TOS, tos);
            } catch (VerbsException e) {
                CmExamples.perror(err, "udaddy: set TOS option failed", e);
            }
        }
        try {
            node.cmaId.resolveRoute(Duration.ofMillis(2000));
        } catch (VerbsException e) {
            CmExamples.perror(err, "udaddy: resolve route failed", e);
            connectsLeft--;
            return CmExamples.negErrno(e);
        }
        return 0;
    }

    private int routeHandler(Node node) {
        int ret = verifyTestParams(node);
        if (ret == 0) {
            ret = initNode(node);
        }
        if (ret == 0) {
            ret = postRecvs(node);
        }
        if (ret == 0) {
            try {
                node.cmaId.connect(new ConnParam());
            } catch (VerbsException e) {
                CmExamples.perror(err, "udaddy: failure connecting", e);
                ret = CmExamples.negErrno(e);
            }
        }
        if (ret != 0) {
            connectsLeft--;
        }
        return ret;
    }

    private int connectHandler(CmId cmaId) {
        int ret;
        if (connIndex == connections) {
            ret = -Errno.ENOMEM.value();
        } else {
            Node node = nodes[connIndex++];
            node.cmaId = cmaId;
            cmaId.attach(node);
            ret = verifyTestParams(node);
            if (ret == 0) {
                ret = initNode(node);
            }
            if (ret == 0) {
                ret = postRecvs(node);
            }
            if (ret == 0) {
                try {
                    cmaId.accept(new ConnParam().qpNum(cmaId.qp().qpNum()));
                    node.connected = true;
                    connectsLeft--;
                    return 0;
                } catch (VerbsException e) {
                    CmExamples.perror(err, "udaddy: failure accepting", e);
                    ret = CmExamples.negErrno(e);
                }
            }
            node.cmaId = null; // as udaddy: the node forgets the ID (its resources are left to the exit)
            releaseNode(node, cmaId);
            connectsLeft--;
        }
        out.println("udaddy: failing connection request");
        try {
            cmaId.reject(null);
        } catch (VerbsException e) {
            CmExamples.perror(err, "udaddy: rdma_reject", e);
        }
        rejected(cmaId);
        return ret;
    }

    private void releaseNode(Node node, CmId id) {
        if (id.qp() != null) {
            id.destroyQp();
        }
        quiet(node.cq, node.mr, node.pd, node.arena);
        node.cq = null;
        node.mr = null;
        node.pd = null;
        node.arena = null;
    }

    private int resolvedHandler(Node node, CmEvent event) {
        UdParam ud = event.udParam();
        if (ud == null) {
            out.println("udaddy: failure creating address handle");
            connectsLeft--;
            return -1;
        }
        node.remoteQpn = ud.qpNum();
        node.remoteQkey = ud.qkey();
        try {
            node.ah = node.pd.createAh(ud.ah());
        } catch (VerbsException e) {
            out.println("udaddy: failure creating address handle");
            err.println("\t(" + e.getMessage() + ")");
            connectsLeft--;
            return -1;
        }
        node.connected = true;
        connectsLeft--;
        return 0;
    }

    private int cmaHandler(CmEvent event) {
        CmId id = event.id();
        Node node = id.attachment() instanceof Node n ? n : null;
        return switch (event.type()) {
            case ADDR_RESOLVED -> addrHandler(node);
            case ROUTE_RESOLVED -> routeHandler(node);
            case CONNECT_REQUEST -> connectHandler(id);
            case ESTABLISHED -> resolvedHandler(node, event);
            case ADDR_ERROR, ROUTE_ERROR, CONNECT_ERROR, UNREACHABLE, REJECTED -> {
                out.printf("udaddy: event: %s, error: %d\n", event.type().rdmaName(), event.status());
                if (event.detail() != null) {
                    err.println("\t(" + event.detail() + ")");
                }
                connectsLeft--;
                yield event.status();
            }
            default -> 0; // DEVICE_REMOVAL: cleanup will occur after the test completes
        };
    }

    private int connectEvents() {
        int ret = 0;
        while (connectsLeft > 0 && ret == 0) {
            CmEvent e = CmExamples.getEvent(channel, stop);
            if (e == null) {
                return -CmExamples.EINTR;
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

    /** ibv_create_ah_from_wc on the first receive, the peer's QPN from its immediate data, our own Q_Key. */
    private int createReplyAh(Node node, WorkCompletion wc) {
        try {
            AhAttributes a = AhAttributes.fromWc(node.cmaId.context(), node.cmaId.portNum(), wc, node.mr.segment());
            node.ah = node.pd.createAh(a);
        } catch (VerbsException e) {
            err.println("\t(" + e.getMessage() + ")");
            return -1;
        }
        node.remoteQpn = wc.immData();
        node.remoteQkey = node.cmaId.qp().query().qkey();
        return 0;
    }

    private int pollCqs() {
        for (Node n : nodes) {
            if (!n.connected) {
                continue;
            }
            int ret = CmExamples.pollUntil(n.cq, messageCount, stop, (wc, got) -> {
                if (n.ah == null && createReplyAh(n, wc[0]) != 0) {
                    out.println("udaddy: failed to create reply AH");
                    return -1;
                }
                return 0;
            });
            if (ret == -1) {
                return ret;
            }
            if (ret != 0) {
                out.printf("udaddy: failed polling CQ: %d\n", ret);
                return ret;
            }
        }
        return 0;
    }

    // ------------------------------------------------------------------ server and client

    private int runServer() {
        out.println("udaddy: starting server");
        CmId listenId;
        try {
            listenId = createId();
        } catch (VerbsException e) {
            CmExamples.perror(err, "udaddy: listen request failed", e);
            return CmExamples.negErrno(e);
        }
        try {
            SocketAddress src;
            try {
                src = CmExamples.rdmaAddr(srcAddr, null, port, space(), ibFamily)[0];
            } catch (CmExamples.GaiException e) {
                out.printf("udaddy: getrdmaaddr error: %s\n", e.getMessage());
                return -2;
            }
            try {
                listenId.bindAddr(src);
            } catch (VerbsException e) {
                CmExamples.perror(err, "udaddy: bind address failed", e);
                return CmExamples.negErrno(e);
            }
            try {
                listenId.listen(0);
            } catch (VerbsException e) {
                CmExamples.perror(err, "udaddy: failure trying to listen", e);
                return CmExamples.negErrno(e);
            }
            if (connectEvents() == -CmExamples.EINTR) {
                return -CmExamples.EINTR; // Ctrl-C (udaddy ignores connect_events' result)
            }
            int ret = 0;
            if (messageCount != 0) {
                out.println("receiving data transfers");
                ret = pollCqs();
                if (ret != 0) {
                    return ret;
                }
                out.println("sending replies");
                for (Node n : nodes) {
                    ret = postSends(n, SendFlags.SIGNALED);
                    if (ret != 0) {
                        return ret;
                    }
                }
                ret = pollCqs();
                if (ret != 0) {
                    return ret;
                }
                out.println("data transfers complete");
            }
            return ret;
        } finally {
            try {
                listenId.close();
            } catch (VerbsException e) {
                CmExamples.perror(err, "udaddy: rdma_destroy_id", e);
            }
        }
    }

    private int runClient() {
        out.println("udaddy: starting client");
        SocketAddress[] a;
        try {
            a = CmExamples.rdmaAddr(srcAddr, dstAddr, port, space(), ibFamily);
        } catch (CmExamples.GaiException e) {
            out.printf("udaddy: getaddrinfo error: %s\n", e.getMessage());
            return -2;
        }
        out.println("udaddy: connecting");
        for (Node n : nodes) {
            try {
                n.cmaId.resolveAddr(a[0], a[1], Duration.ofMillis(2000));
            } catch (VerbsException e) {
                CmExamples.perror(err, "udaddy: failure getting addr", e);
                connectsLeft--;
                return CmExamples.negErrno(e);
            }
        }
        int ret = connectEvents();
        if (ret != 0) {
            return ret;
        }
        if (messageCount != 0) {
            out.println("initiating data transfers");
            for (Node n : nodes) {
                ret = postSends(n, 0);
                if (ret != 0) {
                    return ret;
                }
            }
            out.println("receiving data transfers");
            ret = pollCqs();
            if (ret != 0) {
                return ret;
            }
            out.println("data transfers complete");
        }
        return ret;
    }
}
