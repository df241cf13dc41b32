// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.spi.GsiAccess;

/**
 * The special QPs of a soft device's port, for a user-space MAD layer ({@link GsiAccess}): the GSI QP is a
 * UD {@link SoftQp} numbered 1 in the device's QP table, so packets to QP number 1 reach it through the
 * ordinary receive dispatcher (rxe_recv.c {@code hdr_check}: QPN 1 maps to the port's GSI QP), in process
 * and over RoCEv2; its receive Q_Key check uses GSI_QKEY whatever its attribute (rxe {@code check_keys}).
 * QP0 does not exist: RoCE ports have no subnet management (rxe drops QPN 0, "QP 0 not supported").
 */
final class SoftGsi {
    /** The GSI QP's number. */
    static final int GSI_QPN = 1;

    private SoftGsi() {
    }

    static QueuePair create(SoftDevice device, ProtectionDomain pd, GsiAccess.SpecialQp kind, int port,
                            QpInitAttributes attrs) {
        if (kind == GsiAccess.SpecialQp.SMI) {
            throw new VerbsException(Errno.EOPNOTSUPP, "QP0 (SMI) does not exist on " + device.name()
                    + ": a RoCE port has no subnet manager and no LIDs (Linux creates QP0 only where"
                    + " rdma_cap_ib_smi holds; rxe drops packets to QPN 0); use the GSI (QP1)");
        }
        device.checkPort(port);
        if (!(pd instanceof SoftPd spd) || spd.device != device) {
            throw new VerbsException(Errno.EINVAL, "the PD of a GSI QP of " + device.name() + " must be a PD of one of"
                    + " its contexts");
        }
        QpInitAttributes ud = new QpInitAttributes().type(QpType.UD).sendCq(attrs.sendCq()).recvCq(attrs.recvCq())
                .srq(attrs.srq()).cap(attrs.cap()).sqSigAll(attrs.sqSigAll());
        return spd.createGsiQp(ud);
    }
}
