// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import java.util.HashMap;
import java.util.Map;

import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.VerbsException;

import static org.rdma4j.cm.IbCmId.State.DREQ_RCVD;
import static org.rdma4j.cm.IbCmId.State.DREQ_SENT;
import static org.rdma4j.cm.IbCmId.State.ESTABLISHED;
import static org.rdma4j.cm.IbCmId.State.IDLE;
import static org.rdma4j.cm.IbCmId.State.LISTEN;
import static org.rdma4j.cm.IbCmId.State.MRA_REP_RCVD;
import static org.rdma4j.cm.IbCmId.State.MRA_REP_SENT;
import static org.rdma4j.cm.IbCmId.State.MRA_REQ_RCVD;
import static org.rdma4j.cm.IbCmId.State.MRA_REQ_SENT;
import static org.rdma4j.cm.IbCmId.State.REP_RCVD;
import static org.rdma4j.cm.IbCmId.State.REP_SENT;
import static org.rdma4j.cm.IbCmId.State.REQ_RCVD;
import static org.rdma4j.cm.IbCmId.State.REQ_SENT;
import static org.rdma4j.cm.IbCmId.State.SIDR_REQ_RCVD;
import static org.rdma4j.cm.IbCmId.State.SIDR_REQ_SENT;
import static org.rdma4j.cm.IbCmId.State.TIMEWAIT;

/**
 * The IB Communication Manager (IBA vol 1 ch. 12) as Linux's {@code drivers/infiniband/core/cm.c} runs it:
 * the connection state machine (REQ, MRA, REJ, REP, RTU, DREQ, DREP; SIDR_REQ/SIDR_REP for UD), with its
 * duplicate handling, stale-connection detection (REJ 10 and a DREQ on the old connection), TIMEWAIT,
 * identical retransmissions with the same TID, and the QP attributes it computes. Each method cites the
 * cm.c function it follows. Everything runs under the CM lock; handlers are called synchronously.
 *
 * <p>Communication IDs are a cyclic counter XORed with a random operand ({@code cm_alloc_id_priv}), the CA
 * GUID is the device's node GUID, TIDs are {@code hi_tid << 32 | local comm ID} ({@code cm_form_tid}).
 */
final class IbCm implements MadLayer.Agent {
    private static final System.Logger LOG = System.getLogger("org.rdma4j.cm");
    /** {@code IB_CM_MRA_FLAG_DELAY}: change the state as if an MRA were sent, without sending it. */
    static final int MRA_FLAG_DELAY = 0x80;
    /** The hi_tid of the CM's MAD agent. */
    private static final long HI_TID = 1;

    private record RemoteKey(long caGuid, int value) {
    }

    record SidrKey(int remoteId, Gid dgid) {
    }

    private record ListenKey(MadPort port, long serviceId) {
    }

    final UserCm cm;
    final MadLayer mad;
    /** The SIDR half (UD "connections"). */
    final IbCmSidr sidr;
    final Map<Integer, IbCmId> localIds = new HashMap<>();
    private final Map<RemoteKey, IbCmId.Timewait> remoteIdTable = new HashMap<>();
    private final Map<RemoteKey, IbCmId.Timewait> remoteQpTable = new HashMap<>();
    final Map<SidrKey, IbCmId> remoteSidrTable = new HashMap<>();
    private final Map<ListenKey, IbCmId> listeners = new HashMap<>();
    private final int randomOperand;
    private int localIdNext;

    IbCm(UserCm cm, MadLayer mad) {
        this.cm = cm;
        this.mad = mad;
        this.randomOperand = cm.random().nextInt();
        this.localIdNext = cm.random().nextInt() & 0x7FFF_FFFF;
        this.sidr = new IbCmSidr(this);
        mad.register(Mad.CLASS_CM, Mad.CM_CLASS_VERSION, 1 << Mad.METHOD_SEND, this);
    }

    /** {@return how many communications exist (every state but destroyed)} */
    int idCount() {
        return localIds.size();
    }

    // ------------------------------------------------------------------ IDs

    /** {@code ib_create_cm_id}: a new ID, visible to received MADs at once. */
    IbCmId createId(MadPort port, IbCmHandler handler, Object context) {
        IbCmId id = allocId(port, handler, context);
        localIds.put(id.localId, id);
        return id;
    }

    IbCmId allocId(MadPort port, IbCmHandler handler, Object context) {
        int id;
        do {
            id = (localIdNext++) ^ randomOperand;
        } while (id == 0 || localIds.containsKey(id));
        return new IbCmId(port, id, handler, context);
    }

    /** {@code cm_acquire_id}: the ID with this local ID whose stored remote ID is {@code remoteId}. */
    IbCmId acquire(int localId, int remoteId) {
        IbCmId id = localIds.get(localId);
        return id != null && id.remoteId == remoteId && !id.destroyed ? id : null;
    }

    /**
     * {@code ib_cm_insert_listen}: the listener for a service ID on a port, shared when it exists with the
     * same handler.
     *
     * @throws VerbsException EBUSY when another consumer listens on that service ID
     */
    IbCmId listen(MadPort port, long serviceId, IbCmHandler handler, Object context) {
        ListenKey k = new ListenKey(port, serviceId);
        IbCmId cur = listeners.get(k);
        if (cur != null) {
            if (cur.handler != handler) {
                throw new VerbsException(Errno.EBUSY, "service ID 0x" + Long.toHexString(serviceId) + " on " + port
                        + " has another listener");
            }
            cur.listenSharecount++;
            return cur;
        }
        IbCmId id = allocId(port, handler, context);
        id.serviceId = serviceId;
        id.state = LISTEN;
        id.listenSharecount = 1;
        listeners.put(k, id);
        return id;
    }

