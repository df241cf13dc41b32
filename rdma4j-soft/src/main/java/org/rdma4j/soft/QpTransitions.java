// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.rdma4j.verbs.QpAttrMask.ACCESS_FLAGS;
import static org.rdma4j.verbs.QpAttrMask.ALT_PATH;
import static org.rdma4j.verbs.QpAttrMask.AV;
import static org.rdma4j.verbs.QpAttrMask.CUR_STATE;
import static org.rdma4j.verbs.QpAttrMask.DEST_QPN;
import static org.rdma4j.verbs.QpAttrMask.EN_SQD_ASYNC_NOTIFY;
import static org.rdma4j.verbs.QpAttrMask.MAX_DEST_RD_ATOMIC;
import static org.rdma4j.verbs.QpAttrMask.MAX_QP_RD_ATOMIC;
import static org.rdma4j.verbs.QpAttrMask.MIN_RNR_TIMER;
import static org.rdma4j.verbs.QpAttrMask.PATH_MIG_STATE;
import static org.rdma4j.verbs.QpAttrMask.PATH_MTU;
import static org.rdma4j.verbs.QpAttrMask.PKEY_INDEX;
import static org.rdma4j.verbs.QpAttrMask.PORT;
import static org.rdma4j.verbs.QpAttrMask.QKEY;
import static org.rdma4j.verbs.QpAttrMask.RETRY_CNT;
import static org.rdma4j.verbs.QpAttrMask.RNR_RETRY;
import static org.rdma4j.verbs.QpAttrMask.RQ_PSN;
import static org.rdma4j.verbs.QpAttrMask.SQ_PSN;
import static org.rdma4j.verbs.QpAttrMask.STATE;
import static org.rdma4j.verbs.QpAttrMask.TIMEOUT;

import org.rdma4j.verbs.QpAttrMask;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;

/**
 * The QP state transition table: which transitions are valid and which attributes each requires
 * and allows, per QP type. The same table as the kernel's {@code qp_state_table} used by
 * {@code ib_modify_qp_is_ok} (drivers/infiniband/core/verbs.c) and the ibv_modify_qp.3 tables
 * (IBA 10.3.1 and 11.2.4.2). As in Linux, RESET may go only to RESET or INIT.
 */
final class QpTransitions {
    private static final int N = QpState.values().length;
    private static final boolean[][] VALID = new boolean[N][N];
    // [from][to][type] -> mask
    private static final int[][][] REQ = new int[N][N][3];
    private static final int[][][] OPT = new int[N][N][3];

    private static final int UD = 0;
    private static final int UC = 1;
    private static final int RC = 2;

