// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

/**
 * The states of the {@link Completer}, named after rxe's {@code enum comp_state} (rxe_comp.c, Linux 6.1;
 * {@code COMPST_GET_ACK} is {@link #GET_ACK}, and so on). Each step of the completer returns the next state; its
 * loop enters them one by one and tells the QP's {@link StateTrace}, as rxe_completer's loop prints each with
 * {@code pr_debug("qp#%d state = %s")}. Where a transition differs from rxe's, the step says so.
 */
enum CompState {
    /** Take the response to handle, if any (rxe: dequeue from resp_pkts and clear comp.timeout_retry). */
    GET_ACK,
    /** Find the oldest WQE the requester has started (rxe get_wqe). */
    GET_WQE,
    /** Complete a WQE that a later PSN acknowledges, then look at the next one (rxe complete_wqe). */
    COMP_WQE,
    /** Complete the WQE the response ends (rxe complete_ack). */
    COMP_ACK,
    /** Place the response's PSN against the WQE and comp.psn (rxe check_psn). */
    CHECK_PSN,
    /** Check the response's opcode and syndrome against the WQE (rxe check_ack). */
    CHECK_ACK,
    /** Scatter an RDMA READ response into the WQE's SGEs (rxe do_read). */
    READ,
    /** Write an atomic's original value into the WQE's SGEs (rxe do_atomic). */
    ATOMIC,
    /** An ACK for a SEND or RDMA WRITE: does it end the WQE? (rxe COMPST_WRITE_SEND). */
    WRITE_SEND,
    /** Move comp.psn past the response (rxe COMPST_UPDATE_COMP). */
    UPDATE_COMP,
    /** A timeout, a sequence NAK or an implied NAK: retry or fail the WQE (rxe COMPST_ERROR_RETRY). */
    ERROR_RETRY,
    /** An RNR NAK: wait and retry, or fail the WQE (rxe COMPST_RNR_RETRY). */
    RNR_RETRY,
    /** Complete the WQE in error and move the QP to ERR (rxe COMPST_ERROR). */
    ERROR,
    /** No response to handle: only the retransmit timer runs the completer so (rxe COMPST_EXIT). */
    EXIT,
    /** The response is handled (rxe COMPST_DONE). */
    DONE
}