    /** {@code cm_find_listen}. */
    IbCmId findListen(MadPort port, long serviceId) {
        return listeners.get(new ListenKey(port, serviceId));
    }

    // ------------------------------------------------------------------ destroy (cm_destroy_id)

    /**
     * {@code ib_destroy_cm_id} / {@code cm_destroy_id}: what each state owes the peer when the ID goes
     * (REJ 4 for an outstanding REQ, REJ 28 for a pending request or reply, DREQ for a connection, DREP
     * for a received DREQ), then the ID is forgotten.
     *
     * @param err the handler's error that destroys it, or 0: -ENOMEM on a received REQ sends nothing
     */
    void destroyId(IbCmId id, int err) {
        if (id.destroyed) {
            return;
        }
        switch (id.state) {
            case LISTEN -> {
                if (--id.listenSharecount > 0) {
                    return;
                }
                listeners.remove(new ListenKey(id.port, id.serviceId), id);
            }
            case SIDR_REQ_SENT -> {
                id.state = IDLE;
                mad.cancel(id.msg);
            }
            case SIDR_REQ_RCVD -> sidr.sendRep(id, CmMsg.SIDR_REJECT, 0, 0, null);
            case REQ_SENT, MRA_REQ_RCVD -> {
                mad.cancel(id.msg);
                byte[] guid = new byte[8];
                Mad.put64(guid, 0, id.port.caGuid);
                sendRej(id, 4, guid, null); // IB_CM_REJ_TIMEOUT with our node GUID as ARI
            }
            case REQ_RCVD -> {
                if (err == -Errno.ENOMEM.value()) {
                    resetToIdle(id); // "Do not reject to allow future retries"
                } else {
                    sendRej(id, 28, null, null);
                }
            }
            case REP_SENT, MRA_REP_RCVD, MRA_REQ_SENT, REP_RCVD, MRA_REP_SENT -> {
                mad.cancel(id.msg);
                sendRej(id, 28, null, null);
            }
            case ESTABLISHED -> {
                sendDreq(id, null);
                if (id.state == DREQ_SENT) {
                    mad.cancel(id.msg);
                    enterTimewait(id);
                }
            }
            case DREQ_SENT -> {
                mad.cancel(id.msg);
                enterTimewait(id);
            }
            case DREQ_RCVD -> sendDrep(id, null);
            default -> {
            }
        }
        if (id.timewait != null) {
            cleanupTimewait(id.timewait);
            id.timewait = null;
        }
        if (id.inSidrTable) {
            remoteSidrTable.remove(new SidrKey(id.remoteId, id.sidrDgid), id);
            id.inSidrTable = false;
        }
        localIds.remove(id.localId, id);
        id.destroyed = true;
        // A TIMEWAIT timer already armed finds no ID at exit (cm_timewait_handler's lookup fails): fine.
    }

    // ------------------------------------------------------------------ timewait

    private void cleanupTimewait(IbCmId.Timewait tw) {
        if (tw.insertedRemoteId) {
            remoteIdTable.remove(new RemoteKey(tw.remoteCaGuid, tw.remoteId), tw);
            tw.insertedRemoteId = false;
        }
        if (tw.insertedRemoteQp) {
            remoteQpTable.remove(new RemoteKey(tw.remoteCaGuid, tw.remoteQpn), tw);
            tw.insertedRemoteQp = false;
        }
    }

    /** {@code cm_enter_timewait}: out of the remote tables, TIMEWAIT for convert(av.timeout) ms, then TIMEWAIT_EXIT. */
    private void enterTimewait(IbCmId id) {
        IbCmId.Timewait tw = id.timewait;
        if (tw != null) {
            cleanupTimewait(tw);
        }
        id.state = TIMEWAIT;
        long ms = CmMsg.convertToMs(id.avTimeout);
        int localId = id.localId;
        int remoteId = id.remoteId;
        int remoteQpn = id.remoteQpn;
        id.timewaitTimer = cm.timers.schedule(ms * 1_000_000L, () -> timewaitExit(localId, remoteId, remoteQpn));
        id.timewait = null;
    }

    /** {@code cm_timewait_handler}. */
    private void timewaitExit(int localId, int remoteId, int remoteQpn) {
        IbCmId id = acquire(localId, remoteId);
        if (id == null || id.state != TIMEWAIT || id.remoteQpn != remoteQpn) {
            return;
        }
        id.state = IDLE;
        deliver(id, IbCmEvent.of(IbCmEvent.Type.TIMEWAIT_EXIT, null));
    }

    private void resetToIdle(IbCmId id) {
        id.state = IDLE;
        if (id.timewait != null) {
            cleanupTimewait(id.timewait);
            id.timewait = null;
        }
    }

    /** {@code cm_process_work}: the handler, and destruction if it asks for it. */
    void deliver(IbCmId id, IbCmEvent e) {
        int ret = id.handler.handle(id, e);
        if (ret != 0) {
            destroyId(id, ret);
        }
    }

    // ------------------------------------------------------------------ AV

