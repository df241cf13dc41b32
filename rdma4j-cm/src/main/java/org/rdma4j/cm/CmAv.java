// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.Gid;

/**
 * An address vector of the CM ({@code struct cm_av} without the timeout): the local port a peer is
 * reached through and the GRH fields of the path. Used for the MADs to the peer's QP1 and, with the
 * connection's numbers, as the AV of the data QP.
 *
 * @param port         the local port (its MAD layer)
 * @param dgid         the peer's GID
 * @param sgidIndex    the local GID index
 * @param hopLimit     IP hop limit
 * @param trafficClass IP traffic class
 * @param flowLabel    20-bit flow label
 * @param sl           service level
 */
record CmAv(MadPort port, Gid dgid, int sgidIndex, int hopLimit, int trafficClass, int flowLabel, int sl) {
    /** {@return the verbs address vector of this path} */
    AhAttributes ahAttributes() {
        return new AhAttributes().dgid(dgid).sgidIndex(sgidIndex).hopLimit(hopLimit).trafficClass(trafficClass)
                .flowLabel(flowLabel).sl(sl).portNum(port.portNum).global(true);
    }

    /** {@return the local GID of this path} */
    Gid sgid() {
        return port.gid(sgidIndex);
    }
}
