// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import org.rdma4j.verbs.QpType;

/**
 * The IB CM message layouts (IBA vol 1 ch. 12; Linux {@code include/rdma/ibta_vol1_c12.h}), as offsets
 * from the start of the 256-byte MAD (the body starts at 24). Multi-byte fields are big-endian; 24-bit
 * fields are the top 24 bits of the BE32 word at their offset; bit fields are given by their byte, shift
 * and width (see {@link Mad#bits}). Every layout was checked against the REQ Linux's rping would send
 * (cm.md section 7, byte by byte, in {@code CmMsgTest}).
 */
final class CmMsg {
    private CmMsg() {
    }

    // Attribute IDs (ib_cm.h CM_*_ATTR_ID)
    static final int REQ = 0x0010;
    static final int MRA = 0x0011;
    static final int REJ = 0x0012;
    static final int REP = 0x0013;
    static final int RTU = 0x0014;
    static final int DREQ = 0x0015;
    static final int DREP = 0x0016;
    static final int SIDR_REQ = 0x0017;
    static final int SIDR_REP = 0x0018;
    static final int LAP = 0x0019;
    static final int APR = 0x001A;

    /** Names of the attributes, for traces. */
    static String name(int attrId) {
        return switch (attrId) {
            case REQ -> "REQ";
            case MRA -> "MRA";
            case REJ -> "REJ";
            case REP -> "REP";
            case RTU -> "RTU";
            case DREQ -> "DREQ";
            case DREP -> "DREP";
            case SIDR_REQ -> "SIDR_REQ";
            case SIDR_REP -> "SIDR_REP";
            case LAP -> "LAP";
            case APR -> "APR";
            default -> "attr 0x" + Integer.toHexString(attrId);
        };
    }

    // Every connection message starts with LocalCommID, RemoteCommID (not SIDR).
    static final int LOCAL_COMM_ID = 24;
    static final int REMOTE_COMM_ID = 28;

    // ---- REQ
    static final int REQ_SERVICE_ID = 32;
    static final int REQ_LOCAL_CA_GUID = 40;
    static final int REQ_LOCAL_QKEY = 52;
    static final int REQ_LOCAL_QPN = 56;            // 24 bits
    static final int REQ_RESPONDER_RESOURCES = 59;  // 8 bits
    static final int REQ_LOCAL_EECN = 60;           // 24 bits
    static final int REQ_INITIATOR_DEPTH = 63;
    static final int REQ_REMOTE_EECN = 64;          // 24 bits
    static final int REQ_BYTE67 = 67;               // [7:3] remote CM response timeout, [2:1] transport, [0] flow control
    static final int REQ_STARTING_PSN = 68;         // 24 bits
    static final int REQ_BYTE71 = 71;               // [7:3] local CM response timeout, [2:0] retry count
    static final int REQ_PKEY = 72;
    static final int REQ_BYTE74 = 74;               // [7:4] path MTU, [3] RDC exists, [2:0] RNR retry count
    static final int REQ_BYTE75 = 75;               // [7:4] max CM retries, [3] SRQ, [2:0] extended transport
    static final int REQ_PRIMARY_LOCAL_LID = 76;
    static final int REQ_PRIMARY_REMOTE_LID = 78;
    static final int REQ_PRIMARY_LOCAL_GID = 80;
    static final int REQ_PRIMARY_REMOTE_GID = 96;
    static final int REQ_PRIMARY_FLOW_LABEL = 112;  // [31:12] of the BE32 word
    static final int REQ_PRIMARY_PACKET_RATE = 115; // [5:0]
    static final int REQ_PRIMARY_TRAFFIC_CLASS = 116;
    static final int REQ_PRIMARY_HOP_LIMIT = 117;
    static final int REQ_BYTE118 = 118;             // [7:4] SL, [3] subnet local
    static final int REQ_BYTE119 = 119;             // [7:3] local ACK timeout
    static final int REQ_ALTERNATE_LOCAL_LID = 120;
    static final int REQ_ALTERNATE_LOCAL_GID = 124;
    static final int REQ_PRIVATE_DATA = 164;
    static final int REQ_PRIVATE_DATA_SIZE = 92;

    /** REQ transport service types ({@code cm_req_set_qp_type}): RC 0, UC 1, "see extended" (XRC) 3. */
    static final int TRANSPORT_RC = 0;
    static final int TRANSPORT_UC = 1;