    /** {@code cm_init_av_by_path}: the port must own the path's source GID. */
    boolean initAvByPath(IbCmId id, PathRec path) {
        int idx = id.port.gidIndexOf(path.sgid());
        if (idx < 0 || path.pkey() != 0xFFFF) {
            return false;
        }
        id.av = new CmAv(id.port, path.dgid(), idx, path.hopLimit(), path.trafficClass(), path.flowLabel(), path.sl());
        id.avTimeout = path.packetLifeTime() + 1;
        return true;
    }

    long formTid(IbCmId id) {
        return (HI_TID << 32) | (id.localId & 0xFFFF_FFFFL);
    }

    private MadLayer.Send post(IbCmId id, byte[] m, long timeoutMs) {
        return mad.send(m, id.av, this, new IbCmId.SendContext(id, id.state), timeoutMs, id.maxCmRetries);
    }

    // ------------------------------------------------------------------ REQ

    /** What {@link #sendReq} needs ({@code struct ib_cm_req_param}). */
    record ReqParam(PathRec path, long serviceId, int qpNum, QpType qpType, int startingPsn, int responderResources,
                    int initiatorDepth, boolean flowControl, int retryCount, int rnrRetryCount,
                    int remoteCmResponseTimeout, int localCmResponseTimeout, int maxCmRetries, boolean srq,
                    byte[] privateData) {
    }

    /** {@code ib_send_cm_req} with {@code cm_format_req}. */
    void sendReq(IbCmId id, ReqParam p) {
        if (p.privateData() != null && p.privateData().length > CmMsg.REQ_PRIVATE_DATA_SIZE) {
            throw new VerbsException(Errno.EINVAL, "REQ private data of " + p.privateData().length + " bytes (at most 92)");
        }
        if (p.qpType() != QpType.RC && p.qpType() != QpType.UC) {
            throw new VerbsException(Errno.EINVAL, "a REQ connects RC or UC QPs, not " + p.qpType());
        }
        if (id.state != IDLE) {
            throw new VerbsException(Errno.EINVAL, "ib_send_cm_req: the CM ID is " + id.state);
        }
        if (!initAvByPath(id, p.path())) {
            throw new VerbsException(Errno.EINVAL, "ib_send_cm_req: " + id.port + " does not own GID " + p.path().sgid());
        }
        id.timewait = new IbCmId.Timewait(id.localId);
        id.serviceId = p.serviceId();
        id.timeoutMs = CmMsg.convertToMs(p.path().packetLifeTime()) * 2 + CmMsg.convertToMs(p.remoteCmResponseTimeout());
        id.maxCmRetries = p.maxCmRetries();
        id.initiatorDepth = p.initiatorDepth();
        id.responderResources = p.responderResources();
        id.retryCount = p.retryCount();
        id.pathMtu = p.path().mtu();
        id.pkey = p.path().pkey();
        id.qpType = p.qpType();

        byte[] m = CmMsg.formatReq(formTid(id), id.localId, id.port.caGuid, id.port.ackDelay, p);
        id.tid = Mad.tid(m);
        id.localQpn = p.qpNum();
        id.rqPsn = p.startingPsn();
        id.msg = post(id, m, id.timeoutMs);
        id.state = REQ_SENT;
        id.msgState = REQ_SENT;
    }

