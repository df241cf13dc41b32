// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.Mtu;

/**
 * A path record ({@code struct sa_path_rec}) as rdma_cm computes it on RoCE (no SA: cma.c
 * {@code cma_resolve_iboe_route}) or the passive side rebuilds it from a REQ ({@code cm_format_paths_from_req}).
 *
 * @param sgid           local GID
 * @param dgid           peer GID
 * @param hopLimit       hop limit
 * @param trafficClass   traffic class
 * @param flowLabel      flow label (20 bits)
 * @param pkey           P_Key
 * @param sl             service level
 * @param mtu            path MTU
 * @param packetLifeTime packet life time exponent
 */
record PathRec(Gid sgid, Gid dgid, int hopLimit, int trafficClass, int flowLabel, int pkey, int sl, Mtu mtu,
               int packetLifeTime) {
}
