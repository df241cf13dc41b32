// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.QpType;

/**
 * One IB CM communication ({@code struct cm_id_private} of Linux's cm.c): its state, the IDs of both ends,
 * the parameters negotiated by REQ and REP, the address vector, the outstanding MAD and the timewait
 * bookkeeping. Fields are read and written under the CM lock by {@link IbCm}.
 */
final class IbCmId {
    /** {@code enum ib_cm_state}. */
    enum State {
        IDLE, LISTEN, REQ_SENT, REQ_RCVD, MRA_REQ_SENT, MRA_REQ_RCVD, REP_SENT, REP_RCVD, MRA_REP_SENT, MRA_REP_RCVD,
        ESTABLISHED, DREQ_SENT, DREQ_RCVD, TIMEWAIT, SIDR_REQ_SENT, SIDR_REQ_RCVD
    }

    /** The entries of a communication in the remote ID and remote QP tables ({@code struct cm_timewait_info}). */
    static final class Timewait {
        final int localId;
        int remoteId;
        long remoteCaGuid;
        int remoteQpn;
        boolean insertedRemoteId;
        boolean insertedRemoteQp;

        Timewait(int localId) {
            this.localId = localId;
        }
    }

    /** The context of an outstanding MAD ({@code msg->context[]}): the ID and the state it was sent in. */
    record SendContext(IbCmId id, State state) {
    }

    final MadPort port;
    IbCmHandler handler;
    /** The rdma_cm ID (or other user) of this communication. */
    Object context;
    State state = State.IDLE;
    final int localId;
    int remoteId;
    long serviceId;
    long tid;
    CmAv av;
    /** The local ACK timeout exponent of the path ({@code av.timeout}). */
    int avTimeout;
    int localQpn;
    int remoteQpn;
    QpType qpType = QpType.RC;
    int sqPsn;
    int rqPsn;
    long timeoutMs;
    Mtu pathMtu = Mtu.MTU_1024;
    int pkey = 0xFFFF;
    int maxCmRetries;
    int responderResources;
    int initiatorDepth;
    int retryCount;
    int rnrRetryCount;
    int serviceTimeout;
    int targetAckDelay;
    /** Private data kept for the answers to duplicates (RTU, MRA, DREP). */
    byte[] privateData = new byte[0];
    /** The outstanding MAD ({@code cm_id_priv->msg}). */
    MadLayer.Send msg;
    /** The state the outstanding MAD reports its timeout in ({@code msg->context[1]}). */
    State msgState;
    Timewait timewait;
    /** For a listener: how many users share it ({@code listen_sharecount}). */
    int listenSharecount;
    /** For a SIDR_REQ received: whether it is in the remote SIDR table. */
    boolean inSidrTable;
    /** The peer GID of a SIDR request (its key in the SIDR table). */
    org.rdma4j.verbs.Gid sidrDgid;
    boolean destroyed;
    /** The timewait timer while in TIMEWAIT. */
    CmTimers.Timer timewaitTimer;

    IbCmId(MadPort port, int localId, IbCmHandler handler, Object context) {
        this.port = port;
        this.localId = localId;
        this.handler = handler;
        this.context = context;
    }

    @Override
    public String toString() {
        return "cm_id{local 0x" + Integer.toHexString(localId) + ", remote 0x" + Integer.toHexString(remoteId) + ", "
                + state + ", sid 0x" + Long.toHexString(serviceId) + '}';
    }
}