    /** {@code cm_req_handler} with {@code cm_match_req} and {@code cm_dup_req_handler}. */
    private void reqHandler(MadRecv r) {
        byte[] m = r.mad();
        int transport = Mad.bits(m, CmMsg.REQ_BYTE67, 1, 2);
        Mtu mtu;
        try {
            mtu = Mtu.ofValue(Mad.bits(m, CmMsg.REQ_BYTE74, 4, 4));
        } catch (VerbsException bad) {
            mtu = null;
        }
        long caGuid = Mad.get64(m, CmMsg.REQ_LOCAL_CA_GUID);
        int remoteId = Mad.get32(m, CmMsg.LOCAL_COMM_ID);
        IbCmId id = allocId(r.port(), null, null);
        id.remoteId = remoteId;
        id.serviceId = Mad.get64(m, CmMsg.REQ_SERVICE_ID);
        id.tid = Mad.tid(m);
        id.timeoutMs = CmMsg.convertToMs(Mad.bits(m, CmMsg.REQ_BYTE71, 3, 5));
        id.maxCmRetries = Mad.bits(m, CmMsg.REQ_BYTE75, 4, 4);
        id.remoteQpn = Mad.get24(m, CmMsg.REQ_LOCAL_QPN);
        id.initiatorDepth = Mad.get8(m, CmMsg.REQ_RESPONDER_RESOURCES);
        id.responderResources = Mad.get8(m, CmMsg.REQ_INITIATOR_DEPTH);
        id.pathMtu = mtu;
        id.pkey = Mad.get16(m, CmMsg.REQ_PKEY);
        id.sqPsn = Mad.get24(m, CmMsg.REQ_STARTING_PSN);
        id.retryCount = Mad.bits(m, CmMsg.REQ_BYTE71, 0, 3);
        id.rnrRetryCount = Mad.bits(m, CmMsg.REQ_BYTE74, 0, 3);
        id.qpType = transport == CmMsg.TRANSPORT_UC ? QpType.UC : QpType.RC;
        id.av = r.replyAv(); // cm_init_av_for_response
        id.avTimeout = 0;
        IbCmId.Timewait tw = new IbCmId.Timewait(id.localId);
        tw.remoteId = remoteId;
        tw.remoteCaGuid = caGuid;
        tw.remoteQpn = id.remoteQpn;
        id.timewait = tw;
        id.state = REQ_RCVD;

        // cm_match_req: a duplicate REQ?
        RemoteKey rid = new RemoteKey(caGuid, remoteId);
        IbCmId.Timewait dup = remoteIdTable.get(rid);
        if (dup != null) {
            IbCmId cur = acquire(dup.localId, dup.remoteId);
            cm.count(CmCounter.CM_DUPLICATE_REQ);
            if (cur != null) {
                dupReqHandler(r, cur);
            }
            return;
        }
        // a stale connection: the sender's (CA GUID, QPN) is in use by another of our connections
        RemoteKey rqp = new RemoteKey(caGuid, id.remoteQpn);
        IbCmId.Timewait stale = remoteQpTable.get(rqp);
        if (stale != null) {
            cm.count(CmCounter.CM_STALE_CONNECTIONS);
            IbCmId cur = acquire(stale.localId, stale.remoteId);
            issueRej(r, 10, CmMsg.MSG_REQ, null);
            if (cur != null) {
                sendDreq(cur, null);
            }
            return;
        }
        IbCmId listener = findListen(r.port(), id.serviceId);
        if (listener == null) {
            issueRej(r, 8, CmMsg.MSG_REQ, null); // IB_CM_REJ_INVALID_SERVICE_ID
            return;
        }
        if (transport != CmMsg.TRANSPORT_RC && transport != CmMsg.TRANSPORT_UC || mtu == null) {
            cm.count(CmCounter.CM_DROP_MALFORMED);
            issueRej(r, transport != CmMsg.TRANSPORT_RC && transport != CmMsg.TRANSPORT_UC ? 9 : 26, CmMsg.MSG_REQ, null);
            return;
        }
        tw.insertedRemoteId = true;
        remoteIdTable.put(rid, tw);
        tw.insertedRemoteQp = true;
        remoteQpTable.put(rqp, tw);

        // the path from the REQ (cm_format_paths_from_req), the hop limit from our route to the sender
        int lat = Mad.bits(m, CmMsg.REQ_BYTE119, 3, 5);
        PathRec path = new PathRec(r.dgid(), Mad.getGid(m, CmMsg.REQ_PRIMARY_LOCAL_GID), id.av.hopLimit(),
                Mad.get8(m, CmMsg.REQ_PRIMARY_TRAFFIC_CLASS), Mad.get32(m, CmMsg.REQ_PRIMARY_FLOW_LABEL) >>> 12,
                id.pkey, Mad.bits(m, CmMsg.REQ_BYTE118, 4, 4), mtu, lat - (lat > 0 ? 1 : 0));
        Gid peer = path.dgid();
        if (peer.equals(Gid.ZERO) || peer.isMulticast() || !initAvByPath(id, path)) {
            byte[] ari = new byte[16];
            Mad.putGid(ari, 0, id.port.gid(0));
            sendRej(id, 12, ari, null); // IB_CM_REJ_INVALID_GID, ARI our port GID 0
            cleanupTimewait(tw);
            return;
        }
        id.handler = listener.handler;
        id.context = listener.context;
        localIds.put(id.localId, id); // cm_finalize_id: now MAD handlers see the new ID
        deliver(id, new IbCmEvent(IbCmEvent.Type.REQ_RECEIVED, r, listener));
    }

    /** {@code cm_dup_req_handler}. */
    private void dupReqHandler(MadRecv r, IbCmId cur) {
        if (cur.state == REQ_RCVD) {
            return;
        }
        byte[] m = new byte[Mad.SIZE];
        switch (cur.state) {
            case MRA_REQ_SENT -> CmMsg.formatMra(m, cur, CmMsg.MSG_REQ, cur.serviceTimeout, cur.privateData);
            case TIMEWAIT -> CmMsg.formatRej(m, cur, 10, null, null);
            default -> {
                return;
            }
        }
        mad.sendOnce(m, r.replyAv());
    }

    /** {@code cm_issue_rej}: a REJ answering a received message, to its sender, with its TID. */
    private void issueRej(MadRecv r, int reason, int msgRejected, byte[] ari) {
        byte[] rcv = r.mad();
        byte[] m = new byte[Mad.SIZE];
        Mad.cmHeader(m, CmMsg.REJ, Mad.tid(rcv));
        Mad.put32(m, CmMsg.REMOTE_COMM_ID, Mad.get32(rcv, CmMsg.LOCAL_COMM_ID));
        Mad.put32(m, CmMsg.LOCAL_COMM_ID, Mad.get32(rcv, CmMsg.REMOTE_COMM_ID));
        Mad.bits(m, CmMsg.REJ_BYTE32, 6, 2, msgRejected);
        Mad.put16(m, CmMsg.REJ_REASON, reason);
        if (ari != null && ari.length > 0) {
            Mad.bits(m, CmMsg.REJ_BYTE33, 1, 7, ari.length);
            Mad.putData(m, CmMsg.REJ_ARI, CmMsg.REJ_ARI_SIZE, ari);
        }
        cm.count(CmCounter.CM_REJECTS_SENT);
        mad.sendOnce(m, r.replyAv());
    }

    // ------------------------------------------------------------------ REP

    /** What {@link #sendRep} needs ({@code struct ib_cm_rep_param}). */
    record RepParam(int qpNum, int startingPsn, int responderResources, int initiatorDepth, boolean flowControl,
                    int rnrRetryCount, boolean srq, byte[] privateData) {
    }

