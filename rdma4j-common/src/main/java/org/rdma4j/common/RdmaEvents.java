// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

/**
 * rdma4j's JDK Flight Recorder events, one emitting method per event. Every event is named
 * {@code org.rdma4j.*} and sits in the {@code rdma4j} category of JDK Mission Control; none takes a stack
 * trace (they come from the device engine, where the stack says nothing). Each method costs one check of
 * a flag when no recording takes the event, so it may sit on a per-packet path.
 *
 * <p>Record a run with {@code java -XX:StartFlightRecording=filename=run.jfr ...}, then
 * {@code jfr print --events 'org.rdma4j.*' run.jfr} or open the file in JDK Mission Control. Events:
 * <ul>
 * <li>{@code org.rdma4j.QpStateChange}: a QP moved to another state (by {@code modify}, or to ERR by an error);
 * <li>{@code org.rdma4j.Retransmit}: the requester went back and resent (a timeout or a NAK), one per retry;
 * <li>{@code org.rdma4j.RnrNak}: an RNR NAK arrived and the requester waits before resending;
 * <li>{@code org.rdma4j.PacketDrop}: a device dropped a packet, with the counter that counted it;
 * <li>{@code org.rdma4j.DmaCheckerReport}: the DMA checker found a misuse of the mapping API;
 * <li>{@code org.rdma4j.CmEvent}: a connection-management event was delivered to a CM ID.
 * </ul>
 * Thread-safe.
 */
public final class RdmaEvents {
    private RdmaEvents() {
    }

    @Name("org.rdma4j.QpStateChange")
    @Label("QP State Change")
    @Category("rdma4j")
    @Description("A queue pair moved to another state")
    @StackTrace(false)
    static final class QpStateChange extends Event {
        @Label("Device")
        String device;
        @Label("QP Number")
        int qpn;
        @Label("QP Type")
        String qpType;
        @Label("From")
        String from;
        @Label("To")
        String to;
        @Label("Cause")
        @Description("modify: the application's modify call; error: the device moved it (a completion error, a fatal event)")
        String cause;
    }

    @Name("org.rdma4j.Retransmit")
    @Label("Retransmission")
    @Category("rdma4j")
    @Description("The requester went back to an unacknowledged packet and resends from there")
    @StackTrace(false)
    static final class Retransmit extends Event {
        @Label("Device")
        String device;
        @Label("QP Number")
        int qpn;
        @Label("PSN")
        @Description("The PSN it resends from")
        int psn;
        @Label("Cause")
        @Description("What started the retry: TIMEOUT (the retransmit timer), SEQ_NAK, IMPLIED_NAK (a response past a gap)")
        String cause;
        @Label("Retries Left")
        @Description("retry_cnt left after this retry (7 retries forever, as rxe does)")
        int retriesLeft;
    }

    @Name("org.rdma4j.RnrNak")
    @Label("RNR NAK")
    @Category("rdma4j")
    @Description("The responder had no receive WQE: the requester waits the RNR timer, then resends")
    @StackTrace(false)
    static final class RnrNak extends Event {
        @Label("Device")
        String device;
        @Label("QP Number")
        int qpn;
        @Label("PSN")
        int psn;
        @Label("Wait (ns)")
        long waitNs;
        @Label("Retries Left")
        @Description("rnr_retry left after this NAK (7 retries forever)")
        int retriesLeft;
    }

    @Name("org.rdma4j.PacketDrop")
    @Label("Packet Drop")
    @Category("rdma4j")
    @Description("A device dropped a packet; the reason is the counter that counted it")
    @StackTrace(false)
    static final class PacketDrop extends Event {
        @Label("Device")
        String device;
        @Label("Reason")
        String reason;
    }

    @Name("org.rdma4j.DmaCheckerReport")
    @Label("DMA Checker Report")
    @Category("rdma4j")
    @Description("The DMA checker found a misuse of the DMA-mapping API")
    @StackTrace(false)
    static final class DmaCheckerReport extends Event {
        @Label("Kind")
        String kind;
        @Label("Message")
        String message;
    }

