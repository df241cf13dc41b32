// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;

import static org.rdma4j.cm.IbCmId.State.IDLE;
import static org.rdma4j.cm.IbCmId.State.SIDR_REQ_RCVD;
import static org.rdma4j.cm.IbCmId.State.SIDR_REQ_SENT;

/**
 * The SIDR half of the IB CM ({@code cm.c}'s {@code ib_send_cm_sidr_req}, {@code cm_sidr_req_handler},
 * {@code ib_send_cm_sidr_rep}, {@code cm_sidr_rep_handler}): a UD "connection" is one request and its
 * answer (the peer's QPN and Q_Key), retransmitted by the MAD layer, duplicates recognised by (request
 * ID, source GID). Runs under the CM lock, on {@link IbCm}'s tables.
 */
final class IbCmSidr {
    private final IbCm ibcm;

    IbCmSidr(IbCm ibcm) {
        this.ibcm = ibcm;
    }

    /** {@code ib_send_cm_sidr_req}. */
    void sendReq(IbCmId id, PathRec path, long serviceId, long timeoutMs, int maxCmRetries, byte[] pd) {
        if (pd != null && pd.length > CmMsg.SIDR_REQ_PRIVATE_DATA_SIZE) {
            throw new VerbsException(Errno.EINVAL, "SIDR_REQ private data of " + pd.length + " bytes (at most 216)");
        }
        if (!ibcm.initAvByPath(id, path)) {
            throw new VerbsException(Errno.EINVAL, "ib_send_cm_sidr_req: " + id.port + " does not own GID " + path.sgid());
        }
        if (id.state != IDLE) {
            throw new VerbsException(Errno.EINVAL, "ib_send_cm_sidr_req: the CM ID is " + id.state);
        }
        id.serviceId = serviceId;
        id.timeoutMs = timeoutMs;
        id.maxCmRetries = maxCmRetries;
        byte[] m = new byte[Mad.SIZE];
        Mad.cmHeader(m, CmMsg.SIDR_REQ, ibcm.formTid(id));
        Mad.put32(m, CmMsg.SIDR_REQUEST_ID, id.localId);
        Mad.put16(m, CmMsg.SIDR_REQ_PKEY, path.pkey());
        Mad.put64(m, CmMsg.SIDR_REQ_SERVICE_ID, serviceId);
        Mad.putData(m, CmMsg.SIDR_REQ_PRIVATE_DATA, CmMsg.SIDR_REQ_PRIVATE_DATA_SIZE, pd);
        id.msg = ibcm.mad.send(m, id.av, ibcm, new IbCmId.SendContext(id, SIDR_REQ_SENT), timeoutMs, maxCmRetries);
        id.state = SIDR_REQ_SENT;
        id.msgState = SIDR_REQ_SENT;
    }

    /** {@code cm_sidr_req_handler}. */
    void reqHandler(MadRecv r) {
        byte[] m = r.mad();
        IbCmId id = ibcm.allocId(r.port(), null, null);
        id.remoteId = Mad.get32(m, CmMsg.SIDR_REQUEST_ID);
        id.serviceId = Mad.get64(m, CmMsg.SIDR_REQ_SERVICE_ID);
        id.tid = Mad.tid(m);
        id.av = r.replyAv();
        id.sidrDgid = r.sgid();
        IbCm.SidrKey k = new IbCm.SidrKey(id.remoteId, id.sidrDgid);
        if (ibcm.remoteSidrTable.containsKey(k)) {
            ibcm.cm.count(CmCounter.CM_DUPLICATE_SIDR_REQ);
            return;
        }
        ibcm.remoteSidrTable.put(k, id);
        id.inSidrTable = true;
        id.state = SIDR_REQ_RCVD;
        IbCmId listener = ibcm.findListen(r.port(), id.serviceId);
        if (listener == null) {
            sendRep(id, CmMsg.SIDR_UNSUPPORTED, 0, 0, null);
            ibcm.destroyId(id, 0);
            return;
        }
        id.handler = listener.handler;
        id.context = listener.context;
        ibcm.localIds.put(id.localId, id);
        ibcm.deliver(id, new IbCmEvent(IbCmEvent.Type.SIDR_REQ_RECEIVED, r, listener));
    }

    /** {@code ib_send_cm_sidr_rep}. */
    void sendRep(IbCmId id, int status, int qpNum, int qkey, byte[] pd) {
        if (pd != null && pd.length > CmMsg.SIDR_REP_PRIVATE_DATA_SIZE) {
            throw new VerbsException(Errno.EINVAL, "SIDR_REP private data of " + pd.length + " bytes (at most 136)");
        }
        if (id.state != SIDR_REQ_RCVD) {
            throw new VerbsException(Errno.EINVAL, "the UD request was answered already (CM state " + id.state + ")");
        }
        byte[] m = new byte[Mad.SIZE];
        Mad.cmHeader(m, CmMsg.SIDR_REP, id.tid);
        Mad.put32(m, CmMsg.SIDR_REQUEST_ID, id.remoteId);
        Mad.put8(m, CmMsg.SIDR_REP_STATUS, status);
        Mad.put24(m, CmMsg.SIDR_REP_QPN, qpNum);
        Mad.put64(m, CmMsg.SIDR_REP_SERVICE_ID, id.serviceId);
        Mad.put32(m, CmMsg.SIDR_REP_QKEY, qkey);
        Mad.putData(m, CmMsg.SIDR_REP_PRIVATE_DATA, CmMsg.SIDR_REP_PRIVATE_DATA_SIZE, pd);
        ibcm.mad.sendOnce(m, id.av);
        id.state = IDLE;
        if (id.inSidrTable) {
            ibcm.remoteSidrTable.remove(new IbCm.SidrKey(id.remoteId, id.sidrDgid), id);
            id.inSidrTable = false;
        }
    }

    /** {@code cm_sidr_rep_handler}. */
    void repHandler(MadRecv r) {
        byte[] m = r.mad();
        IbCmId id = ibcm.acquire(Mad.get32(m, CmMsg.SIDR_REQUEST_ID), 0);
        if (id == null) {
            ibcm.dropUnmatched(r);
            return;
        }
        if (id.state != SIDR_REQ_SENT) {
            ibcm.cm.count(CmCounter.CM_DROP_BAD_STATE);
            return;
        }
        id.state = IDLE;
        ibcm.mad.cancel(id.msg);
        ibcm.deliver(id, IbCmEvent.of(IbCmEvent.Type.SIDR_REP_RECEIVED, r));
    }
}