    /** {@code ib_send_cm_rep} with {@code cm_format_rep}. */
    void sendRep(IbCmId id, RepParam p) {
        if (p.privateData() != null && p.privateData().length > CmMsg.REP_PRIVATE_DATA_SIZE) {
            throw new VerbsException(Errno.EINVAL, "REP private data of " + p.privateData().length + " bytes (at most 196)");
        }
        if (id.state != REQ_RCVD && id.state != MRA_REQ_SENT) {
            throw new VerbsException(Errno.EINVAL, "the connection request was answered already (CM state " + id.state
                    + "); accept once");
        }
        byte[] m = CmMsg.formatRep(id.tid, id.localId, id.remoteId, id.port.caGuid, id.port.ackDelay, p);
        id.msg = mad.send(m, id.av, this, new IbCmId.SendContext(id, REP_SENT), id.timeoutMs, id.maxCmRetries);
        id.state = REP_SENT;
        id.msgState = REP_SENT;
        id.initiatorDepth = p.initiatorDepth();
        id.responderResources = p.responderResources();
        id.rqPsn = p.startingPsn();
        id.localQpn = p.qpNum() & 0xFF_FFFF;
    }

    /** {@code cm_rep_handler}. */
    private void repHandler(MadRecv r) {
        byte[] m = r.mad();
        IbCmId id = acquire(Mad.get32(m, CmMsg.REMOTE_COMM_ID), 0);
        if (id == null) {
            dupRepHandler(r);
            return;
        }
        if (id.state != REQ_SENT && id.state != MRA_REQ_RCVD) {
            cm.count(CmCounter.CM_DROP_BAD_STATE);
            return;
        }
        long caGuid = Mad.get64(m, CmMsg.REP_LOCAL_CA_GUID);
        int remoteId = Mad.get32(m, CmMsg.LOCAL_COMM_ID);
        int remoteQpn = Mad.get24(m, CmMsg.REP_LOCAL_QPN);
        IbCmId.Timewait tw = id.timewait;
        tw.remoteId = remoteId;
        tw.remoteCaGuid = caGuid;
        tw.remoteQpn = remoteQpn;
        RemoteKey rid = new RemoteKey(caGuid, remoteId);
        if (remoteIdTable.containsKey(rid)) {
            cm.count(CmCounter.CM_DUPLICATE_REP);
            return; // a duplicate REP
        }
        RemoteKey rqp = new RemoteKey(caGuid, remoteQpn);
        IbCmId.Timewait stale = remoteQpTable.get(rqp);
        if (stale != null) {
            cm.count(CmCounter.CM_STALE_CONNECTIONS);
            IbCmId cur = acquire(stale.localId, stale.remoteId);
            issueRej(r, 10, CmMsg.MSG_REP, null);
            if (cur != null) {
                sendDreq(cur, null);
            }
            return;
        }
        tw.insertedRemoteId = true;
        remoteIdTable.put(rid, tw);
        tw.insertedRemoteQp = true;
        remoteQpTable.put(rqp, tw);
        id.state = REP_RCVD;
        id.remoteId = remoteId;
        id.remoteQpn = remoteQpn;
        id.initiatorDepth = Mad.get8(m, CmMsg.REP_RESPONDER_RESOURCES);
        id.responderResources = Mad.get8(m, CmMsg.REP_INITIATOR_DEPTH);
        id.sqPsn = Mad.get24(m, CmMsg.REP_STARTING_PSN);
        id.rnrRetryCount = Mad.bits(m, CmMsg.REP_BYTE51, 5, 3);
        id.targetAckDelay = Mad.bits(m, CmMsg.REP_BYTE50, 3, 5);
        id.avTimeout = CmMsg.ackTimeout(id.targetAckDelay, id.avTimeout - 1);
        mad.cancel(id.msg);
        deliver(id, IbCmEvent.of(IbCmEvent.Type.REP_RECEIVED, r));
    }

    /** {@code cm_dup_rep_handler}: the RTU (or MRA) again, to the sender of the duplicate. */
    private void dupRepHandler(MadRecv r) {
        byte[] rm = r.mad();
        IbCmId id = acquire(Mad.get32(rm, CmMsg.REMOTE_COMM_ID), Mad.get32(rm, CmMsg.LOCAL_COMM_ID));
        if (id == null) {
            dropUnmatched(r);
            return;
        }
        cm.count(CmCounter.CM_DUPLICATE_REP);
        byte[] m = new byte[Mad.SIZE];
        if (id.state == ESTABLISHED) {
            CmMsg.formatRtu(m, id, id.privateData);
        } else if (id.state == MRA_REP_SENT) {
            CmMsg.formatMra(m, id, CmMsg.MSG_REP, id.serviceTimeout, id.privateData);
        } else {
            return;
        }
        mad.sendOnce(m, r.replyAv());
    }

    // ------------------------------------------------------------------ RTU and establishment

    /** {@code ib_send_cm_rtu}. */
    void sendRtu(IbCmId id, byte[] pd) {
        if (id.state != REP_RCVD && id.state != MRA_REP_SENT) {
            throw new VerbsException(Errno.EINVAL, "ib_send_cm_rtu: the CM ID is " + id.state + ", not waiting to send an RTU");
        }
        byte[] m = new byte[Mad.SIZE];
        CmMsg.formatRtu(m, id, pd);
        mad.sendOnce(m, id.av);
        id.state = ESTABLISHED;
        id.privateData = pd == null ? new byte[0] : pd.clone();
    }

