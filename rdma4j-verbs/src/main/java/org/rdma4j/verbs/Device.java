// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/** An RDMA device (ibv_device): found through {@link Verbs#devices()}, opened into a {@link Context}. */
public interface Device {
    /** {@return the device name, e.g. {@code soft0} or {@code rxe0}} */
    String name();

    /** {@return the node GUID} */
    long guid();

    /** {@return the name of the provider that drives it} */
    String providerName();

    /** {@return the transport; {@link TransportType#IB} unless the provider says otherwise} */
    default TransportType transportType() {
        return TransportType.IB;
    }

    /**
     * Opens the device (ibv_open_device).
     *
     * @return a new context; close it when done
     */
    Context open();
}
