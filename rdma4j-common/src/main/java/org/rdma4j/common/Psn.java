// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common;

/** 24-bit packet sequence number arithmetic (IBA 9.7.1: PSNs wrap modulo 2^24). */
public final class Psn {
    /** PSN mask. */
    public static final int MASK = 0xFF_FFFF;

    private Psn() {
    }

    /**
     * {@return negative, zero or positive as a is before, equal to or after b in the 2^23 window (rxe's
     * psn_compare)}
     *
     * @param a a PSN
     * @param b a PSN
     */
    public static int compare(int a, int b) {
        return ((a - b) << 8) >> 8;
    }

    /**
     * {@return psn + n modulo 2^24}
     *
     * @param psn a PSN
     * @param n   increment
     */
    public static int add(int psn, int n) {
        return (psn + n) & MASK;
    }
}
