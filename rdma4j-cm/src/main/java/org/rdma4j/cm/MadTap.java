// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import java.util.function.Consumer;

/**
 * Where a MAD goes between the CM and the wire: the default hands it to QP1. Tests put a tap here to watch the
 * MADs the CM sends, or to lose, duplicate, reorder or delay them as a lossy link would
 * ({@link UserCm.Builder#tap}). Called with the CM lock held; a MAD the tap keeps for later must be
 * released with the lock held too ({@link UserCm#runLocked}).
 */
@FunctionalInterface
interface MadTap {
    /** The tap that passes everything. */
    MadTap PASS = (port, mad, av, transmit) -> transmit.accept(mad);

    /**
     * @param port     the sending port
     * @param mad      the 256 bytes (the tap may keep them: they are the CM's copy for this send)
     * @param av       where they go
     * @param transmit sends bytes to {@code av} now (call it zero, one or more times)
     */
    void send(MadPort port, byte[] mad, CmAv av, Consumer<byte[]> transmit);
}
