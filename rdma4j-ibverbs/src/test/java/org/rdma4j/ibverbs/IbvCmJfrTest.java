// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.stream.Collectors;

import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.cm.CmAddress;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * A connection over the kernel's rdma_cm (librdmacm) is recorded as rdma4j-cm's are: every rdma_cm event the
 * provider hands to the application is a JFR event {@code org.rdma4j.CmEvent} with the device, the addresses,
 * the ID's QP number and the status (docs/observability.md). Runs where libibverbs has a device with an IPv4
 * address (the VM's rxe0 and siw0, through GuestTests); skipped elsewhere (CI: {@link RdmaCmJfrEventsTest}
 * checks the conversion there without a device).
 */
class IbvCmJfrTest {
    private static final Duration STEP = Duration.ofSeconds(20);

    @TempDir
    Path dir;

    private final Deque<AutoCloseable> closers = new ArrayDeque<>();

    private <T extends AutoCloseable> T track(T c) {
        closers.push(c);
        return c;
    }

    @Test
    void aConnectionOverTheKernelsCmIsRecorded() throws Exception {
        IbvDevice dev = IbvTestFabric.device();
        InetAddress ip = null;
        for (CmAddress a : new RdmaCmProvider().addresses()) {
            if (a.device().name().equals(dev.name()) && a.address() instanceof Inet4Address) {
                ip = a.address();
                break;
            }
        }
        Assumptions.assumeTrue(ip != null, () -> "librdmacm lists no IPv4 address of " + dev.name());
        Path file = dir.resolve("kernel-cm.jfr");
        int activeQpn;
        int passiveQpn;
        try (Recording r = new Recording()) {
            r.enable("org.rdma4j.CmEvent");
            r.start();
            try {
                CmEventChannel ch = track(RdmaCm.of(new RdmaCmProvider()).createEventChannel());
                CmId listener = track(ch.createId(PortSpace.TCP));
                listener.bindAddr(new InetSocketAddress(ip, 0));
                listener.listen(1);
                int port = ((InetSocketAddress) listener.localAddress()).getPort();
                CmId active = track(ch.createId(PortSpace.TCP));
                active.resolveAddr(new InetSocketAddress(ip, 0), new InetSocketAddress(ip, port), STEP);
                expect(ch, CmEventType.ADDR_RESOLVED, 1);
                active.resolveRoute(STEP);
                expect(ch, CmEventType.ROUTE_RESOLVED, 1);
                QueuePair qa = qp(active);
                active.connect(new ConnParam().responderResources(1).initiatorDepth(1));
                CmId passive = track(expect(ch, CmEventType.CONNECT_REQUEST, 1).getFirst());
                QueuePair qb = qp(passive);
                passive.accept(new ConnParam().responderResources(1).initiatorDepth(1));
                expect(ch, CmEventType.ESTABLISHED, 2);
                activeQpn = qa.qpNum();
                passiveQpn = qb.qpNum();
                active.disconnect();
                expect(ch, CmEventType.DISCONNECTED, 1);
                // as rdma_cm applications do, the side told of the disconnect disconnects too: on IB that sends
                // the DREP that ends the initiator's wait (its DISCONNECTED); on iWARP the stream may be gone
                try {
                    passive.disconnect();
                } catch (org.rdma4j.verbs.VerbsException e) {
                    // iWARP: the peer's close already ended the connection
                }
                expect(ch, CmEventType.DISCONNECTED, 1);
            } finally {
                while (!closers.isEmpty()) {
                    closers.pop().close();
                }
            }
            r.stop();
            r.dump(file);
        }
        List<RecordedEvent> events = RecordingFile.readAllEvents(file).stream()
                .filter(e -> e.getEventType().getName().equals("org.rdma4j.CmEvent")).toList();
        String seen = events.stream().map(e -> e.getString("event") + "@" + e.getString("device") + "/"
                + e.getInt("qpn")).collect(Collectors.joining(", "));
        String ipText = ip.getHostAddress();
        for (String type : List.of("ADDR_RESOLVED", "ROUTE_RESOLVED", "CONNECT_REQUEST")) {
            List<RecordedEvent> l = of(events, type);
            assertEquals(1, l.size(), () -> type + " once among " + seen);
            assertEquals(dev.name(), l.getFirst().getString("device"), seen);
            assertTrue(l.getFirst().getString("remote").contains(ipText), l.getFirst()::toString);
        }
        List<RecordedEvent> est = of(events, "ESTABLISHED");
        assertEquals(List.of(Math.min(activeQpn, passiveQpn), Math.max(activeQpn, passiveQpn)),
                est.stream().map(e -> e.getInt("qpn")).sorted().toList(), seen);
        List<RecordedEvent> disc = of(events, "DISCONNECTED");
        assertEquals(2, disc.size(), seen);
        for (RecordedEvent e : events) {
            assertEquals(dev.name(), e.getString("device"), seen);
            assertEquals(0, e.getInt("status"), seen);
        }
    }

    private static List<RecordedEvent> of(List<RecordedEvent> events, String type) {
        return events.stream().filter(e -> type.equals(e.getString("event"))).toList();
    }

    /** An RC QP made by the CM ID on librdmacm's context for the device (PD and CQ tracked before it). */
    private QueuePair qp(CmId id) {
        Context ctx = id.context();
        ProtectionDomain pd = track(ctx.allocPd());
        CompletionQueue cq = track(ctx.createCq(8, null, 0));
        QueuePair qp = id.createQp(pd, new QpInitAttributes().type(QpType.RC).sendCq(cq).recvCq(cq)
                .cap(new QpCapabilities(4, 4, 1, 1, 0)));
        track(id::destroyQp);
        return qp;
    }

    /**
     * Takes events until {@code n} of {@code type} came, acknowledging each; any other type fails the test
     * (except a TIMEWAIT_EXIT, which IB's CM sends after a DISCONNECTED).
     *
     * @return the IDs of the events of {@code type}
     */
    private static List<CmId> expect(CmEventChannel ch, CmEventType type, int n) {
        List<CmId> ids = new ArrayList<>();
        long deadline = System.nanoTime() + STEP.toNanos();
        while (ids.size() < n) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw new AssertionError("no " + n + " x " + type + " within " + STEP + " (got " + ids.size() + ")");
            }
            CmEvent e = ch.getEvent(Duration.ofNanos(left));
            if (e == null) {
                continue;
            }
            CmEventType t = e.type();
            CmId id = e.id();
            String text = e.toString();
            e.ack();
            if (t == type) {
                ids.add(id);
            } else if (t != CmEventType.TIMEWAIT_EXIT) {
                throw new AssertionError("expected " + type + ", got " + text);
            }
        }
        return ids;
    }
}
