// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.util.List;

/**
 * The in-process link: a packet is handed to the destination device of the same {@link SoftFabric}
 * as the object itself, in the sender's call. The payload still refers to the sender's memory, so
 * data moves once, from the source region to the target region, and nothing is cut at an MTU unless
 * the fabric asks for it. Any thread: the target device hands the packet to its QP ({@link SoftQp#deliver}).
 */
final class InProcessLink implements Link {
    private final SoftFabric fabric;

    InProcessLink(SoftFabric fabric) {
        this.fabric = fabric;
    }

    @Override
    public void send(SoftDevice from, Packet p) {
        SoftDevice to = p.route;
        if (to == null && p.dgid != null && p.dgid.isMulticast()) {
            // every device of the fabric sees the group's packet, the sender's too; each delivers it to the
            // QPs it has attached (rxe_rcv_mcast_pkt) or counts it dropped
            List<SoftDevice> all = fabric.deviceList();
            for (int i = 0; i < all.size(); i++) {
                SoftDevice d = all.get(i);
                if (d.portActive()) {
                    d.receive(p);
                }
            }
            return;
        }
        if (to == null) {
            to = fabric.deviceFor(p.dgid);
        }
        if (to == null || !to.portActive()) {
            from.count(SoftCounter.DROP_NO_ROUTE);
            return;
        }
        to.receive(p);
    }

    @Override
    public String toString() {
        return "in-process";
    }
}
