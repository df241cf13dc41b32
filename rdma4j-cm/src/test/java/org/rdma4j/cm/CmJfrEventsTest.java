// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.stream.Collectors;

import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.rdma4j.verbs.cm.CmEventType;

/**
 * Every rdma_cm event the user-space CM delivers is also a JFR event {@code org.rdma4j.CmEvent}: its
 * device, type, addresses, QP number and status, so a connection's life shows in JDK Mission Control.
 */
class CmJfrEventsTest {
    @TempDir
    Path dir;

    @Test
    void aConnectionsEventsAreRecorded() throws Exception {
        Path file = dir.resolve("cm.jfr");
        int clientQpn;
        int serverQpn;
        String clientIp;
        String serverIp;
        try (Recording r = new Recording()) {
            r.enable("org.rdma4j.CmEvent");
            r.start();
            try (CmPair p = new CmPair(7)) {
                CmPair.Conn conn = p.establish();
                clientQpn = conn.client().qp().qpNum();
                serverQpn = conn.server().qp().qpNum();
                clientIp = p.ip(0).getHostAddress();
                serverIp = p.ip(1).getHostAddress();
                conn.client().disconnect();
                p.expectAck(1, CmEventType.DISCONNECTED);
            }
            r.stop();
            r.dump(file);
        }
        List<RecordedEvent> events = RecordingFile.readAllEvents(file).stream()
                .filter(e -> e.getEventType().getName().equals("org.rdma4j.CmEvent")).toList();
        String seen = events.stream().map(e -> e.getString("event") + "@" + e.getString("device"))
                .collect(Collectors.joining(", "));

        RecordedEvent resolved = one(events, "ADDR_RESOLVED", seen);
        assertTrue(resolved.getString("remote").contains(serverIp), resolved::toString);
        one(events, "ROUTE_RESOLVED", seen);
        RecordedEvent req = one(events, "CONNECT_REQUEST", seen);
        assertTrue(req.getString("remote").contains(clientIp), req::toString);
        assertTrue(req.getString("local").contains(serverIp), req::toString);

        List<RecordedEvent> est = events.stream().filter(e -> e.getString("event").equals("ESTABLISHED")).toList();
        assertEquals(2, est.size(), seen);
        assertEquals(List.of(clientQpn, serverQpn).stream().sorted().toList(),
                est.stream().map(e -> e.getInt("qpn")).sorted().toList(), seen);
        assertNotNull(est.get(0).getString("device"), seen);
        assertNotEquals(est.get(0).getString("device"), est.get(1).getString("device"), seen);
        for (RecordedEvent e : est) {
            assertEquals(0, e.getInt("status"), e::toString);
        }
        RecordedEvent disc = one(events, "DISCONNECTED", seen);
        assertEquals(req.getString("device"), disc.getString("device"), seen);
    }

    private static RecordedEvent one(List<RecordedEvent> events, String type, String seen) {
        List<RecordedEvent> l = events.stream().filter(e -> type.equals(e.getString("event"))).toList();
        assertEquals(1, l.size(), () -> type + " once among: " + seen);
        return l.get(0);
    }
}
