// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

/** The consumer of an IB CM ID's events ({@code ib_cm_handler}): rdma_cm, in this CM. CM lock held. */
@FunctionalInterface
interface IbCmHandler {
    /**
     * {@return 0, or a negative errno: the CM destroys the ID ({@code cm_process_work}); for a new request
     * -ENOMEM destroys it without rejecting, so a retransmitted REQ may succeed}
     *
     * @param id    the ID (for REQ_RECEIVED / SIDR_REQ_RECEIVED: the new ID of the request)
     * @param event what happened
     */
    int handle(IbCmId id, IbCmEvent event);
}
