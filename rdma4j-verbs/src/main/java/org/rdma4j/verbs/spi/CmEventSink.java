// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.spi;

/**
 * The front's end of a provider CM ID: where the provider reports the ID's events. Each call returns
 * quickly (it queues the event on the ID's event channel); it may be called from any thread, but for
 * one ID in the order the events happened.
 */
public interface CmEventSink {
    /**
     * Reports an event of the ID this sink belongs to.
     *
     * @param event the event
     */
    void post(CmEventInfo event);

    /**
     * Reports a connection request on a listening ID: the provider has made {@code newId} for the
     * request (its remote address, route and context known), and the front makes it a
     * {@link org.rdma4j.verbs.cm.CmId} on the listener's channel and queues a
     * {@link org.rdma4j.verbs.cm.CmEventType#CONNECT_REQUEST}.
     *
     * @param newId the provider's ID for the request
     * @param event the CONNECT_REQUEST event (private data, the peer's parameters)
     * @return the sink of the new ID, or null when the listener's backlog is full or it is closing: the
     *         provider then drops the request without an answer and closes {@code newId}, as Linux does
     *         (ucma_connect_event_handler fails with -ENOMEM, and cm_destroy_id does not reject a REQ_RCVD
     *         ID for -ENOMEM "to allow future retries": the peer's retransmitted REQ may find room)
     */
    CmEventSink connectRequest(CmIdSpi newId, CmEventInfo event);
}