    // ---- REP
    static final int REP_LOCAL_QKEY = 32;
    static final int REP_LOCAL_QPN = 36;            // 24 bits
    static final int REP_LOCAL_EECN = 40;           // 24 bits
    static final int REP_STARTING_PSN = 44;         // 24 bits
    static final int REP_RESPONDER_RESOURCES = 48;
    static final int REP_INITIATOR_DEPTH = 49;
    static final int REP_BYTE50 = 50;               // [7:3] target ACK delay, [2:1] failover accepted, [0] flow control
    static final int REP_BYTE51 = 51;               // [7:5] RNR retry count, [4] SRQ
    static final int REP_LOCAL_CA_GUID = 52;
    static final int REP_PRIVATE_DATA = 60;
    static final int REP_PRIVATE_DATA_SIZE = 196;

    // ---- MRA
    static final int MRA_BYTE32 = 32;               // [7:6] message MRAed
    static final int MRA_BYTE33 = 33;               // [7:3] service timeout
    static final int MRA_PRIVATE_DATA = 34;
    static final int MRA_PRIVATE_DATA_SIZE = 222;

    // ---- REJ
    static final int REJ_BYTE32 = 32;               // [7:6] message rejected
    static final int REJ_BYTE33 = 33;               // [7:1] rejected info length
    static final int REJ_REASON = 34;
    static final int REJ_ARI = 36;
    static final int REJ_ARI_SIZE = 72;
    static final int REJ_PRIVATE_DATA = 108;
    static final int REJ_PRIVATE_DATA_SIZE = 148;

    /** MessageRejected / MessageMRAed values ({@code enum cm_msg_response}). */
    static final int MSG_REQ = 0;
    static final int MSG_REP = 1;
    static final int MSG_OTHER = 2;

    // ---- RTU, DREQ, DREP
    static final int RTU_PRIVATE_DATA = 32;
    static final int RTU_PRIVATE_DATA_SIZE = 224;
    static final int DREQ_REMOTE_QPN = 32;          // 24 bits
    static final int DREQ_PRIVATE_DATA = 36;
    static final int DREQ_PRIVATE_DATA_SIZE = 220;
    static final int DREP_PRIVATE_DATA = 32;
    static final int DREP_PRIVATE_DATA_SIZE = 224;

    // ---- SIDR
    static final int SIDR_REQUEST_ID = 24;
    static final int SIDR_REQ_PKEY = 28;
    static final int SIDR_REQ_SERVICE_ID = 32;
    static final int SIDR_REQ_PRIVATE_DATA = 40;
    static final int SIDR_REQ_PRIVATE_DATA_SIZE = 216;
    static final int SIDR_REP_STATUS = 28;
    static final int SIDR_REP_ADD_INFO_LEN = 29;
    static final int SIDR_REP_QPN = 32;             // 24 bits
    static final int SIDR_REP_SERVICE_ID = 36;
    static final int SIDR_REP_QKEY = 44;
    static final int SIDR_REP_ADD_INFO = 48;
    static final int SIDR_REP_PRIVATE_DATA = 120;
    static final int SIDR_REP_PRIVATE_DATA_SIZE = 136;

    /** SIDR_REP statuses ({@code enum ib_cm_sidr_status}). */
    static final int SIDR_SUCCESS = 0;
    static final int SIDR_UNSUPPORTED = 1;
    static final int SIDR_REJECT = 2;
    static final int SIDR_NO_QP = 3;
    static final int SIDR_REDIRECT = 4;
    static final int SIDR_UNSUPPORTED_VERSION = 5;

    /** {@code CMA_CM_RESPONSE_TIMEOUT} upstream: 20 (4.096 us * 2^20, about 4.3 s). */
    static final int CMA_CM_RESPONSE_TIMEOUT = 20;
    /** {@code CMA_MAX_CM_RETRIES}. */
    static final int CMA_MAX_CM_RETRIES = 15;
    /** {@code CMA_IBOE_PACKET_LIFETIME}: the route's packet life time on RoCE. */
    static final int CMA_IBOE_PACKET_LIFETIME = 16;
    /** The service timeout of the MRA Linux sends after a duplicate REQ/REP ({@code CMA_CM_MRA_SETTING}). */
    static final int CMA_CM_MRA_SETTING = 24;

    /** {@code cm_convert_to_ms}: 4.096 us * 2^t, approximated as 2^(t-8) ms. */
    static long convertToMs(int ibaTime) {
        return 1L << Math.max(ibaTime - 8, 0);
    }

    /**
     * {@code cm_ack_timeout}: 4.096 us * 2^ack_timeout = 4.096 us * 2^ack_delay + 2 * 4.096 us * 2^life_time,
     * as the larger of the two, rounded up when the other is within 50 %.
     */
    static int ackTimeout(int caAckDelay, int packetLifeTime) {
        int t = packetLifeTime + 1;
        if (t >= caAckDelay) {
            t += caAckDelay >= t - 1 ? 1 : 0;
        } else {
            t = caAckDelay + (t >= caAckDelay - 1 ? 1 : 0);
        }
        return Math.min(31, t);
    }

