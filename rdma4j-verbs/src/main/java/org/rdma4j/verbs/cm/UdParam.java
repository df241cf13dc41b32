// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.cm;

import org.rdma4j.verbs.AhAttributes;

/**
 * What a UD "connection" (SIDR) yields ({@code struct rdma_ud_param}): the address vector to reach the
 * peer, its QP number and Q_Key. Reported by {@link CmEvent#udParam()} on the active side's
 * {@link CmEventType#ESTABLISHED}; create an address handle from {@link #ah()} and send to
 * {@link #qpNum()} with {@link #qkey()}.
 *
 * @param ah    the address vector of the peer (a copy is kept)
 * @param qpNum the peer's UD QP number
 * @param qkey  the peer's Q_Key ({@link PortSpace#UDP_QKEY} in the UDP space)
 */
public record UdParam(AhAttributes ah, int qpNum, int qkey) {
    /**
     * The peer of a UD "connection".
     *
     * @param ah    the address vector (copied)
     * @param qpNum the peer QP number
     * @param qkey  the peer Q_Key
     */
    public UdParam {
        ah = ah == null ? null : ah.copy();
    }

    /** {@return a copy of the address vector} */
    @Override
    public AhAttributes ah() {
        return ah == null ? null : ah.copy();
    }
}
