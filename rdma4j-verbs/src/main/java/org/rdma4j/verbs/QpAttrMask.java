// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/**
 * Queue-pair attribute mask bits (ibv_qp_attr_mask); the ordinal is the bit number. {@link QpAttributes}
 * sets a bit for every attribute given a value.
 */
public enum QpAttrMask {
    /** Next state. */
    STATE,
    /** Current state, as the caller believes it to be. */
    CUR_STATE,
    /** Enable the SQ-drained async event. */
    EN_SQD_ASYNC_NOTIFY,
    /** Remote access flags of the QP. */
    ACCESS_FLAGS,
    /** P_Key index. */
    PKEY_INDEX,
    /** Port number. */
    PORT,
    /** Q_Key (UD). */
    QKEY,
    /** Primary address vector. */
    AV,
    /** Path MTU. */
    PATH_MTU,
    /** Local ACK timeout. */
    TIMEOUT,
    /** Transport retry count. */
    RETRY_CNT,
    /** RNR retry count. */
    RNR_RETRY,
    /** Receive PSN. */
    RQ_PSN,
    /** Outstanding RDMA READ/atomic requests as initiator. */
    MAX_QP_RD_ATOMIC,
    /** Alternate path. */
    ALT_PATH,
    /** Minimum RNR NAK timer. */
    MIN_RNR_TIMER,
    /** Send PSN. */
    SQ_PSN,
    /** Outstanding RDMA READ/atomic requests as responder. */
    MAX_DEST_RD_ATOMIC,
    /** Path migration state. */
    PATH_MIG_STATE,
    /** Capabilities. */
    CAP,
    /** Destination QP number. */
    DEST_QPN;

    /** {@return the ibv_qp_attr_mask bit} */
    public int bit() {
        return 1 << ordinal();
    }

    /**
     * {@return the names of the bits set, for error messages}
     *
     * @param mask a bit mask
     */
    public static String describe(int mask) {
        StringBuilder sb = new StringBuilder();
        for (QpAttrMask m : values()) {
            if ((mask & m.bit()) != 0) {
                if (!sb.isEmpty()) {
                    sb.append('|');
                }
                sb.append(m.name());
            }
        }
        return sb.isEmpty() ? "none" : sb.toString();
    }
}
