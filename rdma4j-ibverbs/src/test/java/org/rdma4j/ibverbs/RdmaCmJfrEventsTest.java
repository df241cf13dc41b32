// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;

import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.spi.CmEventInfo;
import org.rdma4j.verbs.spi.CmEventSink;
import org.rdma4j.verbs.spi.CmIdSpi;

/**
 * The native CM's conversion point without a device: {@code rdma_cm_event}s and {@code rdma_cm_id}s built in
 * native memory at librdmacm's offsets (checked against rdma_cma.h by {@link RdmacmLayoutsTest}) go through
 * {@link RdmaCmId#dispatch} as the agent hands them over. Each event it converts reaches the ID's sink with
 * its type, status and parameters, and is recorded as the JFR event {@code org.rdma4j.CmEvent} with the
 * fields rdma4j-cm records (docs/observability.md); an event of an unknown type or ID is neither. The same
 * events with a device, QP numbers and the kernel's CM are recorded in the guest by {@link IbvCmJfrTest}.
 */
class RdmaCmJfrEventsTest {
    @TempDir
    Path dir;

    /** A sink that keeps what it is given; for a listener, the new IDs' sink is {@code child}. */
    private static final class Sink implements CmEventSink {
        final List<CmEventInfo> events = new ArrayList<>();
        final List<CmIdSpi> requests = new ArrayList<>();
        Sink child;

        @Override
        public void post(CmEventInfo event) {
            events.add(event);
        }

        @Override
        public CmEventSink connectRequest(CmIdSpi newId, CmEventInfo event) {
            requests.add(newId);
            events.add(event);
            return child;
        }
    }

    /** A {@code struct rdma_cm_id} with its source and destination addresses (verbs and qp NULL: unbound). */
    private static MemorySegment fakeId(Arena a, InetSocketAddress src, InetSocketAddress dst) {
        MemorySegment id = a.allocate(Rdmacm.ID_SIZE, 8);
        if (src != null) {
            RdmaCmId.sockaddr(id.asSlice(Rdmacm.ID_SRC_ADDR, Rdmacm.SOCKADDR_STORAGE), src);
        }
        if (dst != null) {
            RdmaCmId.sockaddr(id.asSlice(Rdmacm.ID_DST_ADDR, Rdmacm.SOCKADDR_STORAGE), dst);
        }
        return id;
    }

    /** A {@code struct rdma_cm_event} of {@code type} for {@code id}, with an empty {@code rdma_conn_param}. */
    private static MemorySegment fakeEvent(Arena a, MemorySegment id, MemorySegment listenId, int type, int status) {
        MemorySegment ev = a.allocate(Rdmacm.EV_SIZE, 8);
        ev.set(ValueLayout.ADDRESS, Rdmacm.EV_ID, id);
        ev.set(ValueLayout.ADDRESS, Rdmacm.EV_LISTEN_ID, listenId);
        ev.set(ValueLayout.JAVA_INT, Rdmacm.EV_EVENT, type);
        ev.set(ValueLayout.JAVA_INT, Rdmacm.EV_STATUS, status);
        return ev;
    }

