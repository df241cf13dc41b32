// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/** Queue-pair states (ibv_qp_state), in their numeric order. */
public enum QpState {
    /** Reset: no work is processed, queues are empty. */
    RESET,
    /** Initialised: receives may be posted. */
    INIT,
    /** Ready to receive. */
    RTR,
    /** Ready to send. */
    RTS,
    /** Send queue drain. */
    SQD,
    /** Send queue error (UC/UD only). */
    SQE,
    /** Error: outstanding and new work requests complete with WR_FLUSH_ERR. */
    ERR
}
