// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.cm;

/**
 * An option of a CM ID ({@code rdma_set_option}), typed as {@link java.net.SocketOption} is: set with
 * {@link CmId#setOption}. The first four are librdmacm's ({@code RDMA_OPTION_ID_*}, level
 * {@code RDMA_OPTION_ID}); the last two are rdma4j's own, for the CM's timers, which Linux fixes and
 * librdmacm does not expose (a provider over librdmacm rejects them with EOPNOTSUPP).
 *
 * @param <T> the value type
 */
public final class CmOption<T> {
    /** RDMA_OPTION_ID_TOS (0): the IP ToS / traffic class of the connection, 0..255; set before resolving the route. */
    public static final CmOption<Integer> TOS = new CmOption<>("TOS", Integer.class, 0, true);
    /** RDMA_OPTION_ID_REUSEADDR (1): let the bound port be reused while an old connection is in TIMEWAIT. */
    public static final CmOption<Boolean> REUSEADDR = new CmOption<>("REUSEADDR", Boolean.class, 1, true);
    /** RDMA_OPTION_ID_AFONLY (2): an IPv6 wildcard listener does not also take IPv4 connections. */
    public static final CmOption<Boolean> AFONLY = new CmOption<>("AFONLY", Boolean.class, 2, true);
    /**
     * RDMA_OPTION_ID_ACK_TIMEOUT (3): the QP's local ACK timeout exponent (4.096 µs · 2^t), 0..31, used
     * instead of the route's; perftest sets 14. Set before resolving the route.
     */
    public static final CmOption<Integer> ACK_TIMEOUT = new CmOption<>("ACK_TIMEOUT", Integer.class, 3, true);
    /**
     * rdma4j: the CM response timeout exponent of REQ/REP (4.096 µs · 2^t), 0..31. Linux sends 20
     * ({@code CMA_CM_RESPONSE_TIMEOUT}, about 4.3 s between REQ retransmissions).
     */
    public static final CmOption<Integer> CM_RESPONSE_TIMEOUT = new CmOption<>("CM_RESPONSE_TIMEOUT", Integer.class, -1, false);
    /**
     * rdma4j: how often the CM retransmits a REQ, REP or DREQ before giving up, 0..15. Linux uses 15
     * ({@code CMA_MAX_CM_RETRIES}: a REQ to nobody fails after about 74 s).
     */
    public static final CmOption<Integer> MAX_CM_RETRIES = new CmOption<>("MAX_CM_RETRIES", Integer.class, -1, false);

    private final String name;
    private final Class<T> type;
    private final int optname;
    private final boolean librdmacm;

    private CmOption(String name, Class<T> type, int optname, boolean librdmacm) {
        this.name = name;
        this.type = type;
        this.optname = optname;
        this.librdmacm = librdmacm;
    }

    /** {@return the option's name} */
    public String name() {
        return name;
    }

    /** {@return the value type} */
    public Class<T> type() {
        return type;
    }

    /** {@return librdmacm's optname at level RDMA_OPTION_ID (0), or -1 for rdma4j's own options} */
    public int optname() {
        return optname;
    }

    /** {@return whether librdmacm has this option} */
    public boolean isLibrdmacmOption() {
        return librdmacm;
    }

    @Override
    public String toString() {
        return name;
    }
}
