// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.cm;

/**
 * IB CM reject reasons ({@code enum ib_cm_rej_reason}, IBA vol 1 table 112), carried in a REJ and
 * reported as the status of a {@link CmEventType#REJECTED} event. The descriptions are the strings
 * {@code rdma_reject_msg} prints (Linux cm.c {@code ibcm_rej_reason_strs}).
 */
public enum RejectReason {
    /** 1. */
    NO_QP(1, "no QP"),
    /** 2. */
    NO_EEC(2, "no EEC"),
    /** 3. */
    NO_RESOURCES(3, "no resources"),
    /** 4: the active side gave up (its ID was destroyed while the REQ was outstanding). */
    TIMEOUT(4, "timeout"),
    /** 5. */
    UNSUPPORTED(5, "unsupported"),
    /** 6. */
    INVALID_COMM_ID(6, "invalid comm ID"),
    /** 7. */
    INVALID_COMM_INSTANCE(7, "invalid comm instance"),
    /** 8: nobody listens on the service ID (no IB CM listener for the port). */
    INVALID_SERVICE_ID(8, "invalid service ID"),
    /** 9. */
    INVALID_TRANSPORT_TYPE(9, "invalid transport type"),
    /** 10: the peer still holds a connection from this CA GUID and QP number (it sends a DREQ on it too). */
    STALE_CONN(10, "stale conn"),
    /** 11. */
    RDC_NOT_EXIST(11, "RDC not exist"),
    /** 12: the passive side cannot reach the GID the REQ gives. */
    INVALID_GID(12, "invalid GID"),
    /** 13. */
    INVALID_LID(13, "invalid LID"),
    /** 14. */
    INVALID_SL(14, "invalid SL"),
    /** 15. */
    INVALID_TRAFFIC_CLASS(15, "invalid traffic class"),
    /** 16. */
    INVALID_HOP_LIMIT(16, "invalid hop limit"),
    /** 17. */
    INVALID_PACKET_RATE(17, "invalid packet rate"),
    /** 18. */
    INVALID_ALT_GID(18, "invalid alt GID"),
    /** 19. */
    INVALID_ALT_LID(19, "invalid alt LID"),
    /** 20. */
    INVALID_ALT_SL(20, "invalid alt SL"),
    /** 21. */
    INVALID_ALT_TRAFFIC_CLASS(21, "invalid alt traffic class"),
    /** 22. */
    INVALID_ALT_HOP_LIMIT(22, "invalid alt hop limit"),
    /** 23. */
    INVALID_ALT_PACKET_RATE(23, "invalid alt packet rate"),
    /** 24. */
    PORT_CM_REDIRECT(24, "port CM redirect"),
    /** 25. */
    PORT_REDIRECT(25, "port redirect"),
    /** 26. */
    INVALID_MTU(26, "invalid MTU"),
    /** 27. */
    INSUFFICIENT_RESP_RESOURCES(27, "insufficient resp resources"),
    /**
     * 28: everything rdma_cm itself decides: the application rejected ({@link CmId#reject}), no rdma_cm
     * listener matched the address, the QP type did not match, an accept failed.
     */
    CONSUMER_DEFINED(28, "consumer defined"),
    /** 29. */
    INVALID_RNR_RETRY(29, "invalid RNR retry"),
    /** 30. */
    DUPLICATE_LOCAL_COMM_ID(30, "duplicate local comm ID"),
    /** 31. */
    INVALID_CLASS_VERSION(31, "invalid class version"),
    /** 32. */
    INVALID_FLOW_LABEL(32, "invalid flow label"),
    /** 33. */
    INVALID_ALT_FLOW_LABEL(33, "invalid alt flow label"),
    /** 35: ECE options the passive side does not support ({@code rdma_reject_ece}). */
    VENDOR_OPTION_NOT_SUPPORTED(35, "vendor option is not supported");

    private final int value;
    private final String description;

    RejectReason(int value, String description) {
        this.value = value;
        this.description = description;
    }

    /** {@return the reason number on the wire} */
    public int value() {
        return value;
    }

    /** {@return the text {@code rdma_reject_msg} gives} */
    public String description() {
        return description;
    }

    /**
     * The reason of a number.
     *
     * @param value a reason number
     * @return the reason, or null for a number IBA does not define
     */
    public static RejectReason ofValue(int value) {
        for (RejectReason r : values()) {
            if (r.value == value) {
                return r;
            }
        }
        return null;
    }
}
