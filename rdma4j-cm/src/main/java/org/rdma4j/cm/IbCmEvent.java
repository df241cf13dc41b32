// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

/**
 * An IB CM event ({@code struct ib_cm_event}): its type, the received MAD it came from (the consumer reads
 * the fields it needs with {@link CmMsg}'s offsets) and, for requests, the listener.
 *
 * @param type     the event
 * @param recv     the MAD that caused it, or null (timeouts, TIMEWAIT exit, user establishment)
 * @param listenId for REQ_RECEIVED and SIDR_REQ_RECEIVED: the listener it matched
 */
record IbCmEvent(Type type, MadRecv recv, IbCmId listenId) {
    /** {@code enum ib_cm_event_type}. */
    enum Type {
        REQ_ERROR, REQ_RECEIVED, REP_ERROR, REP_RECEIVED, RTU_RECEIVED, USER_ESTABLISHED, DREQ_ERROR, DREQ_RECEIVED,
        DREP_RECEIVED, TIMEWAIT_EXIT, MRA_RECEIVED, REJ_RECEIVED, SIDR_REQ_ERROR, SIDR_REQ_RECEIVED, SIDR_REP_RECEIVED
    }

    static IbCmEvent of(Type type, MadRecv recv) {
        return new IbCmEvent(type, recv, null);
    }

    /** {@return the received MAD's bytes} */
    byte[] mad() {
        return recv.mad();
    }
}