    @Test
    void everyEventItConvertsReachesTheSinkAndIsRecorded() throws Exception {
        InetSocketAddress server = new InetSocketAddress(InetAddress.getByName("10.1.2.3"), 4791);
        InetSocketAddress client = new InetSocketAddress(InetAddress.getByName("10.1.2.4"), 50000);
        InetSocketAddress v6Local = new InetSocketAddress(InetAddress.getByName("fd00::1"), 40000);
        InetSocketAddress v6Remote = new InetSocketAddress(InetAddress.getByName("fd00::2"), 4791);
        RdmaCmProvider.State st = RdmaCmProvider.State.detached();
        Path file = dir.resolve("native-cm.jfr");
        Sink listenerSink = new Sink();
        listenerSink.child = new Sink();
        Sink activeSink = new Sink();
        byte[] hello = "hello".getBytes(StandardCharsets.US_ASCII);
        // never closed: rdma_destroy_id must not see these IDs, which librdmacm did not make
        try (Arena a = Arena.ofConfined(); Recording r = new Recording()) {
            MemorySegment listenId = fakeId(a, server, null);
            MemorySegment childId = fakeId(a, server, client);
            MemorySegment activeId = fakeId(a, v6Local, v6Remote);
            RdmaCmId listener = new RdmaCmId(st, listenId, PortSpace.TCP, QpType.RC, listenerSink);
            st.ids.put(listenId.address(), listener);
            st.ids.put(activeId.address(), new RdmaCmId(st, activeId, PortSpace.TCP, QpType.RC, activeSink));
            r.enable("org.rdma4j.CmEvent");
            r.start();

            MemorySegment req = fakeEvent(a, childId, listenId, CmEventType.CONNECT_REQUEST.value(), 0);
            MemorySegment param = req.asSlice(Rdmacm.EV_PARAM);
            MemorySegment data = a.allocate(hello.length);
            MemorySegment.copy(hello, 0, data, ValueLayout.JAVA_BYTE, 0, hello.length);
            param.set(ValueLayout.ADDRESS, Rdmacm.CP_PRIVATE_DATA, data);
            param.set(ValueLayout.JAVA_BYTE, Rdmacm.CP_PRIVATE_DATA_LEN, (byte) hello.length);
            param.set(ValueLayout.JAVA_BYTE, Rdmacm.CP_RESPONDER_RESOURCES, (byte) 2);
            param.set(ValueLayout.JAVA_BYTE, Rdmacm.CP_INITIATOR_DEPTH, (byte) 3);
            param.set(ValueLayout.JAVA_BYTE, Rdmacm.CP_RETRY_COUNT, (byte) 6);
            param.set(ValueLayout.JAVA_INT, Rdmacm.CP_QP_NUM, 0x12_3456);
            RdmaCmId.dispatch(st, req);
            RdmaCmId.dispatch(st, fakeEvent(a, childId, MemorySegment.NULL, CmEventType.ESTABLISHED.value(), 0));
            RdmaCmId.dispatch(st, fakeEvent(a, activeId, MemorySegment.NULL, CmEventType.ADDR_RESOLVED.value(), 0));
            RdmaCmId.dispatch(st, fakeEvent(a, activeId, MemorySegment.NULL, CmEventType.REJECTED.value(), 28));
            RdmaCmId.dispatch(st, fakeEvent(a, activeId, MemorySegment.NULL, CmEventType.UNREACHABLE.value(), -110));
            // not converted: a type of a newer librdmacm, an ID nobody made
            RdmaCmId.dispatch(st, fakeEvent(a, activeId, MemorySegment.NULL, 99, 0));
            MemorySegment stranger = fakeId(a, client, server);
            RdmaCmId.dispatch(st, fakeEvent(a, stranger, MemorySegment.NULL, CmEventType.DISCONNECTED.value(), 0));
            r.stop();
            r.dump(file);
        }

        // what the sinks were given
        assertEquals(1, listenerSink.requests.size(), "one new ID for the request");
        CmEventInfo reqInfo = listenerSink.events.getFirst();
        assertEquals(CmEventType.CONNECT_REQUEST, reqInfo.type());
        assertArrayEquals(hello, reqInfo.privateData());
        assertNotNull(reqInfo.connParam(), reqInfo.toString());
        assertEquals(0x12_3456, reqInfo.connParam().qpNum());
        assertEquals(2, reqInfo.connParam().responderResources());
        assertEquals(3, reqInfo.connParam().initiatorDepth());
        assertEquals(6, reqInfo.connParam().retryCount());
        assertEquals(client, listenerSink.requests.getFirst().remoteAddress(), "the new ID's peer");
        assertEquals(List.of(CmEventType.ESTABLISHED),
                listenerSink.child.events.stream().map(CmEventInfo::type).toList(), "the new ID's events");
        assertEquals(List.of(CmEventType.ADDR_RESOLVED, CmEventType.REJECTED, CmEventType.UNREACHABLE),
                activeSink.events.stream().map(CmEventInfo::type).toList(), "the active ID's events");
        assertTrue(activeSink.events.get(2).detail().contains("ETIMEDOUT"), activeSink.events.get(2).detail());

        // what JFR recorded: the same five events, in order, with the IDs' addresses
        List<RecordedEvent> events = RecordingFile.readAllEvents(file).stream()
                .filter(e -> e.getEventType().getName().equals("org.rdma4j.CmEvent")).toList();
        String seen = events.stream().map(e -> e.getString("event") + "(" + e.getInt("status") + ")")
                .collect(Collectors.joining(", "));
        assertEquals(List.of("CONNECT_REQUEST", "ESTABLISHED", "ADDR_RESOLVED", "REJECTED", "UNREACHABLE"),
                events.stream().map(e -> e.getString("event")).toList(), seen);
        for (int i = 0; i < 2; i++) {
            RecordedEvent e = events.get(i);
            assertTrue(e.getString("local").contains("10.1.2.3") && e.getString("local").contains("4791"), e::toString);
            assertTrue(e.getString("remote").contains("10.1.2.4") && e.getString("remote").contains("50000"),
                    e::toString);
            assertEquals(0, e.getInt("status"), e::toString);
        }
        for (int i = 2; i < 5; i++) {
            RecordedEvent e = events.get(i);
            assertTrue(e.getString("local").contains("fd00:0:0:0:0:0:0:1"), e::toString);
            assertTrue(e.getString("remote").contains("fd00:0:0:0:0:0:0:2"), e::toString);
        }
        assertEquals(28, events.get(3).getInt("status"), seen);
        assertEquals(-110, events.get(4).getInt("status"), seen);
        for (RecordedEvent e : events) {
            assertNull(e.getString("device"), "no device: the fake IDs are bound to none (id->verbs NULL)");
            assertEquals(0, e.getInt("qpn"), "no QP on the fake IDs");
        }
    }
}
