// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.function.Predicate;

import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.rdma4j.dma.DmaConfig;
import org.rdma4j.dma.DmaSpace;
import org.rdma4j.verbs.DmaDirection;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * The soft device's JFR events reach a recording with the fields JDK Mission Control shows: QP state
 * changes (modify and error), RNR NAKs, retransmissions, dropped packets and DMA-checker reports.
 */
class SoftJfrEventsTest {
    @TempDir
    Path dir;

    @Test
    void shouldRecordStateChangesRnrRetransmitsDropsAndDmaReports() throws Exception {
        Path file = dir.resolve("run.jfr");
        try (Recording r = new Recording()) {
            for (String e : List.of("QpStateChange", "RnrNak", "Retransmit", "PacketDrop", "DmaCheckerReport")) {
                r.enable("org.rdma4j." + e);
            }
            r.start();
            rnrUntilTheRetriesRunOut();
            retransmitToAPeerInErr();
            DmaSpace space = new DmaSpace(DmaConfig.iommu().withChecker(true));
            space.dmaFor("jfr-test").unmap(0x1234_0000L, 64, DmaDirection.TO_DEVICE); // never mapped
            r.stop();
            r.dump(file);
        }
        List<RecordedEvent> events = RecordingFile.readAllEvents(file);

        RecordedEvent toRts = one(events, "org.rdma4j.QpStateChange",
                e -> "RTR".equals(e.getString("from")) && "RTS".equals(e.getString("to")));
        assertEquals("modify", toRts.getString("cause"));
        assertEquals("RC", toRts.getString("qpType"));
        assertTrue(toRts.getInt("qpn") > 1);
        RecordedEvent toErr = one(events, "org.rdma4j.QpStateChange",
                e -> "RTS".equals(e.getString("from")) && "ERR".equals(e.getString("to")) && "error".equals(e.getString("cause")));
        assertEquals("lossy0", toErr.getString("device"));

        RecordedEvent rnr = one(events, "org.rdma4j.RnrNak", e -> true);
        assertEquals("lossy0", rnr.getString("device"));
        assertTrue(rnr.getLong("waitNs") > 0, rnr.toString());

        RecordedEvent retry = one(events, "org.rdma4j.Retransmit", e -> "TIMEOUT".equals(e.getString("cause")));
        assertEquals("lossy0", retry.getString("device"));

        one(events, "org.rdma4j.PacketDrop", e -> "lossy1".equals(e.getString("device"))
                && "drop_bad_state".equals(e.getString("reason")));
        one(events, "org.rdma4j.DmaCheckerReport", e -> e.getString("kind") != null && e.getString("message") != null);
    }

    /** A SEND to a peer with no receive posted: RNR NAKs until rnr_retry runs out, then ERR. */
    private static void rnrUntilTheRetriesRunOut() {
        try (LossyPair p = new LossyPair(LossyPair.Config.of(QpType.RC).retries(8, 7, 1), 1, FaultInjectingLink.Faults.NONE)) {
            send(p);
            WorkCompletion wc = awaitSendCompletion(p);
            assertEquals(WcStatus.RNR_RETRY_EXC_ERR, wc.status());
        }
    }

    /** A SEND to a peer moved to ERR: the peer drops it, the requester retransmits on timeouts, then ERR. */
    private static void retransmitToAPeerInErr() {
        try (LossyPair p = new LossyPair(LossyPair.Config.of(QpType.RC).retries(8, 1, 7), 1, FaultInjectingLink.Faults.NONE)) {
            p.b.qp.modify(new QpAttributes().state(QpState.ERR));
            send(p);
            WorkCompletion wc = awaitSendCompletion(p);
            assertEquals(WcStatus.RETRY_EXC_ERR, wc.status());
        }
    }

    private static void send(LossyPair p) {
        SendWorkRequest wr = new SendWorkRequest().opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED).wrId(7)
                .singleSge(p.a.addr(0), 64, p.a.mr.lkey());
        assertTrue(p.a.qp.postSend(wr), () -> "post: " + wr.postError());
    }

    private static WorkCompletion awaitSendCompletion(LossyPair p) {
        WorkCompletion wc = new WorkCompletion();
        for (int i = 0; i < 10_000; i++) {
            if (p.a.scq.poll(wc)) {
                return wc;
            }
            p.step();
        }
        throw new AssertionError("no send completion after 10000 clock steps");
    }

    private static RecordedEvent one(List<RecordedEvent> events, String type, Predicate<RecordedEvent> p) {
        return events.stream().filter(e -> e.getEventType().getName().equals(type)).filter(p).findFirst()
                .orElseThrow(() -> new AssertionError("no " + type + " event that matches among " + events.size()
                        + " events: " + events.stream().map(e -> e.getEventType().getName()).distinct().toList()));
    }
}
