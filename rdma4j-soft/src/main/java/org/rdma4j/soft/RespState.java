// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

/**
 * The states of the responder's request path ({@link Responder#onRequest}), named after rxe's
 * {@code enum resp_states} in {@code rxe_resp.c} (without the {@code RESPST_} prefix): only those this responder
 * enters. Each step of {@link Responder} returns the next one, as each function of rxe_responder()'s loop does;
 * where the transitions differ from rxe's, the step says so. A QP's {@link StateTrace} sees each state entered.
 *
 * <p>Not entered: {@code NONE}, {@code ATOMIC_WRITE_REPLY} (no ATOMIC WRITE opcode here),
 * {@code ERR_INVALIDATE_RKEY} (no SEND with Invalidate), {@code RESET} (rxe_responder run for a QP in RESET) and
 * {@code EXIT} (get_req finding no packet): here a request is handed in, and one for a QP in RESET, INIT or ERR is
 * dropped before the loop, as rxe's check_type_state (from rxe_rcv) drops a request unless resp.state is READY.
 */
enum RespState {
    /** A request to handle: a new one, or one held out of sequence whose turn came (rxe get_req). */
    GET_REQ,
    /** The PSN against ePSN: in sequence, duplicate, or ahead (rxe check_psn). */
    CHK_PSN,
    /** The opcode against the message in progress (rxe check_op_seq). */
    CHK_OP_SEQ,
    /** The QP enables the remote operation (rxe check_op_valid). */
    CHK_OP_VALID,
    /** A receive WQE for a SEND, responder resources for a READ or an atomic (rxe check_resource). */
    CHK_RESOURCE,
    /** The payload against the path MTU, the RETH length against 2^31 (rxe check_length). */
    CHK_LENGTH,
    /** The R_Key, its region and range, for an RDMA WRITE, READ or atomic (rxe check_rkey). */
    CHK_RKEY,
    /** Places the data of a SEND or WRITE; a READ or an atomic goes on to its reply (rxe execute). */
    EXECUTE,
    /** Sends an RDMA READ's responses, or replays them for a duplicate (rxe read_reply). */
    READ_REPLY,
    /** Executes an atomic, or takes the cached result for a duplicate (rxe atomic_reply). */
    ATOMIC_REPLY,
    /** Completes the receive WQE, with success or the error's status (rxe do_complete). */
    COMPLETE,
    /** An RC request's ACK, atomic ACK or NAK (rxe acknowledge). */
    ACKNOWLEDGE,
    /** The request is done with (rxe cleanup). */
    CLEANUP,
    /** A request behind ePSN: acknowledged again or replayed (rxe duplicate_request). */
    DUPLICATE_REQUEST,
    /** The receive WQE cannot take the data: class A (rxe RESPST_ERR_MALFORMED_WQE). */
    ERR_MALFORMED_WQE,
    /** The QP does not enable the remote operation: class C (rxe RESPST_ERR_UNSUPPORTED_OPCODE). */
    ERR_UNSUPPORTED_OPCODE,
    /** An atomic's address is not 8-aligned: class C (rxe RESPST_ERR_MISALIGNED_ATOMIC). */
    ERR_MISALIGNED_ATOMIC,
    /** A request ahead of ePSN: class B (rxe RESPST_ERR_PSN_OUT_OF_SEQ); held here (docs/roce.md "Loss recovery"). */
    ERR_PSN_OUT_OF_SEQ,
    /** A MIDDLE or LAST without a FIRST on RC: class C (rxe RESPST_ERR_MISSING_OPCODE_FIRST). */
    ERR_MISSING_OPCODE_FIRST,
    /** A message in progress interrupted on RC: class C (rxe RESPST_ERR_MISSING_OPCODE_LAST_C). */
    ERR_MISSING_OPCODE_LAST_C,
    /** A message in progress interrupted on UC: class D1 (rxe RESPST_ERR_MISSING_OPCODE_LAST_D1E). */
    ERR_MISSING_OPCODE_LAST_D1E,
    /** A READ or an atomic with max_dest_rd_atomic 0: class C (rxe RESPST_ERR_TOO_MANY_RDMA_ATM_REQ). */
    ERR_TOO_MANY_RDMA_ATM_REQ,
    /** No receive WQE: an RNR NAK on RC, a drop on UC and UD (rxe RESPST_ERR_RNR). */
    ERR_RNR,
    /** The R_Key or its range does not allow the access (rxe RESPST_ERR_RKEY_VIOLATION). */
    ERR_RKEY_VIOLATION,
    /** A length error (rxe RESPST_ERR_LENGTH). */
    ERR_LENGTH,
    /** The receive CQ is full: class G (rxe RESPST_ERR_CQ_OVERFLOW). */
    ERR_CQ_OVERFLOW,
    /** The QP goes to ERR (rxe RESPST_ERROR). */
    ERROR,
    /** The request is finished with; an error class that needs it goes on to {@link #ERROR} (rxe RESPST_DONE). */
    DONE
}
