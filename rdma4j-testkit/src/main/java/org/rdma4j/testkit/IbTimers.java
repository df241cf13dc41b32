// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit;

/** The IBA timer encodings tests need to advance a {@link org.rdma4j.common.ManualClock} correctly. */
public final class IbTimers {
    /** IBA table 45 (RNR NAK timer field), in nanoseconds; code 0 is the longest, 655.36 ms. */
    private static final long[] RNR_NS = {
        655_360_000L, 10_000L, 20_000L, 30_000L, 40_000L, 60_000L, 80_000L, 120_000L,
        160_000L, 240_000L, 320_000L, 480_000L, 640_000L, 960_000L, 1_280_000L, 1_920_000L,
        2_560_000L, 3_840_000L, 5_120_000L, 7_680_000L, 10_240_000L, 15_360_000L, 20_480_000L, 30_720_000L,
        40_960_000L, 61_440_000L, 81_920_000L, 122_880_000L, 163_840_000L, 245_760_000L, 327_680_000L, 491_520_000L,
    };

    private IbTimers() {
    }

    /**
     * {@return the RNR NAK delay in nanoseconds (IBA table 45)}
     *
     * @param code RNR timer code 0..31 (min_rnr_timer)
     */
    public static long rnrTimerNs(int code) {
        if (code < 0 || code > 31) {
            throw new IllegalArgumentException("rnr timer code " + code + " (expected 0..31)");
        }
        return RNR_NS[code];
    }

    /**
     * {@return 4.096 µs · 2^timeout in nanoseconds (rxe: {@code 4096 << timeout} ns)}
     *
     * @param timeout local ACK timeout exponent 1..31
     */
    public static long ackTimeoutNs(int timeout) {
        if (timeout < 1 || timeout > 31) {
            throw new IllegalArgumentException("timeout " + timeout + " (expected 1..31; 0 = infinite)");
        }
        return 4096L << timeout;
    }
}
