// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.cm;

import java.io.Serial;

import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;

/**
 * A connection that did not come up ({@link RdmaEndpoint#connect}): the peer rejected it (ECONNREFUSED,
 * with the reject reason and the peer's private data), did not answer (ETIMEDOUT, EHOSTUNREACH), or
 * the address could not be resolved (the errno of ADDR_ERROR / ROUTE_ERROR).
 */
public final class RdmaConnectException extends VerbsException {
    @Serial
    private static final long serialVersionUID = 1L;

    /** The event that ended the attempt. */
    private final transient CmEventType event;
    /** Its status. */
    private final int status;
    /** The peer's private data. */
    private final byte[] privateData;

    /**
     * A failed connection attempt.
     *
     * @param errno       what it means in errno terms
     * @param message     what happened and what to do
     * @param event       the CM event that ended the attempt, or null (deadline)
     * @param status      that event's status
     * @param privateData the peer's private data (a REJ's), or empty
     */
    public RdmaConnectException(Errno errno, String message, CmEventType event, int status, byte[] privateData) {
        super(errno, message);
        this.event = event;
        this.status = status;
        this.privateData = privateData == null ? new byte[0] : privateData.clone();
    }

    /** {@return the event that ended the attempt (REJECTED, UNREACHABLE, ...), or null when the deadline passed} */
    public CmEventType event() {
        return event;
    }

    /** {@return the event's status (the reject reason of REJECTED)} */
    public int status() {
        return status;
    }

    /** {@return the reject reason, or null} */
    public RejectReason rejectReason() {
        return event == CmEventType.REJECTED ? RejectReason.ofValue(status) : null;
    }

    /** {@return the peer's private data (148 bytes with a REJ), or empty} */
    public byte[] privateData() {
        return privateData.clone();
    }
}