    /**
     * {@code cm_format_req}: a REQ, as rdma_cm sends it on RoCE (no alternate path; LIDs 0 for a subnet-local
     * path, else permissive; the local ACK timeout from the device's ACK delay and the path's packet life time).
     *
     * @param tid      the transaction ID
     * @param localId  the local communication ID
     * @param caGuid   the local CA GUID
     * @param ackDelay the local CA ACK delay
     * @param p        the request's parameters
     * @return the 256-byte MAD
     */
    static byte[] formatReq(long tid, int localId, long caGuid, int ackDelay, IbCm.ReqParam p) {
        byte[] m = new byte[Mad.SIZE];
        Mad.cmHeader(m, REQ, tid);
        Mad.put32(m, LOCAL_COMM_ID, localId);
        Mad.put64(m, REQ_SERVICE_ID, p.serviceId());
        Mad.put64(m, REQ_LOCAL_CA_GUID, caGuid);
        Mad.put24(m, REQ_LOCAL_QPN, p.qpNum());
        Mad.put8(m, REQ_RESPONDER_RESOURCES, p.responderResources());
        Mad.put8(m, REQ_INITIATOR_DEPTH, p.initiatorDepth());
        Mad.bits(m, REQ_BYTE67, 3, 5, p.remoteCmResponseTimeout());
        Mad.bits(m, REQ_BYTE67, 1, 2, p.qpType() == QpType.UC ? TRANSPORT_UC : TRANSPORT_RC);
        Mad.bits(m, REQ_BYTE67, 0, 1, p.flowControl() ? 1 : 0);
        Mad.put24(m, REQ_STARTING_PSN, p.startingPsn());
        Mad.bits(m, REQ_BYTE71, 3, 5, p.localCmResponseTimeout());
        Mad.bits(m, REQ_BYTE71, 0, 3, p.retryCount());
        Mad.put16(m, REQ_PKEY, p.path().pkey());
        Mad.bits(m, REQ_BYTE74, 4, 4, p.path().mtu().value());
        Mad.bits(m, REQ_BYTE74, 0, 3, p.rnrRetryCount());
        Mad.bits(m, REQ_BYTE75, 4, 4, p.maxCmRetries());
        Mad.bits(m, REQ_BYTE75, 3, 1, p.srq() ? 1 : 0);
        PathRec path = p.path();
        Mad.putGid(m, REQ_PRIMARY_LOCAL_GID, path.sgid());
        Mad.putGid(m, REQ_PRIMARY_REMOTE_GID, path.dgid());
        if (path.hopLimit() <= 1) {
            Mad.put16(m, REQ_PRIMARY_LOCAL_LID, 0); // RoCE has no LIDs: the path's are 0
            Mad.put16(m, REQ_PRIMARY_REMOTE_LID, 0);
        } else {
            Mad.put16(m, REQ_PRIMARY_LOCAL_LID, 0xFFFF); // IB_LID_PERMISSIVE: "work-around" for routed paths
            Mad.put16(m, REQ_PRIMARY_REMOTE_LID, 0xFFFF);
        }
        Mad.put32(m, REQ_PRIMARY_FLOW_LABEL, (path.flowLabel() & 0xF_FFFF) << 12);
        Mad.bits(m, REQ_PRIMARY_PACKET_RATE, 0, 6, 0); // IB_RATE_PORT_CURRENT
        Mad.put8(m, REQ_PRIMARY_TRAFFIC_CLASS, path.trafficClass());
        Mad.put8(m, REQ_PRIMARY_HOP_LIMIT, path.hopLimit());
        Mad.bits(m, REQ_BYTE118, 4, 4, path.sl());
        Mad.bits(m, REQ_BYTE118, 3, 1, path.hopLimit() <= 1 ? 1 : 0);
        Mad.bits(m, REQ_BYTE119, 3, 5, ackTimeout(ackDelay, path.packetLifeTime()));
        Mad.putData(m, REQ_PRIVATE_DATA, REQ_PRIVATE_DATA_SIZE, p.privateData());

        return m;
    }

