// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.spi;

import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.UdParam;

/**
 * What a provider reports about one event of one of its CM IDs ({@code struct rdma_cm_event} without the
 * IDs, which the front fills in).
 *
 * @param type        the event
 * @param status      0, a negative errno (ADDR_ERROR, ROUTE_ERROR, UNREACHABLE, CONNECT_ERROR,
 *                    DISCONNECTED after a DREQ timeout), the reject reason (REJECTED) or a SIDR status
 *                    (UNREACHABLE of a UD connect)
 * @param privateData the event's private data with rdma_cm's length (CONNECT_REQUEST 56, ESTABLISHED of
 *                    the active side 196, REJECTED 148, ...), or null for none
 * @param connParam   the peer's connection parameters from this side's point of view (CONNECT_REQUEST,
 *                    ESTABLISHED, CONNECT_RESPONSE of connected IDs), or null
 * @param udParam     the peer's UD address (ESTABLISHED of a UD ID), or null
 * @param detail      what happened, for people (a reason, the addresses involved, what to do), or null
 */
public record CmEventInfo(CmEventType type, int status, byte[] privateData, ConnParam connParam, UdParam udParam,
                          String detail) {
    /**
     * An event without private data or parameters.
     *
     * @param type   the event
     * @param status its status
     * @param detail a message, or null
     * @return an event without private data or parameters
     */
    public static CmEventInfo of(CmEventType type, int status, String detail) {
        return new CmEventInfo(type, status, null, null, null, detail);
    }
}
