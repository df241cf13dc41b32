// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

/** AETH syndromes (IBA 9.7.5.1, table 47) and the RNR NAK timer table (IBA table 45). */
final class Aeth {
    /** ACK with "invalid credit count": rxe always sends 0x1F credits. */
    static final int ACK_UNLIMITED = 0x1F;
    static final int TYPE_MASK = 0xE0;
    static final int TYPE_ACK = 0x00;
    static final int TYPE_RNR_NAK = 0x20;
    static final int TYPE_NAK = 0x60;
    static final int NAK_PSN_SEQ_ERROR = 0x60;
    static final int NAK_INVALID_REQ = 0x61;
    static final int NAK_REM_ACC_ERR = 0x62;
    static final int NAK_REM_OP_ERR = 0x63;

    /** RNR NAK timer codes 0..31 in microseconds (IBA table 45; rxe's rnrnak_usec). */
    private static final long[] RNR_USEC = {
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920,
        2_560, 3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880,
        163_840, 245_760, 327_680, 491_520,
    };

    private Aeth() {
    }

    /** {@return the RNR delay for a 5-bit timer code, in nanoseconds} */
    static long rnrDelayNs(int code) {
        return RNR_USEC[code & 0x1F] * 1_000L;
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
