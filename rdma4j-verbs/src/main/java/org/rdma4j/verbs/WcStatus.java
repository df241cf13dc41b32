// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/**
 * Work-completion status (ibv_wc_status), in rdma-core's numeric order, with the strings
 * {@code ibv_wc_status_str} prints.
 */
public enum WcStatus {
    /** The operation completed successfully. */
    SUCCESS("success"),
    /** Local length error: message too long for the buffer, the port or the operation. */
    LOC_LEN_ERR("local length error"),
    /** Local QP operation error: internal consistency error in the work request. */
    LOC_QP_OP_ERR("local QP operation error"),
    /** Local EE context operation error (RD only, unused). */
    LOC_EEC_OP_ERR("local EE context operation error"),
    /** Local protection error: a local SGE is not within a valid MR for the operation. */
    LOC_PROT_ERR("local protection error"),
    /** Work request flushed because the QP entered the error state. */
    WR_FLUSH_ERR("Work Request Flushed Error"),
    /** Memory window bind error. */
    MW_BIND_ERR("memory management operation error"),
    /** Bad response error: unexpected transport opcode in a response. */
    BAD_RESP_ERR("bad response error"),
    /** Local access error: a protection error on the responder's local data buffer. */
    LOC_ACCESS_ERR("local access error"),
    /** Remote invalid request error. */
    REM_INV_REQ_ERR("remote invalid request error"),
    /** Remote access error: R_Key, range or permission failure at the responder. */
    REM_ACCESS_ERR("remote access error"),
    /** Remote operation error: the responder could not complete the operation. */
    REM_OP_ERR("remote operation error"),
    /** Transport retry counter exceeded. */
    RETRY_EXC_ERR("transport retry counter exceeded"),
    /** RNR retry counter exceeded. */
    RNR_RETRY_EXC_ERR("RNR retry counter exceeded"),
    /** Local RDD violation (RD only). */
    LOC_RDD_VIOL_ERR("local RDD violation error"),
    /** Remote invalid RD request (RD only). */
    REM_INV_RD_REQ_ERR("remote invalid RD request"),
    /** Remote aborted. */
    REM_ABORT_ERR("aborted error"),
    /** Invalid EE context number (RD only). */
    INV_EECN_ERR("invalid EE context number"),
    /** Invalid EE context state (RD only). */
    INV_EEC_STATE_ERR("invalid EE context state"),
    /** Fatal error. */
    FATAL_ERR("fatal error"),
    /** Response timeout. */
    RESP_TIMEOUT_ERR("response timeout error"),
    /** General error. */
    GENERAL_ERR("general error");

    private static final WcStatus[] VALUES = values();
    private final String description;

    WcStatus(String description) {
        this.description = description;
    }

    /** {@return the ibv_wc_status numeric value} */
    public int value() {
        return ordinal();
    }

    /** {@return the text ibv_wc_status_str returns} */
    public String description() {
        return description;
    }

    /**
     * {@return the status}
     *
     * @param value ibv_wc_status numeric value
     */
    public static WcStatus ofValue(int value) {
        return VALUES[value];
    }
}
