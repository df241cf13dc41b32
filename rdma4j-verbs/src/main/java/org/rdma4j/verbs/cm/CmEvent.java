// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.cm;

import java.util.concurrent.atomic.AtomicBoolean;

import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.spi.CmEventInfo;

/**
 * One event of a CM ID ({@code struct rdma_cm_event}), taken from its {@link CmEventChannel}. Every
 * event taken must be acknowledged ({@link #ack()}, or {@link #close()} in try-with-resources): a CM ID
 * cannot be closed while events of it are unacknowledged, as {@code rdma_destroy_id} waits for
 * {@code rdma_ack_cm_event}. The data stay readable after the acknowledgement. Thread-safe.
 */
public final class CmEvent implements AutoCloseable {
    private final CmEventType type;
    private final CmId id;
    private final CmId listenId;
    private final int status;
    private final byte[] privateData;
    private final ConnParam connParam;
    private final UdParam udParam;
    private final String detail;
    private final AtomicBoolean acked = new AtomicBoolean();
    /** Set when taken from the channel: the ID whose unacknowledged count it is on. */
    private volatile CmId counted;

    CmEvent(CmId id, CmId listenId, CmEventInfo info) {
        this.type = info.type();
        this.id = id;
        this.listenId = listenId;
        this.status = info.status();
        this.privateData = info.privateData() == null ? new byte[0] : info.privateData().clone();
        this.connParam = info.connParam() == null ? null : info.connParam().copy();
        this.udParam = info.udParam();
        this.detail = info.detail();
    }

    /** {@return what happened} */
    public CmEventType type() {
        return type;
    }

    /** {@return the ID the event is about: for CONNECT_REQUEST the new ID of the request} */
    public CmId id() {
        return id;
    }

    /** {@return for CONNECT_REQUEST the listening ID, else null} */
    public CmId listenId() {
        return listenId;
    }

    /**
     * The event's status ({@code event->status}).
     *
     * @return 0 on success; a negative errno for ADDR_ERROR, ROUTE_ERROR, CONNECT_ERROR, UNREACHABLE after
     *         retries (-110) and DISCONNECTED after an unanswered DREQ (-110); the reject reason for
     *         REJECTED; the SIDR status for UNREACHABLE of a UD connect
     */
    public int status() {
        return status;
    }

    /** {@return the errno of a negative status, or null} */
    public Errno errno() {
        return status < 0 ? Errno.of(status) : null;
    }

    /** {@return the reject reason of a REJECTED event, or null} */
    public RejectReason rejectReason() {
        return type == CmEventType.REJECTED ? RejectReason.ofValue(status) : null;
    }

    /**
     * The private data, with rdma_cm's lengths: a CONNECT_REQUEST always has 56 bytes (92 of a UD one:
     * 180), ESTABLISHED on the active side 196, REJECTED 148, whatever the peer sent; the bytes past the
     * peer's data are zero. Applications carry their own length, as with rdma_cm.
     *
     * @return a copy (empty when the event has none)
     */
    public byte[] privateData() {
        return privateData.clone();
    }

    /** {@return the private data length} */
    public int privateDataLength() {
        return privateData.length;
    }

    /** {@return the peer's parameters from this side's point of view (connected IDs), or null} */
    public ConnParam connParam() {
        return connParam == null ? null : connParam.copy();
    }

    /** {@return the peer's UD address (ESTABLISHED of a UD ID), or null} */
    public UdParam udParam() {
        return udParam;
    }

    /** {@return a description for people (the reason, the addresses involved), or null} */
    public String detail() {
        return detail;
    }

    /**
     * rdma_ack_cm_event.
     *
     * @throws VerbsException EINVAL if it was acknowledged already
     */
    public void ack() {
        if (!acked.compareAndSet(false, true)) {
            throw new VerbsException(Errno.EINVAL, "rdma_ack_cm_event: " + type.rdmaName() + " was acknowledged already");
        }
        CmId c = counted;
        if (c != null) {
            c.eventAcked();
        }
    }

    /** {@return whether the event was acknowledged} */
    public boolean isAcked() {
        return acked.get();
    }

    /** Acknowledges the event unless it is already: for try-with-resources. */
    @Override
    public void close() {
        if (!acked.get()) {
            try {
                ack();
            } catch (VerbsException raced) {
                // another thread acknowledged it between the check and the ack: fine
            }
        }
    }

    /** Called when the channel hands the event out. */
    void taken(CmId countedOn) {
        counted = countedOn;
        countedOn.eventTaken();
    }

    /** {@return the ID this event counts against once taken (CONNECT_REQUEST: the listener)} */
    CmId owner() {
        return type == CmEventType.CONNECT_REQUEST && listenId != null ? listenId : id;
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder(type.rdmaName());
        sb.append(", status ").append(status);
        RejectReason r = rejectReason();
        if (r != null) {
            sb.append(" (").append(r.description()).append(')');
        } else if (errno() != null) {
            sb.append(" (").append(errno()).append(')');
        }
        if (detail != null) {
            sb.append(": ").append(detail);
        }
        return sb.toString();
    }
}
