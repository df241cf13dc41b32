// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.VerbsException;

import static org.rdma4j.cm.IbCmId.State.ESTABLISHED;
import static org.rdma4j.cm.IbCmId.State.MRA_REP_RCVD;
import static org.rdma4j.cm.IbCmId.State.MRA_REP_SENT;
import static org.rdma4j.cm.IbCmId.State.MRA_REQ_RCVD;
import static org.rdma4j.cm.IbCmId.State.MRA_REQ_SENT;
import static org.rdma4j.cm.IbCmId.State.REP_RCVD;
import static org.rdma4j.cm.IbCmId.State.REP_SENT;
import static org.rdma4j.cm.IbCmId.State.REQ_RCVD;
import static org.rdma4j.cm.IbCmId.State.REQ_SENT;

/** The QP attributes the IB CM computes for a connection ({@code cm.c}'s {@code ib_cm_init_qp_attr}). */
final class CmQpAttr {
    private CmQpAttr() {
    }

    /**
     * {@code ib_cm_init_qp_attr}: INIT ({@code cm_init_qp_init_attr}), RTR ({@code cm_init_qp_rtr_attr}) or RTS
     * ({@code cm_init_qp_rts_attr}) attributes of the connection.
     *
     * @throws VerbsException EINVAL in a state that has no such attributes yet
     */
    static QpAttributes of(IbCmId id, QpState target, boolean remoteAtomicSupported) {
        IbCmId.State s = id.state;
        boolean connecting = s == REQ_RCVD || s == MRA_REQ_SENT || s == REP_RCVD || s == MRA_REP_SENT || s == REP_SENT
                || s == MRA_REP_RCVD || s == ESTABLISHED;
        QpAttributes a = new QpAttributes();
        switch (target) {
            case INIT -> {
                if (!(connecting || s == REQ_SENT || s == MRA_REQ_RCVD)) {
                    throw notNow(id, target);
                }
                int access = AccessFlag.REMOTE_WRITE.bit();
                if (id.responderResources != 0) {
                    access |= AccessFlag.REMOTE_READ.bit() | (remoteAtomicSupported ? AccessFlag.REMOTE_ATOMIC.bit() : 0);
                }
                a.state(QpState.INIT).accessFlags(access).pkeyIndex(0).port(id.port.portNum);
            }
            case RTR -> {
                if (!connecting) {
                    throw notNow(id, target);
                }
                a.state(QpState.RTR).av(id.av.ahAttributes()).pathMtu(id.pathMtu).destQpNum(id.remoteQpn).rqPsn(id.rqPsn);
                if (id.qpType == QpType.RC) {
                    a.maxDestRdAtomic(id.responderResources).minRnrTimer(0);
                }
            }
            case RTS -> {
                if (!connecting) {
                    throw notNow(id, target);
                }
                a.state(QpState.RTS).sqPsn(id.sqPsn);
                if (id.qpType == QpType.RC) {
                    a.retryCnt(id.retryCount).rnrRetry(id.rnrRetryCount).maxRdAtomic(id.initiatorDepth)
                            .timeout(id.avTimeout);
                }
            }
            default -> throw new VerbsException(Errno.EINVAL, "ib_cm_init_qp_attr: no attributes for " + target);
        }
        return a;
    }

    private static VerbsException notNow(IbCmId id, QpState target) {
        return new VerbsException(Errno.EINVAL, "the CM has no " + target + " attributes in CM state " + id.state
                + " (RTR and RTS are known once the peer's REQ or REP arrived)");
    }
}
