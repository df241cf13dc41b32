// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;

import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.IbSocketAddress;
import org.rdma4j.verbs.cm.UdParam;
import org.rdma4j.verbs.spi.CmEventInfo;
import org.rdma4j.verbs.spi.CmEventSink;

/**
 * What an rdma_cm ID of the user-space CM does with the events of the IB CM under it, as Linux's cma.c
 * handles them: {@code cma_ib_req_handler} (a REQ or SIDR_REQ for a listener becomes a new ID and a
 * CONNECT_REQUEST), {@code cma_ib_handler} (REP, RTU, REJ, DREQ/DREP, timeouts and TIMEWAIT become the ID's
 * rdma_cm events, with librdmacm's RTR/RTS on a REP) and {@code cma_sidr_rep_handler}. {@link UserCmId} is the
 * other direction: the calls an application makes. Both run under the CM lock.
 */
final class CmaIbHandler {
    private CmaIbHandler() {
    }

    /**
     * {@code cma_ib_req_handler} with {@code cma_ib_id_from_event}: finds the rdma_cm listener the request is
     * for (address, device, QP type), makes the new ID, reports CONNECT_REQUEST. Returns what cma returns:
     * a negative errno rejects the request (REJ 28), -ENOMEM drops it unanswered (full backlog).
     */
    static int requestHandler(IbCmId ibId, IbCmEvent e) {
        if (e.type() != IbCmEvent.Type.REQ_RECEIVED && e.type() != IbCmEvent.Type.SIDR_REQ_RECEIVED) {
            return 0;
        }
        UserCm.BindList bl = (UserCm.BindList) e.listenId().context;
        boolean sidr = e.type() == IbCmEvent.Type.SIDR_REQ_RECEIVED;
        byte[] m = e.mad();
        MadRecv r = e.recv();
        int pdOff = sidr ? CmMsg.SIDR_REQ_PRIVATE_DATA : CmMsg.REQ_PRIVATE_DATA;
        int pdLen = sidr ? CmMsg.SIDR_REQ_PRIVATE_DATA_SIZE : CmMsg.REQ_PRIVATE_DATA_SIZE;
        boolean afIb = bl.ibListens.isEmpty() || bl.owners.isEmpty() ? false : bl.owners.getFirst().src instanceof IbSocketAddress;
        InetAddress peerIp;
        InetAddress ourIp;
        int peerPort;
        int offset;
        if (afIb) {
            offset = 0;
            peerIp = r.sgid().toInetAddress();
            ourIp = r.dgid().toInetAddress();
            peerPort = 0;
        } else {
            CmaHeader h = CmaHeader.parse(m, pdOff);
            if (h == null) {
                r.port().cm.count(CmCounter.CM_DROP_MALFORMED);
                return -Errno.EINVAL.value(); // cma_save_ip_info fails: REJ 28
            }
            offset = CmaHeader.SIZE;
            peerIp = h.src();
            ourIp = h.dst();
            peerPort = h.srcPort();
        }
        // cma_find_listener / cma_match_private_data: the listener's address, the device
        UserCmId l = null;
        for (UserCmId cand : bl.owners) {
            if (cand.state != UserCmId.State.LISTEN || cand.port != null && cand.port != r.port()) {
                continue;
            }
            InetAddress lip = UserCmId.ipOf(cand.src);
            if (lip == null) {
                boolean v6any = cand.src instanceof InetSocketAddress i && i.getAddress() instanceof Inet6Address;
                boolean peerV4 = ourIp instanceof Inet4Address;
                if (!afIb && peerV4 && v6any && cand.afonly == 1) {
                    continue;
                }
                if (!afIb && !peerV4 && !v6any) {
                    continue; // an IPv4 wildcard does not take IPv6 requests
                }
                l = cand;
                break;
            }
            if (RdmaCmAddresses.same(lip, ourIp)) {
                l = cand;
                break;
            }
        }
        if (l == null) {
            return -Errno.ECONNREFUSED.value();
        }
        // cma_ib_check_req_qp_type
        QpType reqType = sidr ? QpType.UD : ibId.qpType;
        if (l.qpType != reqType) {
            return -Errno.EINVAL.value();
        }
        // validate_net_dev / cma_validate_port: the address the request is for must be a GID of the port it came in on
        if (!r.port().owns(ourIp) || ourIp.isLoopbackAddress() && !r.port().owns(ourIp)) {
            return -Errno.EHOSTUNREACH.value();
        }
        UserCmId conn = new UserCmId(l.cm, null, l.ps, reqType, l);
        conn.state = UserCmId.State.CONNECT;
        conn.port = r.port();
        int ourPort = (int) (bl.serviceId & 0xFFFF);
        conn.src = afIb ? new IbSocketAddress(Gid.ofInetAddress(ourIp), bl.serviceId) : new InetSocketAddress(ourIp, ourPort);
        conn.dst = afIb ? new IbSocketAddress(r.sgid(), 0) : new InetSocketAddress(peerIp, peerPort);
        conn.ib = ibId;
        conn.tos = l.tos;
        conn.tosSet = l.tosSet;
        conn.ackTimeout = l.ackTimeout;
        conn.ackTimeoutSet = l.ackTimeoutSet;
        ibId.context = conn;
        byte[] pd = Mad.slice(m, pdOff + offset, pdLen - offset);
        CmEventInfo info;
        if (sidr) {
            ibId.handler = CmaIbHandler::ibHandler;
            info = new CmEventInfo(CmEventType.CONNECT_REQUEST, 0, pd, null, null, null);
        } else {
            ibId.handler = CmaIbHandler::ibHandler;
            conn.path = new PathRec(r.dgid(), ibId.av.dgid(), ibId.av.hopLimit(), ibId.av.trafficClass(),
                    ibId.av.flowLabel(), ibId.pkey, ibId.av.sl(), ibId.pathMtu, Math.max(0, ibId.avTimeout - 1));
            ConnParam p = new ConnParam().responderResources(ibId.responderResources).initiatorDepth(ibId.initiatorDepth)
                    .flowControl(Mad.bits(m, CmMsg.REQ_BYTE67, 0, 1) == 1).retryCount(ibId.retryCount)
                    .rnrRetryCount(ibId.rnrRetryCount).srq(Mad.bits(m, CmMsg.REQ_BYTE75, 3, 1) == 1)
                    .qpNum(ibId.remoteQpn);
            conn.reqResponderResources = ibId.responderResources;
            conn.reqInitiatorDepth = ibId.initiatorDepth;
            info = new CmEventInfo(CmEventType.CONNECT_REQUEST, 0, pd, p, null, null);
        }
        l.cm.ids.add(conn);
        CmEventSink s = l.sink.connectRequest(conn, info);
        if (s == null) {
            l.cm.ids.remove(conn);
            conn.state = UserCmId.State.DESTROYING;
            ibId.context = null;
            l.cm.count(CmCounter.CM_BACKLOG_DROPS);
            return -Errno.ENOMEM.value();
        }
        conn.sink = s;
        conn.recordEvent(info);
        if (!sidr) {
            // cma_ib_req_handler: the delayed MRA, so that a duplicate REQ is answered with an MRA
            l.cm.ibcm.sendMra(ibId, IbCm.MRA_FLAG_DELAY | CmMsg.CMA_CM_MRA_SETTING, null);
        }
        return 0;
    }

