// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.common.Psn;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.QpAttrMask;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.VerbsException;

/**
 * ibv_modify_qp and ibv_query_qp of a {@link SoftQp}: the attribute checks (rxe_qp_chk_attr), their application
 * to the QP and its roles (rxe_qp_from_attr), and the attributes a query reports. The transition table itself is
 * {@link QpTransitions}. Run by the verbs caller while it owns the QP's executor (SoftQp.modify, SoftQp.query),
 * so it is the QP's owner for the call.
 */
final class QpModify {
    private QpModify() {
    }

    /**
     * Checks the attributes against the transition table and the device's limits, then applies them and the
     * state change (ibv_modify_qp.3: all or nothing). The caller owns the QP's executor.
     *
     * @param qp the QP
     * @param a the attributes and their mask
     */
    static void modify(SoftQp qp, QpAttributes a) {
        // what the responder acknowledged so far goes out before the QP changes (rxe sent it at receive time)
        qp.responder.acks.flushAck();
        int mask = a.mask();
        QpState cur = qp.state;
        if (a.has(QpAttrMask.CUR_STATE) && a.curState() != cur) {
            throw new VerbsException(Errno.EINVAL, "cur_qp_state " + a.curState() + " but QP 0x"
                    + Integer.toHexString(qp.qpn) + " is in " + cur);
        }
        QpState next = a.has(QpAttrMask.STATE) ? a.state() : cur;
        String why = QpTransitions.check(qp.type, cur, next, mask);
        if (why != null) {
            throw new VerbsException(Errno.EINVAL, why);
        }
        checkValues(qp, a);
        // Everything checked: apply (ibv_modify_qp.3: all or nothing).
        if (a.has(QpAttrMask.QKEY)) {
            qp.qkey = a.qkey();
        }
        if (a.has(QpAttrMask.PKEY_INDEX)) {
            qp.pkeyIndex = a.pkeyIndex();
        }
        if (a.has(QpAttrMask.PORT)) {
            qp.port = a.port();
        }
        if (a.has(QpAttrMask.ACCESS_FLAGS)) {
            qp.accessFlags = a.accessFlags();
        }
        if (a.has(QpAttrMask.AV)) {
            qp.av = a.av().copy();
            if (qp.av.dgid() != null) {
                // what the device's QPs learnt of the path there (Pacer)
                qp.pacer.bind(qp.device.pacePath(qp.av.dgid()));
            }
            qp.dgid = qp.av.dgid();
            qp.sgid = qp.device.gid(qp.av.sgidIndex());
            qp.peer = qp.fabric.deviceFor(qp.dgid);
            if (qp.peer != null) {
                qp.dgid = qp.peer.ownGid(qp.dgid);
            }
        }
        if (a.has(QpAttrMask.PATH_MTU)) {
            qp.pathMtu = a.pathMtu().bytes() > qp.device.activeMtu().bytes() ? qp.device.activeMtu() : a.pathMtu();
        }
        if (a.has(QpAttrMask.DEST_QPN)) {
            qp.destQpn = a.destQpNum() & Psn.MASK;
        }
        if (a.has(QpAttrMask.TIMEOUT)) {
            qp.timeout = a.timeout();
        }
        if (a.has(QpAttrMask.RETRY_CNT)) {
            qp.retryCnt = a.retryCnt();
            qp.completer.retryCnt = qp.retryCnt;
        }
        if (a.has(QpAttrMask.RNR_RETRY)) {
            qp.rnrRetry = a.rnrRetry();
            qp.completer.rnrRetry = qp.rnrRetry;
        }
        if (a.has(QpAttrMask.MIN_RNR_TIMER)) {
            qp.minRnrTimer = a.minRnrTimer();
        }
        if (a.has(QpAttrMask.MAX_QP_RD_ATOMIC)) {
            qp.maxRdAtomic = rdAtomicDepth(a.maxRdAtomic());
            qp.requester.resetDepth();
        }
        if (a.has(QpAttrMask.MAX_DEST_RD_ATOMIC)) {
            qp.maxDestRdAtomic = rdAtomicDepth(a.maxDestRdAtomic());
            // rxe allocates the resources for the rounded value (256 for 129) although the QP keeps 0
            qp.responder.resources.resize(a.maxDestRdAtomic());
        }
        if (a.has(QpAttrMask.RQ_PSN)) {
            qp.rqPsn = a.rqPsn() & Psn.MASK;
            qp.responder.psn = qp.rqPsn;
            qp.responder.held.drop();
        }
        if (a.has(QpAttrMask.SQ_PSN)) {
            qp.sqPsn = a.sqPsn() & Psn.MASK;
            qp.requester.psn = qp.sqPsn;
            qp.requester.highWater = qp.sqPsn;
            qp.completer.psn = qp.sqPsn;
        }
        if (a.has(QpAttrMask.EN_SQD_ASYNC_NOTIFY)) {
            qp.enSqdAsyncNotify = a.enSqdAsyncNotify();
        }
        if (next != cur) {
            SoftEvents.qpState(qp, cur, next, "modify");
            switch (next) {
                case RESET -> QpStateChanges.reset(qp);
                case ERR -> {
                    qp.modifyingToError = true;
                    try {
                        QpStateChanges.moveToError(qp);
                    } finally {
                        qp.modifyingToError = false;
                    }
                }
                case SQD -> {
                    qp.state = QpState.SQD;
                    QpStateChanges.maybeSqDrained(qp);
                }
                case RTS -> {
                    qp.state = QpState.RTS;
                    qp.requester.run();
                }
                default -> qp.state = next;
            }
        }
    }

