// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import org.rdma4j.verbs.Gid;

/**
 * A MAD received on a port's QP1 with what its work completion and GRH area said
 * ({@code struct ib_mad_recv_wc}).
 *
 * @param mad          the 256 bytes (a private copy)
 * @param port         the port it arrived on
 * @param sgid         the sender's GID (from the GRH: IPv6 source, or the IPv4 source v4-mapped)
 * @param dgid         the GID it was sent to (one of the port's)
 * @param hopLimit     the hop limit that remained
 * @param trafficClass the IP traffic class
 * @param flowLabel    the IPv6 flow label (0 for IPv4)
 * @param srcQp        the source QP (1 for a MAD layer)
 * @param pkeyIndex    the P_Key index of the BTH's P_Key
 */
record MadRecv(byte[] mad, MadPort port, Gid sgid, Gid dgid, int hopLimit, int trafficClass, int flowLabel,
               int srcQp, int pkeyIndex) {
    /**
     * The address vector to answer the sender ({@code ib_create_ah_from_wc}): to the GRH's source GID,
     * from the local GID it was sent to, with the route's hop limit (64: this host's default TTL).
     */
    CmAv replyAv() {
        int idx = port.gidIndexOf(dgid);
        return new CmAv(port, sgid, Math.max(idx, 0), 64, trafficClass, 0, 0);
    }
}
