// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/**
 * Port attributes as ibv_query_port reports them.
 *
 * @param state        logical state
 * @param maxMtu       largest MTU the port supports
 * @param activeMtu    MTU in use
 * @param gidTblLen    GID table length
 * @param portCapFlags ibv_port_cap_flags
 * @param maxMsgSz     largest message
 * @param lid          base LID (0 on RoCE)
 * @param smLid        subnet manager LID
 * @param lmc          LID mask control
 * @param physState    physical state (5 = LinkUp, 3 = Disabled)
 * @param linkLayer    "Ethernet" or "InfiniBand"
 * @param activeWidth  ibv width code
 * @param activeSpeed  ibv speed code
 * @param pkeyTblLen   P_Key table length
 */
public record PortAttributes(PortState state, Mtu maxMtu, Mtu activeMtu, int gidTblLen, int portCapFlags,
                             long maxMsgSz, int lid, int smLid, int lmc, int physState, String linkLayer,
                             int activeWidth, int activeSpeed, int pkeyTblLen) {
}
