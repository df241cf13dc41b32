// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/** Asynchronous event types (ibv_event_type) delivered through {@link Context#getAsyncEvent}. */
public enum AsyncEventType {
    /** A CQ overran: a completion was lost. */
    CQ_ERR,
    /**
     * A QP hit an error that no completion can report (e.g. a completion lost to a full CQ) and is in
     * the error state. Errors reported by a completion status raise no event (as on rxe).
     */
    QP_FATAL,
    /** An invalid request arrived at a QP. */
    QP_REQ_ERR,
    /** A local access violation at a QP. */
    QP_ACCESS_ERR,
    /** Communication established (first packet received in RTR). */
    COMM_EST,
    /** The send queue drained (SQD). */
    SQ_DRAINED,
    /** Path migrated. */
    PATH_MIG,
    /** Path migration failed. */
    PATH_MIG_ERR,
    /** Device fatal error. */
    DEVICE_FATAL,
    /** A port became active. */
    PORT_ACTIVE,
    /** A port went down. */
    PORT_ERR,
    /** LID changed. */
    LID_CHANGE,
    /** P_Key table changed. */
    PKEY_CHANGE,
    /** SM changed. */
    SM_CHANGE,
    /** An SRQ fell below its armed limit (fires once, then must be re-armed). */
    SRQ_LIMIT_REACHED,
    /** An SRQ error. */
    SRQ_ERR,
    /** A QP on an SRQ in the error state will see no more receive completions. */
    QP_LAST_WQE_REACHED,
    /** Client re-registration requested. */
    CLIENT_REREGISTER,
    /** GID table changed. */
    GID_CHANGE
}
