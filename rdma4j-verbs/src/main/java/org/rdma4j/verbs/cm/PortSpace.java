// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.cm;

import org.rdma4j.verbs.QpType;

/**
 * rdma_cm port spaces ({@code enum rdma_ucm_port_space}): which ports a CM ID binds and listens in, which
 * QP type its connections use, and the IB service ID a port maps to on the wire. The service ID is
 * {@code ps << 16 | port} and nothing else (Linux cma.c {@code rdma_get_service_id}), so a port of
 * {@link #TCP} maps to {@code 0x0000000001060000 | port}.
 */
public enum PortSpace {
    /**
     * IPoIB's port space (RDMA_PS_IPOIB 0x0002, UD). Linux refuses it on RoCE ports
     * ({@code cma_ib_acquire_dev}); kept for completeness.
     */
    IPOIB(0x0002, QpType.UD),
    /** Connected, reliable: RC QPs (RDMA_PS_TCP 0x0106). rping, ucmatose, perftest -R, rsockets. */
    TCP(0x0106, QpType.RC),
    /** Datagrams: UD QPs connected by SIDR (RDMA_PS_UDP 0x0111). udaddy. Q_Key {@link #UDP_QKEY}. */
    UDP(0x0111, QpType.UD),
    /** Any QP type (RDMA_PS_IB 0x013F); RC by default. */
    IB(0x013F, QpType.RC);

    /** RDMA_UDP_QKEY: the Q_Key of UD QPs in the UDP and IB port spaces. */
    public static final int UDP_QKEY = 0x0123_4567;

    private final int value;
    private final QpType defaultQpType;

    PortSpace(int value, QpType defaultQpType) {
        this.value = value;
        this.defaultQpType = defaultQpType;
    }

    /** {@return the port space number (RDMA_PS_*)} */
    public int value() {
        return value;
    }

    /** {@return the QP type a CM ID of this space uses unless told otherwise} */
    public QpType defaultQpType() {
        return defaultQpType;
    }

    /**
     * The service ID of a port.
     *
     * @param port a port 0..65535
     * @return the IB service ID of that port in this space ({@code rdma_get_service_id})
     */
    public long serviceId(int port) {
        return ((long) value << 16) | (port & 0xFFFF);
    }

    /**
     * The port space a service ID belongs to ({@code rdma_ps_from_service_id}).
     *
     * @param serviceId an IB service ID
     * @return the space, or null if the ID is not an rdma_cm one
     */
    public static PortSpace ofServiceId(long serviceId) {
        if ((serviceId >>> 32) != 0) {
            return null;
        }
        int ps = (int) (serviceId >>> 16) & 0xFFFF;
        for (PortSpace s : values()) {
            if (s.value == ps) {
                return s;
            }
        }
        return null;
    }

    /**
     * The space of an RDMA_PS_* number.
     *
     * @param value an RDMA_PS_* number
     * @return the space
     * @throws IllegalArgumentException for an unknown number
     */
    public static PortSpace ofValue(int value) {
        for (PortSpace s : values()) {
            if (s.value == value) {
                return s;
            }
        }
        throw new IllegalArgumentException("unknown rdma_cm port space 0x" + Integer.toHexString(value)
                + " (expected 0x0002 IPOIB, 0x0106 TCP, 0x0111 UDP or 0x013f IB)");
    }
}
