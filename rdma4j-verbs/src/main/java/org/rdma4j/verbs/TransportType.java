// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/** A device's transport (ibv_transport_type), with the names ibv_devinfo prints. */
public enum TransportType {
    /** InfiniBand transport, also RoCE (rxe, the soft device, every IB and RoCE NIC). */
    IB(0, "InfiniBand"),
    /** iWARP (siw, Chelsio, irdma in iWARP mode): RC only, connected through rdma_cm over TCP. */
    IWARP(1, "iWARP");

    private final int value;
    private final String text;

    TransportType(int value, String text) {
        this.value = value;
        this.text = text;
    }

    /** {@return the ibv_transport_type value} */
    public int value() {
        return value;
    }

    /** {@return what ibv_devinfo prints, e.g. {@code iWARP}} */
    public String text() {
        return text;
    }
}