    /** {@code cm_rtu_handler}. */
    private void rtuHandler(MadRecv r) {
        byte[] m = r.mad();
        IbCmId id = acquire(Mad.get32(m, CmMsg.REMOTE_COMM_ID), Mad.get32(m, CmMsg.LOCAL_COMM_ID));
        if (id == null) {
            dropUnmatched(r);
            return;
        }
        if (id.state != REP_SENT && id.state != MRA_REP_RCVD) {
            cm.count(CmCounter.CM_DUPLICATE_RTU);
            return;
        }
        id.state = ESTABLISHED;
        mad.cancel(id.msg);
        deliver(id, IbCmEvent.of(IbCmEvent.Type.RTU_RECEIVED, r));
    }

    /**
     * {@code cm_establish} ({@code ib_cm_notify(IB_EVENT_COMM_EST)}): the passive side got data before the
     * RTU, so the connection counts as established.
     *
     * @throws VerbsException EISCONN if it is already, EINVAL in any other state
     */
    void establish(IbCmId id) {
        switch (id.state) {
            case REP_SENT, MRA_REP_RCVD -> id.state = ESTABLISHED;
            case ESTABLISHED -> throw new VerbsException(Errno.EISCONN, "the connection is established already");
            default -> throw new VerbsException(Errno.EINVAL, "cannot mark a CM ID in state " + id.state + " established");
        }
        mad.cancel(id.msg);
        deliver(id, IbCmEvent.of(IbCmEvent.Type.USER_ESTABLISHED, null));
    }

    // ------------------------------------------------------------------ MRA

    /**
     * {@code ib_send_cm_mra}: with {@link #MRA_FLAG_DELAY} set in {@code serviceTimeout} only the state
     * changes (rdma_cm does this after every REQ and REP, so that a duplicate is answered with an MRA).
     */
    void sendMra(IbCmId id, int serviceTimeout, byte[] pd) {
        IbCmId.State next;
        int msgMraed;
        switch (id.state) {
            case REQ_RCVD -> {
                next = MRA_REQ_SENT;
                msgMraed = CmMsg.MSG_REQ;
            }
            case REP_RCVD -> {
                next = MRA_REP_SENT;
                msgMraed = CmMsg.MSG_REP;
            }
            default -> throw new VerbsException(Errno.EINVAL, "ib_send_cm_mra: the CM ID is " + id.state);
        }
        int st = serviceTimeout & ~MRA_FLAG_DELAY;
        if ((serviceTimeout & MRA_FLAG_DELAY) == 0) {
            byte[] m = new byte[Mad.SIZE];
            CmMsg.formatMra(m, id, msgMraed, st, pd);
            mad.sendOnce(m, id.av);
        }
        id.state = next;
        id.serviceTimeout = st;
        id.privateData = pd == null ? new byte[0] : pd.clone();
    }

    /** {@code cm_mra_handler}: the peer needs more time; the outstanding MAD waits longer. */
    private void mraHandler(MadRecv r) {
        byte[] m = r.mad();
        int which = Mad.bits(m, CmMsg.MRA_BYTE32, 6, 2);
        IbCmId id = switch (which) {
            case CmMsg.MSG_REQ -> acquire(Mad.get32(m, CmMsg.REMOTE_COMM_ID), 0);
            case CmMsg.MSG_REP, CmMsg.MSG_OTHER -> acquire(Mad.get32(m, CmMsg.REMOTE_COMM_ID), Mad.get32(m, CmMsg.LOCAL_COMM_ID));
            default -> null;
        };
        if (id == null) {
            dropUnmatched(r);
            return;
        }
        long timeout = CmMsg.convertToMs(Mad.bits(m, CmMsg.MRA_BYTE33, 3, 5)) + CmMsg.convertToMs(id.avTimeout);
        switch (id.state) {
            case REQ_SENT -> {
                if (which != CmMsg.MSG_REQ || !mad.modify(id.msg, timeout)) {
                    cm.count(CmCounter.CM_DROP_BAD_STATE);
                    return;
                }
                id.state = MRA_REQ_RCVD;
            }
            case REP_SENT -> {
                if (which != CmMsg.MSG_REP || !mad.modify(id.msg, timeout)) {
                    cm.count(CmCounter.CM_DROP_BAD_STATE);
                    return;
                }
                id.state = MRA_REP_RCVD;
            }
            case MRA_REQ_RCVD, MRA_REP_RCVD -> {
                cm.count(CmCounter.CM_DUPLICATE_MRA);
                return;
            }
            default -> {
                cm.count(CmCounter.CM_DROP_BAD_STATE);
                return;
            }
        }
        // msg->context[1] follows the state, so a later timeout of this MAD is reported in the new state
        id.msgState = id.state;
        deliver(id, IbCmEvent.of(IbCmEvent.Type.MRA_RECEIVED, r));
    }

    // ------------------------------------------------------------------ REJ