    /**
     * {@code cma_ib_handler} and {@code cma_sidr_rep_handler}, with librdmacm's handling of the REP when the ID
     * has a QP ({@code ucma_process_conn_resp}: RTR, RTS, then the RTU).
     */
    static int ibHandler(IbCmId ibId, IbCmEvent e) {
        if (!(ibId.context instanceof UserCmId id)) {
            return 0;
        }
        return onIbEvent(id, e);
    }

    private static int onIbEvent(UserCmId id, IbCmEvent e) {
        if (e.type() == IbCmEvent.Type.SIDR_REP_RECEIVED || e.type() == IbCmEvent.Type.SIDR_REQ_ERROR) {
            return onSidrRep(id, e);
        }
        boolean tw = e.type() == IbCmEvent.Type.TIMEWAIT_EXIT;
        if (!tw && id.state != UserCmId.State.CONNECT || tw && id.state != UserCmId.State.DISCONNECT) {
            return 0;
        }
        switch (e.type()) {
            case REQ_ERROR, REP_ERROR -> id.post(CmEventInfo.of(CmEventType.UNREACHABLE, -Errno.ETIMEDOUT.value(),
                    "no answer from the peer after " + id.maxCmRetries + " retransmissions (is it up? does its firewall"
                            + " pass UDP 4791?)"));
            case REP_RECEIVED -> {
                if (id.qpType != QpType.UD) {
                    id.cm.ibcm.sendMra(id.ib, IbCm.MRA_FLAG_DELAY | CmMsg.CMA_CM_MRA_SETTING, null);
                }
                byte[] m = e.mad();
                ConnParam p = new ConnParam().responderResources(Mad.get8(m, CmMsg.REP_INITIATOR_DEPTH))
                        .initiatorDepth(Mad.get8(m, CmMsg.REP_RESPONDER_RESOURCES))
                        .flowControl(Mad.bits(m, CmMsg.REP_BYTE50, 0, 1) == 1)
                        .rnrRetryCount(Mad.bits(m, CmMsg.REP_BYTE51, 5, 3))
                        .srq(Mad.bits(m, CmMsg.REP_BYTE51, 4, 1) == 1).qpNum(Mad.get24(m, CmMsg.REP_LOCAL_QPN));
                byte[] pd = Mad.slice(m, CmMsg.REP_PRIVATE_DATA, CmMsg.REP_PRIVATE_DATA_SIZE);
                if (id.qp == null) {
                    id.post(new CmEventInfo(CmEventType.CONNECT_RESPONSE, 0, pd, p, null, null));
                    return 0;
                }
                try {
                    id.modifyRtr(ConnParam.MAX_DEPTH);
                    id.modifyRts(ConnParam.MAX_DEPTH);
                    id.cm.ibcm.sendRtu(id.ib, null);
                } catch (VerbsException ex) {
                    // ucma_process_conn_resp: QP to ERR, rdma_reject, CONNECT_ERROR with the error
                    id.modifyErr();
                    try {
                        id.cm.ibcm.sendRej(id.ib, 28, null, null);
                    } catch (VerbsException ignored) {
                        // nothing left to reject
                    }
                    id.post(new CmEventInfo(CmEventType.CONNECT_ERROR, -ex.errno().value(), pd, p, null,
                            "moving the QP to RTR/RTS failed: " + ex.getMessage()));
                    return 0;
                }
                id.post(new CmEventInfo(CmEventType.ESTABLISHED, 0, pd, p, null, null));
            }
            case RTU_RECEIVED, USER_ESTABLISHED -> id.post(CmEventInfo.of(CmEventType.ESTABLISHED, 0, null));
            case DREQ_ERROR, DREQ_RECEIVED, DREP_RECEIVED -> {
                id.state = UserCmId.State.DISCONNECT;
                int status = e.type() == IbCmEvent.Type.DREQ_ERROR ? -Errno.ETIMEDOUT.value() : 0;
                byte[] pd = e.recv() == null ? null : Mad.slice(e.mad(),
                        e.type() == IbCmEvent.Type.DREQ_RECEIVED ? CmMsg.DREQ_PRIVATE_DATA : CmMsg.DREP_PRIVATE_DATA,
                        e.type() == IbCmEvent.Type.DREQ_RECEIVED ? CmMsg.DREQ_PRIVATE_DATA_SIZE : CmMsg.DREP_PRIVATE_DATA_SIZE);
                id.post(new CmEventInfo(CmEventType.DISCONNECTED, status, pd, null, null,
                        status != 0 ? "the peer did not answer the DREQ" : null));
            }
            case TIMEWAIT_EXIT -> id.post(CmEventInfo.of(CmEventType.TIMEWAIT_EXIT, 0, null));
            case MRA_RECEIVED -> {
                // ignored by rdma_cm
            }
            case REJ_RECEIVED -> {
                id.modifyErr();
                byte[] m = e.mad();
                int reason = Mad.get16(m, CmMsg.REJ_REASON);
                var rr = org.rdma4j.verbs.cm.RejectReason.ofValue(reason);
                id.post(new CmEventInfo(CmEventType.REJECTED, reason,
                        Mad.slice(m, CmMsg.REJ_PRIVATE_DATA, CmMsg.REJ_PRIVATE_DATA_SIZE), null, null,
                        "rejected: " + (rr == null ? "reason " + reason : rr.description())
                                + (reason == 8 ? " (nobody listens on that port)" : "")));
            }
            default -> {
            }
        }
        return 0;
    }