    static {
        QpState[] s = QpState.values();
        for (QpState from : s) {
            if (from != QpState.RESET) {
                valid(from, QpState.RESET);
                valid(from, QpState.ERR);
            }
        }
        valid(QpState.RESET, QpState.RESET);
        valid(QpState.RESET, QpState.INIT);
        set(QpState.RESET, QpState.INIT, UD, m(PKEY_INDEX, PORT, QKEY), 0);
        set(QpState.RESET, QpState.INIT, UC, m(PKEY_INDEX, PORT, ACCESS_FLAGS), 0);
        set(QpState.RESET, QpState.INIT, RC, m(PKEY_INDEX, PORT, ACCESS_FLAGS), 0);

        valid(QpState.INIT, QpState.INIT);
        set(QpState.INIT, QpState.INIT, UD, 0, m(PKEY_INDEX, PORT, QKEY));
        set(QpState.INIT, QpState.INIT, UC, 0, m(PKEY_INDEX, PORT, ACCESS_FLAGS));
        set(QpState.INIT, QpState.INIT, RC, 0, m(PKEY_INDEX, PORT, ACCESS_FLAGS));

        valid(QpState.INIT, QpState.RTR);
        set(QpState.INIT, QpState.RTR, UD, 0, m(PKEY_INDEX, QKEY));
        set(QpState.INIT, QpState.RTR, UC, m(AV, PATH_MTU, DEST_QPN, RQ_PSN), m(ALT_PATH, ACCESS_FLAGS, PKEY_INDEX));
        set(QpState.INIT, QpState.RTR, RC, m(AV, PATH_MTU, DEST_QPN, RQ_PSN, MAX_DEST_RD_ATOMIC, MIN_RNR_TIMER),
                m(ALT_PATH, ACCESS_FLAGS, PKEY_INDEX));

        valid(QpState.RTR, QpState.RTS);
        set(QpState.RTR, QpState.RTS, UD, m(SQ_PSN), m(CUR_STATE, QKEY));
        set(QpState.RTR, QpState.RTS, UC, m(SQ_PSN), m(CUR_STATE, ALT_PATH, ACCESS_FLAGS, PATH_MIG_STATE));
        set(QpState.RTR, QpState.RTS, RC, m(TIMEOUT, RETRY_CNT, RNR_RETRY, SQ_PSN, MAX_QP_RD_ATOMIC),
                m(CUR_STATE, ALT_PATH, ACCESS_FLAGS, MIN_RNR_TIMER, PATH_MIG_STATE));

        for (QpState from : new QpState[] {QpState.RTS, QpState.SQD}) {
            valid(from, QpState.RTS);
            set(from, QpState.RTS, UD, 0, m(CUR_STATE, QKEY));
            set(from, QpState.RTS, UC, 0, m(CUR_STATE, ACCESS_FLAGS, ALT_PATH, PATH_MIG_STATE));
            set(from, QpState.RTS, RC, 0, m(CUR_STATE, ACCESS_FLAGS, ALT_PATH, PATH_MIG_STATE, MIN_RNR_TIMER));
        }

        valid(QpState.RTS, QpState.SQD);
        for (int t = 0; t < 3; t++) {
            OPT[QpState.RTS.ordinal()][QpState.SQD.ordinal()][t] = m(EN_SQD_ASYNC_NOTIFY);
        }

        valid(QpState.SQD, QpState.SQD);
        set(QpState.SQD, QpState.SQD, UD, 0, m(PKEY_INDEX, QKEY));
        set(QpState.SQD, QpState.SQD, UC, 0, m(AV, ALT_PATH, ACCESS_FLAGS, PKEY_INDEX, PATH_MIG_STATE));
        set(QpState.SQD, QpState.SQD, RC, 0, m(PORT, AV, TIMEOUT, RETRY_CNT, RNR_RETRY, MAX_QP_RD_ATOMIC,
                MAX_DEST_RD_ATOMIC, ALT_PATH, ACCESS_FLAGS, PKEY_INDEX, MIN_RNR_TIMER, PATH_MIG_STATE));

        // SQE -> RTS exists for UD and UC only: an RC send error goes straight to ERR.
        VALID[QpState.SQE.ordinal()][QpState.RTS.ordinal()] = true;
        set(QpState.SQE, QpState.RTS, UD, 0, m(CUR_STATE, QKEY));
        set(QpState.SQE, QpState.RTS, UC, 0, m(CUR_STATE, ACCESS_FLAGS));
        REQ[QpState.SQE.ordinal()][QpState.RTS.ordinal()][RC] = -1;
    }

    private QpTransitions() {
    }

    private static void valid(QpState from, QpState to) {
        VALID[from.ordinal()][to.ordinal()] = true;
    }

    private static void set(QpState from, QpState to, int type, int req, int opt) {
        REQ[from.ordinal()][to.ordinal()][type] = req;
        OPT[from.ordinal()][to.ordinal()][type] = opt;
    }

    private static int m(QpAttrMask... bits) {
        int r = 0;
        for (QpAttrMask b : bits) {
            r |= b.bit();
        }
        return r;
    }

    private static int typeIndex(QpType t) {
        return switch (t) {
            case UD -> UD;
            case UC -> UC;
            case RC -> RC;
        };
    }

    /**
     * {@return null if the transition with this mask is allowed, else a message saying why not}
     *
     */
    static String check(QpType type, QpState cur, QpState next, int mask) {
        int f = cur.ordinal();
        int t = next.ordinal();
        int ti = typeIndex(type);
        if (!VALID[f][t] || REQ[f][t][ti] == -1) {
            return "invalid QP state transition " + cur + " -> " + next + " for " + type + " QP";
        }
        int req = REQ[f][t][ti];
        int opt = OPT[f][t][ti];
        int given = mask & ~STATE.bit();
        if ((given & req) != req) {
            return "missing required attribute(s) " + QpAttrMask.describe(req & ~given) + " for " + type + " "
                    + cur + " -> " + next;
        }
        int extra = given & ~(req | opt);
        if (extra != 0) {
            return "attribute(s) " + QpAttrMask.describe(extra) + " not allowed for " + type + " " + cur + " -> "
                    + next + " (required: " + QpAttrMask.describe(req) + ", optional: " + QpAttrMask.describe(opt) + ")";
        }
        return null;
    }
}