    /**
     * {@code cm_format_rep}.
     *
     * @param tid      the REQ's transaction ID
     * @param localId  the local communication ID
     * @param remoteId the peer's communication ID
     * @param caGuid   the local CA GUID
     * @param ackDelay the local CA ACK delay (TargetACKDelay)
     * @param p        the reply's parameters
     * @return the 256-byte MAD
     */
    static byte[] formatRep(long tid, int localId, int remoteId, long caGuid, int ackDelay, IbCm.RepParam p) {
        byte[] m = new byte[Mad.SIZE];
        Mad.cmHeader(m, REP, tid);
        Mad.put32(m, LOCAL_COMM_ID, localId);
        Mad.put32(m, REMOTE_COMM_ID, remoteId);
        Mad.put24(m, REP_STARTING_PSN, p.startingPsn());
        Mad.put8(m, REP_RESPONDER_RESOURCES, p.responderResources());
        Mad.put8(m, REP_INITIATOR_DEPTH, p.initiatorDepth());
        Mad.bits(m, REP_BYTE50, 3, 5, ackDelay);
        Mad.bits(m, REP_BYTE50, 1, 2, 0);
        Mad.bits(m, REP_BYTE50, 0, 1, p.flowControl() ? 1 : 0);
        Mad.bits(m, REP_BYTE51, 5, 3, p.rnrRetryCount());
        Mad.bits(m, REP_BYTE51, 4, 1, p.srq() ? 1 : 0);
        Mad.put64(m, REP_LOCAL_CA_GUID, caGuid);
        Mad.put24(m, REP_LOCAL_QPN, p.qpNum());
        Mad.putData(m, REP_PRIVATE_DATA, REP_PRIVATE_DATA_SIZE, p.privateData());
        return m;
    }

    /** {@code cm_format_rtu}. */
    static void formatRtu(byte[] m, IbCmId id, byte[] pd) {
        Mad.cmHeader(m, CmMsg.RTU, id.tid);
        Mad.put32(m, CmMsg.LOCAL_COMM_ID, id.localId);
        Mad.put32(m, CmMsg.REMOTE_COMM_ID, id.remoteId);
        Mad.putData(m, CmMsg.RTU_PRIVATE_DATA, CmMsg.RTU_PRIVATE_DATA_SIZE, pd);
    }

    /** {@code cm_format_mra}. */
    static void formatMra(byte[] m, IbCmId id, int msgMraed, int serviceTimeout, byte[] pd) {
        Mad.cmHeader(m, CmMsg.MRA, id.tid);
        Mad.bits(m, CmMsg.MRA_BYTE32, 6, 2, msgMraed);
        Mad.put32(m, CmMsg.LOCAL_COMM_ID, id.localId);
        Mad.put32(m, CmMsg.REMOTE_COMM_ID, id.remoteId);
        Mad.bits(m, CmMsg.MRA_BYTE33, 3, 5, serviceTimeout);
        Mad.putData(m, CmMsg.MRA_PRIVATE_DATA, CmMsg.MRA_PRIVATE_DATA_SIZE, pd);
    }

    /** {@code cm_format_rej}: the comm IDs and message-rejected field by the ID's state. */
    static void formatRej(byte[] m, IbCmId id, int reason, byte[] ari, byte[] pd) {
        Mad.cmHeader(m, CmMsg.REJ, id.tid);
        Mad.put32(m, CmMsg.REMOTE_COMM_ID, id.remoteId);
        switch (id.state) {
            case REQ_RCVD -> {
                Mad.put32(m, CmMsg.LOCAL_COMM_ID, 0);
                Mad.bits(m, CmMsg.REJ_BYTE32, 6, 2, CmMsg.MSG_REQ);
            }
            case MRA_REQ_SENT -> {
                Mad.put32(m, CmMsg.LOCAL_COMM_ID, id.localId);
                Mad.bits(m, CmMsg.REJ_BYTE32, 6, 2, CmMsg.MSG_REQ);
            }
            case REP_RCVD, MRA_REP_SENT -> {
                Mad.put32(m, CmMsg.LOCAL_COMM_ID, id.localId);
                Mad.bits(m, CmMsg.REJ_BYTE32, 6, 2, CmMsg.MSG_REP);
            }
            default -> {
                Mad.put32(m, CmMsg.LOCAL_COMM_ID, id.localId);
                Mad.bits(m, CmMsg.REJ_BYTE32, 6, 2, CmMsg.MSG_OTHER);
            }
        }
        Mad.put16(m, CmMsg.REJ_REASON, reason);
        if (ari != null && ari.length > 0) {
            Mad.bits(m, CmMsg.REJ_BYTE33, 1, 7, ari.length);
            Mad.putData(m, CmMsg.REJ_ARI, CmMsg.REJ_ARI_SIZE, ari);
        }
        Mad.putData(m, CmMsg.REJ_PRIVATE_DATA, CmMsg.REJ_PRIVATE_DATA_SIZE, pd);
    }

    /** {@code cm_format_drep}. */
    static void formatDrep(byte[] m, IbCmId id, byte[] pd) {
        Mad.cmHeader(m, CmMsg.DREP, id.tid);
        Mad.put32(m, CmMsg.LOCAL_COMM_ID, id.localId);
        Mad.put32(m, CmMsg.REMOTE_COMM_ID, id.remoteId);
        Mad.putData(m, CmMsg.DREP_PRIVATE_DATA, CmMsg.DREP_PRIVATE_DATA_SIZE, pd);
    }
}
