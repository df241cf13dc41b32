// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.cm;

import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.Mtu;

/**
 * The path a CM ID resolved to ({@code id->route.path_rec} on RoCE, computed locally without a subnet
 * administrator: Linux cma.c {@code cma_resolve_iboe_route}).
 *
 * @param sgid           the local GID (the source IP as a RoCEv2 GID)
 * @param dgid           the peer GID
 * @param sgidIndex      the index of {@code sgid} in the port's GID table
 * @param hopLimit       IP hop limit / TTL (from the route; 64 usually)
 * @param trafficClass   IP traffic class / ToS ({@link CmOption#TOS})
 * @param flowLabel      20-bit flow label ({@code cma_get_roce_udp_flow_label})
 * @param pkey           the P_Key (0xFFFF on RoCE)
 * @param mtu            the path MTU ({@code iboe_get_mtu} of the interface MTU)
 * @param packetLifeTime the packet life time exponent (16 on Linux, or the ACK timeout minus 1)
 * @param sl             service level (0 without DCB)
 */
public record CmRoute(Gid sgid, Gid dgid, int sgidIndex, int hopLimit, int trafficClass, int flowLabel, int pkey,
                      Mtu mtu, int packetLifeTime, int sl) {
}