    @Name("org.rdma4j.CmEvent")
    @Label("CM Event")
    @Category("rdma4j")
    @Description("A connection-management event delivered to a CM ID (rdma_cm_event)")
    @StackTrace(false)
    static final class CmEvent extends Event {
        @Label("Device")
        String device;
        @Label("Event")
        @Description("The rdma_cm event type, e.g. CONNECT_REQUEST, ESTABLISHED, REJECTED, DISCONNECTED")
        String event;
        @Label("Local Address")
        String local;
        @Label("Remote Address")
        String remote;
        @Label("QP Number")
        int qpn;
        @Label("Status")
        @Description("0, or the event's status (an errno or a reject reason)")
        int status;
    }

    /**
     * Records a QP state change.
     *
     * @param device the device's name
     * @param qpn    the QP number
     * @param qpType RC, UC, UD, ...
     * @param from   the state it left
     * @param to     the state it entered
     * @param cause  {@code modify} or {@code error}
     */
    public static void qpStateChange(String device, int qpn, Object qpType, Object from, Object to, String cause) {
        QpStateChange e = new QpStateChange();
        if (e.shouldCommit()) {
            e.device = device;
            e.qpn = qpn;
            e.qpType = String.valueOf(qpType);
            e.from = String.valueOf(from);
            e.to = String.valueOf(to);
            e.cause = cause;
            e.commit();
        }
    }

    /**
     * Records a retransmission (one retry of the requester).
     *
     * @param device      the device's name
     * @param qpn         the QP number
     * @param psn         the PSN it resends from
     * @param cause       what started it: TIMEOUT, SEQ_NAK or IMPLIED_NAK
     * @param retriesLeft retry_cnt left
     */
    public static void retransmit(String device, int qpn, int psn, String cause, int retriesLeft) {
        Retransmit e = new Retransmit();
        if (e.shouldCommit()) {
            e.device = device;
            e.qpn = qpn;
            e.psn = psn;
            e.cause = cause;
            e.retriesLeft = retriesLeft;
            e.commit();
        }
    }

    /**
     * Records an RNR NAK received by a requester.
     *
     * @param device      the device's name
     * @param qpn         the QP number
     * @param psn         the NAKed PSN
     * @param waitNs      the RNR timer it waits before resending
     * @param retriesLeft rnr_retry left
     */
    public static void rnrNak(String device, int qpn, int psn, long waitNs, int retriesLeft) {
        RnrNak e = new RnrNak();
        if (e.shouldCommit()) {
            e.device = device;
            e.qpn = qpn;
            e.psn = psn;
            e.waitNs = waitNs;
            e.retriesLeft = retriesLeft;
            e.commit();
        }
    }

    /**
     * Records a dropped packet.
     *
     * @param device the device's name
     * @param reason the name of the counter that counted the drop
     */
    public static void packetDrop(String device, String reason) {
        PacketDrop e = new PacketDrop();
        if (e.shouldCommit()) {
            e.device = device;
            e.reason = reason;
            e.commit();
        }
    }

    /**
     * Records a DMA-checker report.
     *
     * @param kind    the kind of misuse
     * @param message the report's first line
     */
    public static void dmaCheckerReport(String kind, String message) {
        DmaCheckerReport e = new DmaCheckerReport();
        if (e.shouldCommit()) {
            e.kind = kind;
            e.message = message;
            e.commit();
        }
    }

    /**
     * Records a connection-management event.
     *
     * @param device the device's name, or null before the CM ID is bound to one
     * @param event  the rdma_cm event type
     * @param local  the local address, or null
     * @param remote the remote address, or null
     * @param qpn    the QP number, or 0
     * @param status 0, or the event's status
     */
    public static void cmEvent(String device, String event, String local, String remote, int qpn, int status) {
        CmEvent e = new CmEvent();
        if (e.shouldCommit()) {
            e.device = device;
            e.event = event;
            e.local = local;
            e.remote = remote;
            e.qpn = qpn;
            e.status = status;
            e.commit();
        }
    }
}
