// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.cm;

/** rdma_cm event types ({@code enum rdma_cm_event_type}), with librdmacm's numbers. */
public enum CmEventType {
    /** {@link CmId#resolveAddr} finished: the ID now knows its device ({@link CmId#context()}). */
    ADDR_RESOLVED(0),
    /** Address resolution failed; {@link CmEvent#status()} is a negative errno. */
    ADDR_ERROR(1),
    /** {@link CmId#resolveRoute} finished: {@link CmId#route()} is set. */
    ROUTE_RESOLVED(2),
    /** Route resolution failed; negative errno in the status. */
    ROUTE_ERROR(3),
    /** A peer asks to connect: {@link CmEvent#id()} is a new ID for it, {@link CmEvent#listenId()} the listener. */
    CONNECT_REQUEST(4),
    /**
     * The passive side answered, for IDs without a QP of their own (librdmacm reports this instead of
     * ESTABLISHED when {@code id->qp} is null: the application moves its QP itself and calls
     * {@link CmId#establish()}).
     */
    CONNECT_RESPONSE(5),
    /** The connection could not be set up after the peer answered (e.g. a QP transition failed). */
    CONNECT_ERROR(6),
    /** The peer is unreachable: no answer after the CM's retries (status -110), or a SIDR status. */
    UNREACHABLE(7),
    /** The peer rejected: status is the IB CM reject reason ({@link RejectReason}), private data the REJ's. */
    REJECTED(8),
    /** The connection is up (ESTABLISHED after RTU on the passive side, after REP on the active side). */
    ESTABLISHED(9),
    /** The connection is down: a DREQ or DREP arrived, or the DREQ went unanswered (status -110). */
    DISCONNECTED(10),
    /** The device of the ID went away; close the ID. */
    DEVICE_REMOVAL(11),
    /** A multicast join finished. */
    MULTICAST_JOIN(12),
    /** A multicast join failed. */
    MULTICAST_ERROR(13),
    /** The address of the ID's device changed. */
    ADDR_CHANGE(14),
    /** The connection left TIMEWAIT: its QP number may be reused towards the peer. */
    TIMEWAIT_EXIT(15);

    private final int value;

    CmEventType(int value) {
        this.value = value;
    }

    /** {@return librdmacm's number (RDMA_CM_EVENT_*)} */
    public int value() {
        return value;
    }

    /**
     * The type of a librdmacm event number.
     *
     * @param value an RDMA_CM_EVENT_* number
     * @return the type, or null for a number this enum does not know
     */
    public static CmEventType ofValue(int value) {
        for (CmEventType t : values()) {
            if (t.value == value) {
                return t;
            }
        }
        return null;
    }

    /** {@return librdmacm's name, as {@code rdma_event_str} prints it (e.g. RDMA_CM_EVENT_ESTABLISHED)} */
    public String rdmaName() {
        return "RDMA_CM_EVENT_" + name();
    }
}
