// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.function.Consumer;
import java.util.function.Function;

import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * Connects an RC pair through a fabric's CM ({@link Fabric#cm()}: iWARP, where the kernel's iw_cm moves the QPs
 * to RTS with the TCP stream it sets up, so they cannot be connected with modify_qp). Side A's QP is the
 * test's own, on any context of the device, given to {@code rdma_connect} by number (the iw_cm takes it with
 * {@code iw_get_qp}); side B's QP is made by the passive CM ID, as {@code rdma_accept} requires (librdmacm's
 * {@code ucma_modify_qp_rtr} refuses an ID without a QP), on the CM's context for the device: the fabric's
 * {@link Fabric#openContext} context 1, so B's PD, CQs and SRQ may be the test's. The IBA attributes (PSNs,
 * timeouts, retry counts, path MTU) do not exist on iWARP; the pair connects with the RDMA READ depth only.
 */
public final class CmConnector {
    /** How long each CM step may take (the kernel's CM, real time). */
    public static final Duration STEP = Duration.ofSeconds(20);

    private CmConnector() {
    }

    /**
     * Connects {@code a} to a QP that {@code makeB} creates on the passive CM ID.
     *
     * @param fabric a fabric with a {@link Fabric#cm()} and {@link Fabric#cmAddress()}
     * @param a      side A's RC QP, in RESET
     * @param depth  the RDMA READ depth both sides use (responder resources and initiator depth)
     * @param makeB  creates side B's QP with {@code id.createQp(pd, init)}; whatever else it makes it tracks
     *               itself, and it tracks the QP it returns
     * @param track  takes the CM's channel and IDs, in the order they must be closed last-first: called
     *               before {@code makeB}, so B's QP is destroyed before its ID
     * @return B's QP, connected to {@code a}; both in RTS once this returns
     */
    public static QueuePair connect(Fabric fabric, QueuePair a, int depth, Function<CmId, QueuePair> makeB,
                                    Consumer<AutoCloseable> track) {
        RdmaCm cm = fabric.cm();
        InetAddress ip = fabric.cmAddress();
        if (cm == null || ip == null) {
            throw new IllegalStateException("the fabric has no CM to connect through (cm " + cm + ", address " + ip + ")");
        }
        CmEventChannel ch = cm.createEventChannel();
        track.accept(ch);
        CmId listener = ch.createId(PortSpace.TCP);
        track.accept(listener);
        listener.bindAddr(new InetSocketAddress(ip, 0));
        listener.listen(1);
        int port = ((InetSocketAddress) listener.localAddress()).getPort();
        CmId active = ch.createId(PortSpace.TCP);
        track.accept(active);
        active.resolveAddr(new InetSocketAddress(ip, 0), new InetSocketAddress(ip, port), STEP);
        event(ch, CmEventType.ADDR_RESOLVED).ack();
        active.resolveRoute(STEP);
        event(ch, CmEventType.ROUTE_RESOLVED).ack();
        active.connect(new ConnParam().qpNum(a.qpNum()).responderResources(depth).initiatorDepth(depth));
        CmEvent req = event(ch, CmEventType.CONNECT_REQUEST);
        CmId passive = req.id();
        track.accept(passive);
        req.ack();
        QueuePair b = makeB.apply(passive);
        passive.accept(new ConnParam().responderResources(depth).initiatorDepth(depth));
        event(ch, CmEventType.ESTABLISHED).ack();
        event(ch, CmEventType.ESTABLISHED).ack();
        return b;
    }

    private static CmEvent event(CmEventChannel ch, CmEventType type) {
        long deadline = System.nanoTime() + STEP.toNanos();
        while (System.nanoTime() - deadline < 0) {
            CmEvent e = ch.getEvent(Duration.ofMillis(50));
            if (e != null) {
                if (e.type() != type) {
                    e.ack();
                    throw new AssertionError("connecting through the CM: expected " + type.rdmaName() + ", got " + e);
                }
                return e;
            }
        }
        throw new AssertionError("connecting through the CM: no " + type.rdmaName() + " within " + STEP);
    }
}