    private static void checkValues(SoftQp qp, QpAttributes a) {
        if (a.has(QpAttrMask.PORT)) {
            qp.device.checkPort(a.port());
        }
        if (a.has(QpAttrMask.PKEY_INDEX) && a.pkeyIndex() != 0) {
            throw new VerbsException(Errno.EINVAL, "pkey_index " + a.pkeyIndex() + " (P_Key table has 1 entry)");
        }
        if (a.has(QpAttrMask.AV)) {
            AhAttributes v = a.av();
            if (v.sgidIndex() < 0 || v.sgidIndex() >= qp.device.gidTableLength()) {
                throw new VerbsException(Errno.EINVAL, "ah_attr.sgid_index " + v.sgidIndex() + " (GID table has "
                        + qp.device.gidTableLength() + " entries)");
            }
            if (v.dgid() == null) {
                throw new VerbsException(Errno.EINVAL, "ah_attr.dgid is null");
            }
        }
        if (a.has(QpAttrMask.TIMEOUT) && (a.timeout() < 0 || a.timeout() > 31)) {
            throw new VerbsException(Errno.EINVAL, "timeout " + a.timeout() + " (expected 0..31)");
        }
        // rxe_qp_chk_attr checks neither retry_cnt, rnr_retry, min_rnr_timer nor max_dest_rd_atomic: any value
        // of their u8 in struct ibv_qp_attr is accepted (seen in the VM: interop/rxe-probes, case modify), and
        // the engine does with it what rxe does (see modify and the Completer). Only what a u8 cannot
        // hold is refused here.
        checkU8(a, QpAttrMask.RETRY_CNT, a.retryCnt(), "retry_cnt", "7 and above retry forever");
        checkU8(a, QpAttrMask.RNR_RETRY, a.rnrRetry(), "rnr_retry", "7 and above retry forever");
        checkU8(a, QpAttrMask.MIN_RNR_TIMER, a.minRnrTimer(), "min_rnr_timer", "the RNR NAK carries its low 5 bits");
        checkU8(a, QpAttrMask.MAX_DEST_RD_ATOMIC, a.maxDestRdAtomic(), "max_dest_rd_atomic",
                "129 and above round up to 256, which rxe keeps as 0");
        if (a.has(QpAttrMask.MAX_QP_RD_ATOMIC) && (a.maxRdAtomic() < 0 || a.maxRdAtomic() > SoftDevice.MAX_RD_ATOMIC)) {
            // rxe_qp_chk_attr: max_rd_atomic > max_qp_rd_atom => -EINVAL
            throw new VerbsException(Errno.EINVAL, "max_rd_atomic " + a.maxRdAtomic() + " (expected 0.."
                    + SoftDevice.MAX_RD_ATOMIC + ", the device's max_qp_rd_atom)");
        }
        if (a.has(QpAttrMask.ACCESS_FLAGS) && (a.accessFlags() & ~0xF) != 0) {
            throw new VerbsException(Errno.EINVAL, "qp_access_flags 0x" + Integer.toHexString(a.accessFlags())
                    + " has unsupported bits");
        }
    }

    private static void checkU8(QpAttributes a, QpAttrMask bit, int value, String name, String note) {
        if (a.has(bit) && (value < 0 || value > 255)) {
            throw new VerbsException(Errno.EINVAL, name + " " + value + " (expected 0..255, a u8 in verbs; " + note + ")");
        }
    }

    /**
     * rxe_qp_from_attr: an rd_atomic depth is rounded up to a power of two and kept in a u8 field, so 129..255
     * become 256 and then 0 (seen in the VM: a QP given max_dest_rd_atomic 129 reports 0 and refuses READs).
     */
    private static int rdAtomicDepth(int v) {
        return v == 0 ? 0 : Bytes.ceilPow2(v) & 0xFF;
    }

    /**
     * {@return the QP's attributes} The caller owns the QP's executor.
     *
     * @param qp the QP
     */
    static QpAttributes query(SoftQp qp) {
        QpAttributes a = new QpAttributes()
                .state(qp.state).curState(qp.state).qkey(qp.qkey).pkeyIndex(qp.pkeyIndex).port(qp.port)
                .accessFlags(qp.accessFlags).av(qp.av).pathMtu(qp.pathMtu).destQpNum(qp.destQpn).timeout(qp.timeout)
                .retryCnt(qp.retryCnt).rnrRetry(qp.rnrRetry).minRnrTimer(qp.minRnrTimer).maxRdAtomic(qp.maxRdAtomic)
                .maxDestRdAtomic(qp.maxDestRdAtomic).sqPsn(qp.requester.psn).rqPsn(qp.responder.psn)
                .enSqdAsyncNotify(qp.enSqdAsyncNotify).cap(qp.cap);
        a.sqDraining(qp.state == QpState.SQD && !qp.sq.isEmpty());
        return a;
    }
}