    /** {@code cma_sidr_rep_handler}. */
    private static int onSidrRep(UserCmId id, IbCmEvent e) {
        if (id.state != UserCmId.State.CONNECT) {
            return 0;
        }
        if (e.type() == IbCmEvent.Type.SIDR_REQ_ERROR) {
            id.post(CmEventInfo.of(CmEventType.UNREACHABLE, -Errno.ETIMEDOUT.value(), "no answer to the SIDR_REQ"));
            return 0;
        }
        byte[] m = e.mad();
        byte[] pd = Mad.slice(m, CmMsg.SIDR_REP_PRIVATE_DATA, CmMsg.SIDR_REP_PRIVATE_DATA_SIZE);
        int status = Mad.get8(m, CmMsg.SIDR_REP_STATUS);
        if (status != CmMsg.SIDR_SUCCESS) {
            id.post(new CmEventInfo(CmEventType.UNREACHABLE, status, pd, null, null, "SIDR status " + status
                    + (status == CmMsg.SIDR_UNSUPPORTED ? " (nobody listens on that port)"
                    : status == CmMsg.SIDR_REJECT ? " (rejected)" : "")));
            return 0;
        }
        int rqkey = Mad.get32(m, CmMsg.SIDR_REP_QKEY);
        if (id.qkey != 0 && id.qkey != rqkey) {
            id.post(CmEventInfo.of(CmEventType.ADDR_ERROR, -Errno.EINVAL.value(), "the peer's Q_Key 0x"
                    + Integer.toHexString(rqkey) + " differs from this ID's"));
            return 0;
        }
        id.qkey = rqkey;
        UdParam ud = new UdParam(id.ib.av.ahAttributes(), Mad.get24(m, CmMsg.SIDR_REP_QPN), rqkey);
        id.post(new CmEventInfo(CmEventType.ESTABLISHED, 0, pd, null, ud, null));
        return 0;
    }
}
