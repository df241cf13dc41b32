// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

/**
 * The engine's names for AETH syndromes, which are {@link org.rdma4j.wire.Aeth}'s (one vocabulary: whole
 * syndromes named as rxe_hdr.h names them, and the RNR timer table). Aliases kept while the engine's roles
 * move onto the wire class directly; the retransmit timeout is a QP timer, not an AETH field.
 */
final class Aeth {
    static final int ACK_UNLIMITED = org.rdma4j.wire.Aeth.ACK_UNLIMITED;
    static final int TYPE_MASK = org.rdma4j.wire.Aeth.TYPE_MASK;
    static final int TYPE_ACK = org.rdma4j.wire.Aeth.TYPE_ACK;
    static final int TYPE_RNR_NAK = org.rdma4j.wire.Aeth.TYPE_RNR_NAK;
    static final int TYPE_NAK = org.rdma4j.wire.Aeth.TYPE_NAK;
    static final int NAK_PSN_SEQ_ERROR = org.rdma4j.wire.Aeth.NAK_PSN_SEQ_ERROR;
    static final int NAK_INVALID_REQ = org.rdma4j.wire.Aeth.NAK_INVALID_REQ;
    static final int NAK_REM_ACC_ERR = org.rdma4j.wire.Aeth.NAK_REM_ACC_ERR;
    static final int NAK_REM_OP_ERR = org.rdma4j.wire.Aeth.NAK_REM_OP_ERR;

    private Aeth() {
    }

    /** {@return the RNR delay for a 5-bit timer code, in nanoseconds (IBA table 45)} */
    static long rnrDelayNs(int code) {
        return org.rdma4j.wire.Aeth.rnrTimerNs(code);
    }

    /**
     * {@return 4.096 µs · 2^timeout in nanoseconds (IBA 9.7.6.1.3), or 0 for "infinite" (timeout 0)}
     *
     * @param timeout the QP's local ACK timeout exponent
     */
    static long retransmitTimeoutNs(int timeout) {
        if (timeout == 0) {
            return 0;
        }
        return 4_096L << timeout;
    }
}
