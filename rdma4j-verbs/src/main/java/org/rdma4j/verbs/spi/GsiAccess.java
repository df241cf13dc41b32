// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.spi;

import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QueuePair;

/**
 * How a device lets a user-space MAD layer (rdma4j-cm) own its special QPs, as Linux's ib_mad creates
 * them in the kernel ({@code ib_create_qp} with {@code IB_QPT_GSI} per port). Implemented by the
 * {@link org.rdma4j.verbs.Device} of providers without a CM of their own (the soft device); devices whose
 * QP1 belongs to a kernel do not implement it.
 *
 * <p>The GSI QP of a port behaves as rxe's (rxe_recv.c, rxe_qp.c): a UD QP numbered 1, one per port;
 * packets to QP number 1 reach it; on receive its Q_Key is always GSI_QKEY {@value #GSI_QKEY} (anything
 * else is counted as a Q_Key violation and dropped); it sends with source QP 1 and P_Key 0xFFFF, and
 * with the Q_Key of the work request (the MAD layer sends {@value #GSI_QKEY}). It goes through the
 * usual RESET, INIT, RTR, RTS transitions; its receive completions carry the 40-byte GRH area.
 */
public interface GsiAccess {
    /** GSI_QKEY / IB_QP1_QKEY: the Q_Key of every GSI QP. */
    int GSI_QKEY = 0x8001_0000;

    /** The special QPs of an IB port. */
    enum SpecialQp {
        /** QP0, the subnet management interface: does not exist on RoCE ports (no subnet manager, no LIDs). */
        SMI,
        /** QP1, the general services interface: carries CM (and other GS) MADs. */
        GSI
    }

    /**
     * Creates a special QP of a port ({@code ib_create_qp} with {@code IB_QPT_SMI}/{@code IB_QPT_GSI}).
     *
     * @param pd    a PD of a context of this device
     * @param kind  SMI or GSI
     * @param port  the port (1-based)
     * @param attrs creation attributes (type is ignored: the QP is UD)
     * @return the QP, numbered 0 or 1, in RESET; a child of {@code pd}
     * @throws org.rdma4j.verbs.VerbsException EOPNOTSUPP for SMI (QP0 does not exist on RoCE), EBUSY if the
     *                                         port's GSI QP exists already, EINVAL for a bad port
     */
    QueuePair createSpecialQp(ProtectionDomain pd, SpecialQp kind, int port, QpInitAttributes attrs);

    /**
     * Whether the device takes a host resource that one process at a time can hold (a RoCE device of the
     * host's configuration binds its IP addresses and UDP port) only when its first QP is created. A
     * user-space CM then creates the device's QP1 only when one of its CM IDs binds, listens or resolves to
     * the device, so that several processes listing the same devices can each serve one of them; other
     * devices get their QP1 when the CM starts, so requests to ports nobody listens on are rejected.
     *
     * @return true if QP1 should wait for the device's first use; false (the default) otherwise
     */
    default boolean bindsOnFirstUse() {
        return false;
    }
}
