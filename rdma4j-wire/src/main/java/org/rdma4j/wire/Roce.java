// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

/** RoCEv2 constants (IBA Annex A17) and the UDP source port rxe picks per QP. */
public final class Roce {
    /** IANA UDP destination port of RoCEv2 (A17.4.2). */
    public static final int UDP_PORT = 4791;
    /** First UDP source port rxe uses (RXE_ROCE_V2_SPORT): the dynamic range 0xC000-0xFFFF gives ECMP/RSS entropy. */
    public static final int SOURCE_PORT_BASE = 0xC000;
    /** The Linux kernel's GOLDEN_RATIO_32 (include/linux/hash.h), the multiplier of hash_32. */
    private static final int GOLDEN_RATIO_32 = 0x61C88647;

    private Roce() {
    }

    /**
     * The UDP source port rxe gives a QP for its whole life (rxe_qp.c rxe_qp_init_req:
     * {@code RXE_ROCE_V2_SPORT + (hash_32(qp_num, 14) & 0x3fff)}, with the generic hash_32 of
     * include/linux/hash.h: {@code (val * GOLDEN_RATIO_32) >> (32 - bits)}). It does not depend on the peer.
     *
     * @param qpn the QP number (24 bits)
     * @return a port in 0xC000..0xFFFF
     */
    public static int sourcePort(int qpn) {
        return SOURCE_PORT_BASE + (hash32(qpn, 14) & 0x3FFF);
    }

    /**
     * {@return Linux's generic hash_32(value, bits): the top {@code bits} bits of value * GOLDEN_RATIO_32}
     *
     * @param value a 32-bit value
     * @param bits  1..32
     */
    public static int hash32(int value, int bits) {
        if (bits < 1 || bits > 32) {
            throw new IllegalArgumentException("bits must be 1..32, got " + bits);
        }
        return (value * GOLDEN_RATIO_32) >>> (32 - bits);
    }
}