    /** {@code ib_send_cm_rej}. */
    void sendRej(IbCmId id, int reason, byte[] ari, byte[] pd) {
        if (pd != null && pd.length > CmMsg.REJ_PRIVATE_DATA_SIZE) {
            throw new VerbsException(Errno.EINVAL, "REJ private data of " + pd.length + " bytes (at most 148)");
        }
        byte[] m = new byte[Mad.SIZE];
        switch (id.state) {
            case REQ_SENT, MRA_REQ_RCVD, REQ_RCVD, MRA_REQ_SENT, REP_RCVD, MRA_REP_SENT -> {
                CmMsg.formatRej(m, id, reason, ari, pd);
                resetToIdle(id);
            }
            case REP_SENT, MRA_REP_RCVD -> {
                CmMsg.formatRej(m, id, reason, ari, pd);
                enterTimewait(id);
            }
            default -> throw new VerbsException(Errno.EINVAL, "ib_send_cm_rej: nothing to reject in CM state " + id.state);
        }
        cm.count(CmCounter.CM_REJECTS_SENT);
        mad.sendOnce(m, id.av);
    }

    /** {@code cm_acquire_rejected_id}. */
    private IbCmId acquireRejected(byte[] m) {
        int remoteId = Mad.get32(m, CmMsg.LOCAL_COMM_ID);
        if (Mad.get16(m, CmMsg.REJ_REASON) == 4) {
            IbCmId.Timewait tw = remoteIdTable.get(new RemoteKey(Mad.get64(m, CmMsg.REJ_ARI), remoteId));
            return tw == null ? null : acquire(tw.localId, remoteId);
        }
        if (Mad.bits(m, CmMsg.REJ_BYTE32, 6, 2) == CmMsg.MSG_REQ) {
            return acquire(Mad.get32(m, CmMsg.REMOTE_COMM_ID), 0);
        }
        return acquire(Mad.get32(m, CmMsg.REMOTE_COMM_ID), remoteId);
    }

    /** {@code cm_rej_handler}. */
    private void rejHandler(MadRecv r) {
        byte[] m = r.mad();
        IbCmId id = acquireRejected(m);
        if (id == null) {
            dropUnmatched(r);
            return;
        }
        int reason = Mad.get16(m, CmMsg.REJ_REASON);
        switch (id.state) {
            case REQ_SENT, MRA_REQ_RCVD, REP_SENT, MRA_REP_RCVD, REQ_RCVD, MRA_REQ_SENT -> {
                if (id.state == REQ_SENT || id.state == MRA_REQ_RCVD || id.state == REP_SENT || id.state == MRA_REP_RCVD) {
                    mad.cancel(id.msg);
                }
                if (reason == 10) {
                    enterTimewait(id);
                } else {
                    resetToIdle(id);
                }
            }
            case DREQ_SENT, REP_RCVD, MRA_REP_SENT -> {
                mad.cancel(id.msg);
                enterTimewait(id);
            }
            case ESTABLISHED -> enterTimewait(id);
            default -> {
                cm.count(CmCounter.CM_DROP_BAD_STATE);
                return;
            }
        }
        deliver(id, IbCmEvent.of(IbCmEvent.Type.REJ_RECEIVED, r));
    }

    // ------------------------------------------------------------------ DREQ / DREP

    /** {@code ib_send_cm_dreq}. */
    void sendDreq(IbCmId id, byte[] pd) {
        if (id.state != ESTABLISHED) {
            throw new VerbsException(Errno.EINVAL, "ib_send_cm_dreq: the CM ID is " + id.state + ", not ESTABLISHED");
        }
        byte[] m = new byte[Mad.SIZE];
        Mad.cmHeader(m, CmMsg.DREQ, formTid(id));
        Mad.put32(m, CmMsg.LOCAL_COMM_ID, id.localId);
        Mad.put32(m, CmMsg.REMOTE_COMM_ID, id.remoteId);
        Mad.put24(m, CmMsg.DREQ_REMOTE_QPN, id.remoteQpn);
        Mad.putData(m, CmMsg.DREQ_PRIVATE_DATA, CmMsg.DREQ_PRIVATE_DATA_SIZE, pd);
        id.msg = mad.send(m, id.av, this, new IbCmId.SendContext(id, DREQ_SENT), id.timeoutMs, id.maxCmRetries);
        id.state = DREQ_SENT;
        id.msgState = DREQ_SENT;
    }

    /** {@code ib_send_cm_drep}. */
    void sendDrep(IbCmId id, byte[] pd) {
        if (id.state != DREQ_RCVD) {
            throw new VerbsException(Errno.EINVAL, "ib_send_cm_drep: no DREQ to answer (CM state " + id.state + ")");
        }
        id.privateData = pd == null ? new byte[0] : pd.clone();
        enterTimewait(id);
        byte[] m = new byte[Mad.SIZE];
        CmMsg.formatDrep(m, id, pd);
        mad.sendOnce(m, id.av);
    }

    /** {@code cm_dreq_handler}. */
    private void dreqHandler(MadRecv r) {
        byte[] m = r.mad();
        IbCmId id = acquire(Mad.get32(m, CmMsg.REMOTE_COMM_ID), Mad.get32(m, CmMsg.LOCAL_COMM_ID));
        if (id == null) {
            cm.count(CmCounter.CM_DUPLICATE_DREQ);
            // cm_issue_drep: answer anyway, to the sender, with the DREQ's TID
            byte[] d = new byte[Mad.SIZE];
            Mad.cmHeader(d, CmMsg.DREP, Mad.tid(m));
            Mad.put32(d, CmMsg.REMOTE_COMM_ID, Mad.get32(m, CmMsg.LOCAL_COMM_ID));
            Mad.put32(d, CmMsg.LOCAL_COMM_ID, Mad.get32(m, CmMsg.REMOTE_COMM_ID));
            mad.sendOnce(d, r.replyAv());
            return;
        }
        if (id.localQpn != Mad.get24(m, CmMsg.DREQ_REMOTE_QPN)) {
            cm.count(CmCounter.CM_DROP_DREQ_QPN_MISMATCH);
            return;
        }
        switch (id.state) {
            case REP_SENT, DREQ_SENT -> mad.cancel(id.msg);
            case ESTABLISHED, MRA_REP_RCVD -> {
            }
            case TIMEWAIT -> {
                cm.count(CmCounter.CM_DUPLICATE_DREQ);
                byte[] d = new byte[Mad.SIZE];
                CmMsg.formatDrep(d, id, id.privateData);
                mad.sendOnce(d, r.replyAv());
                return;
            }
            case DREQ_RCVD -> {
                cm.count(CmCounter.CM_DUPLICATE_DREQ);
                return;
            }
            default -> {
                cm.count(CmCounter.CM_DROP_BAD_STATE);
                return;
            }
        }
        id.state = DREQ_RCVD;
        id.tid = Mad.tid(m);
        deliver(id, IbCmEvent.of(IbCmEvent.Type.DREQ_RECEIVED, r));
    }

    /** {@code cm_drep_handler}. */
    private void drepHandler(MadRecv r) {
        byte[] m = r.mad();
        IbCmId id = acquire(Mad.get32(m, CmMsg.REMOTE_COMM_ID), Mad.get32(m, CmMsg.LOCAL_COMM_ID));
        if (id == null) {
            dropUnmatched(r);
            return;
        }
        if (id.state != DREQ_SENT && id.state != DREQ_RCVD) {
            cm.count(CmCounter.CM_DROP_BAD_STATE);
            return;
        }
        enterTimewait(id);
        mad.cancel(id.msg);
        deliver(id, IbCmEvent.of(IbCmEvent.Type.DREP_RECEIVED, r));
    }

    /** {@link CmQpAttr#of}. */
    QpAttributes initQpAttr(IbCmId id, QpState target, boolean remoteAtomicSupported) {
        return CmQpAttr.of(id, target, remoteAtomicSupported);
    }

    // ------------------------------------------------------------------ MAD agent

    /**
     * Counts a message that matches no local communication ({@link CmCounter#CM_DROP_UNMATCHED}) and says which
     * at FINE: its type, its comm IDs, its TID and the port, so a run that counts many can tell them apart
     * ({@code -Djava.util.logging.config.file} with {@code org.rdma4j.cm.level=FINE}).
     */
    void dropUnmatched(MadRecv r) {
        cm.count(CmCounter.CM_DROP_UNMATCHED);
        if (LOG.isLoggable(System.Logger.Level.DEBUG)) {
            byte[] m = r.mad();
            LOG.log(System.Logger.Level.DEBUG, "CM drops an unmatched {0} on {1} from {2}: local comm ID 0x{3},"
                            + " remote comm ID 0x{4}, TID 0x{5}", CmMsg.name(Mad.attrId(m)), r.port(), r.sgid(),
                    Integer.toHexString(Mad.get32(m, CmMsg.LOCAL_COMM_ID)),
                    Integer.toHexString(Mad.get32(m, CmMsg.REMOTE_COMM_ID)), Long.toHexString(Mad.tid(m)));
        }
    }

    /** {@code cm_recv_handler}: by attribute ID. */
    @Override
    public void receive(MadRecv r) {
        switch (Mad.attrId(r.mad())) {
            case CmMsg.REQ -> reqHandler(r);
            case CmMsg.MRA -> mraHandler(r);
            case CmMsg.REJ -> rejHandler(r);
            case CmMsg.REP -> repHandler(r);
            case CmMsg.RTU -> rtuHandler(r);
            case CmMsg.DREQ -> dreqHandler(r);
            case CmMsg.DREP -> drepHandler(r);
            case CmMsg.SIDR_REQ -> sidr.reqHandler(r);
            case CmMsg.SIDR_REP -> sidr.repHandler(r);
            default -> cm.count(CmCounter.CM_DROP_UNKNOWN_ATTRIBUTE); // LAP/APR: not on RoCE (cm_lap_handler)
        }
    }

    /** {@code cm_process_send_error}: an outstanding MAD ran out of retries. */
    @Override
    public void timedOut(MadLayer.Send send) {
        if (!(send.context instanceof IbCmId.SendContext(IbCmId id, IbCmId.State ignored))) {
            return;
        }
        if (id.destroyed || send != id.msg || id.msgState != id.state) {
            return; // an old send, or one the state has moved past
        }
        IbCmEvent.Type t;
        switch (id.state) {
            case REQ_SENT, MRA_REQ_RCVD -> {
                resetToIdle(id);
                t = IbCmEvent.Type.REQ_ERROR;
            }
            case REP_SENT, MRA_REP_RCVD -> {
                resetToIdle(id);
                t = IbCmEvent.Type.REP_ERROR;
            }
            case DREQ_SENT -> {
                enterTimewait(id);
                t = IbCmEvent.Type.DREQ_ERROR;
            }
            case SIDR_REQ_SENT -> {
                id.state = IDLE;
                t = IbCmEvent.Type.SIDR_REQ_ERROR;
            }
            default -> {
                return;
            }
        }
        deliver(id, IbCmEvent.of(t, null));
    }
}
