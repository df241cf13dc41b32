// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.Set;

import org.rdma4j.dma.DmaConfig;
import org.rdma4j.dma.DmaMode;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.DeviceAttributes;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.PortAttributes;
import org.rdma4j.verbs.PortState;
import org.rdma4j.verbs.QpAttrMask;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcOpcode;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.CmRoute;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.IbSocketAddress;
import org.rdma4j.verbs.cm.UdParam;
import org.rdma4j.verbs.spi.CmEventInfo;

/**
 * The remote-peer RPC between a test JVM and the child JVM that owns device B
 * ({@link RemotePeerMain}): one request, then its response, at a time, over a Unix-domain socket, in
 * big-endian {@link DataOutputStream} encoding.
 *
 * <p>A request is {@code int op, int handle, arguments}; {@code handle} names the child's object the
 * call is on (0 for calls on the peer itself). A response is a status byte ({@link #OK},
 * {@link #VERBS_ERROR} with {@code errno ordinal, message}, {@link #OTHER_ERROR} with
 * {@code class name, message}) and, after OK, the results. Nullable values carry a presence byte;
 * enums travel as their ordinal (both ends run the same build); object references as the child's
 * handle, 0 for null. Each op's arguments and results are written and read in the same order by
 * {@link RemoteVerbs} (the CM ops: {@link RemoteCm}) and {@link RemotePeerMain} ({@link RemoteCmServer}),
 * named beside the constant.
 *
 * <p>Before its status byte a response may carry {@link #CALLBACK}s: the child's object that runs the call
 * reports to the test JVM while the call runs (a CM provider's events for the front, which lives in the
 * test JVM as librdmacm lives above the kernel's CM). A callback is {@code CALLBACK, int target, int kind,
 * arguments}; the test JVM answers it as the child answers a request (status byte, results) and goes on
 * reading the response. So a callback happens only inside a call, on the child's serving thread, and the
 * test JVM's handler of a callback may not call the child itself.
 */
final class RemoteProtocol {
    private RemoteProtocol() {
    }

    static final byte OK = 0;
    static final byte VERBS_ERROR = 1;
    static final byte OTHER_ERROR = 2;
    /** Not a response yet: a callback to the test JVM (target, kind, arguments), answered, then the response. */
    static final byte CALLBACK = 3;

    // peer: handle 0
    /** path, size, address → address the child mapped at (the same unless it could not) */
    static final int SHM_MAP = 1;
    /** startNs, udpPort, DMA config (present, then its fields) → fabric handle, device handle, name, guid, providerName */
    static final int FABRIC_OPEN = 2;
    /**
     * (fabric handle) → n, n × report: closes the child's fabric, forgets its objects, and answers with what
     * its device's DMA checker reported (none without a checker)
     */
    static final int FABRIC_CLOSE = 3;
    /** (fabric handle) nowNs → nothing; that fabric's clock moves to nowNs and its timers run before the reply */
    static final int ADVANCE = 4;
    /** (device handle) port, active → nothing */
    static final int PORT_STATE = 5;
    /** shm address → nothing; unmaps the shared memory (before a new negotiation) */
    static final int SHM_UNMAP = 6;
    /** → never answers: a hung child, for the test of the call bound ({@link RemotePeer#CALL_TIMEOUT_MS}) */
    static final int STALL = 7;

    // device
    /** → context handle */
    static final int DEV_OPEN = 10;

    // context
    static final int CTX_QUERY_DEVICE = 20;
    /** port → PortAttributes */
    static final int CTX_QUERY_PORT = 21;
    /** port, index → gid */
    static final int CTX_QUERY_GID = 22;
    /** → pd handle, localDmaLkey */
    static final int CTX_ALLOC_PD = 23;
    /** → channel handle */
    static final int CTX_CREATE_CHANNEL = 24;
    /** cqe, channel handle, vector → cq handle */
    static final int CTX_CREATE_CQ = 25;
    /** timeoutNs → present; event id, type, qp, cq, srq handles, port */
    static final int CTX_GET_ASYNC = 26;
    /** event id → nothing */
    static final int CTX_ACK_ASYNC = 27;
    /** → usesVirtDma */
    static final int CTX_DMA_VIRTUAL = 28;

    // any object
    /** → nothing: AutoCloseable.close() on the child's object */
    static final int CLOSE = 30;

    // pd
    /** kind (0 native, 1 heap), address, length, access bits → mr handle, address, length, lkey, rkey, access */
    static final int PD_REG_MR = 40;
    /** type, send cq, recv cq, srq, cap, sqSigAll → qp handle, qpNum */
    static final int PD_CREATE_QP = 41;
    /** maxWr, maxSge → srq handle */
    static final int PD_CREATE_SRQ = 42;
    /** AhAttributes → ah handle */
    static final int PD_CREATE_AH = 43;

    // cq
    static final int CQ_CAPACITY = 50;
    /** max → n, n completions */
    static final int CQ_POLL = 51;
    static final int CQ_REQ_NOTIFY = 52;
    static final int CQ_ACK_EVENTS = 53;
    static final int CQ_RESIZE = 54;

    // channel
    /** timeoutNs → cq handle or 0 */
    static final int CH_GET_EVENT = 60;

    // qp
    static final int QP_CAP = 70;
    static final int QP_STATE = 71;
    static final int QP_MODIFY = 72;
    static final int QP_QUERY = 73;
    /** single, count, requests → posted, then count post errors */
    static final int QP_POST_SEND = 74;
    /** request → posted, post error */
    static final int QP_POST_RECV = 75;
    /** gid, mlid */
    static final int QP_ATTACH = 76;
    static final int QP_DETACH = 77;
    static final int QP_TYPE = 78;

    // srq
    static final int SRQ_MAX_WR = 80;
    static final int SRQ_MAX_SGE = 81;
    static final int SRQ_LIMIT = 82;
    static final int SRQ_ARM = 83;
    /** request → posted, post error */
    static final int SRQ_POST_RECV = 84;

    // ah
    static final int AH_ATTRIBUTES = 90;

    // cm: a CmProvider of host B's CM API hosted in the child (RemoteCm here, RemoteCmServer there)
    /** (fabric handle) device handle, factory class name, seed → cm handle, provider name */
    static final int CM_OPEN = 100;
    /** (cm) → nothing; closes the hosted CM (its IDs get DEVICE_REMOVAL, through callbacks) */
    static final int CM_CLOSE = 101;
    /** (cm) → whether anything was processed: the driven CM processes what arrived on its QP1s */
    static final int CM_PROGRESS = 102;
    /** (cm) → n, n × (name, value) */
    static final int CM_COUNTERS = 103;
    /** (cm) → n, n × CmAddress (address, device handle, port, gid index) */
    static final int CM_ADDRESSES = 104;
    /** (cm) destination address → present, CmAddress */
    static final int CM_SOURCE_FOR = 105;
    /** (cm) sink id, port space, qp type → cm id handle */
    static final int CM_CREATE_ID = 106;

    // cm id (CmIdSpi), each the method of the same name
    /** socket address → nothing */
    static final int ID_BIND = 110;
    /** → socket address */
    static final int ID_LOCAL_ADDRESS = 111;
    /** → socket address */
    static final int ID_REMOTE_ADDRESS = 112;
    /** backlog → nothing */
    static final int ID_LISTEN = 113;
    /** source, destination, timeoutNs → nothing */
    static final int ID_RESOLVE_ADDR = 114;
    /** timeoutNs → nothing */
    static final int ID_RESOLVE_ROUTE = 115;
    /** → context handle (0: none), device handle */
    static final int ID_CONTEXT = 116;
    /** → port */
    static final int ID_PORT_NUM = 117;
    /** → route */
    static final int ID_ROUTE = 118;
    /** pd, type, send cq, recv cq, srq, cap, sqSigAll → qp handle, qpNum */
    static final int ID_CREATE_QP = 119;
    /** → qp handle (0: none), qpNum, type, pd handle */
    static final int ID_QP = 120;
    /** → nothing */
    static final int ID_DESTROY_QP = 121;
    /** state → QpAttributes */
    static final int ID_INIT_QP_ATTR = 122;
    /** ConnParam → nothing */
    static final int ID_CONNECT = 123;
    /** ConnParam → nothing */
    static final int ID_ACCEPT = 124;
    /** private data → nothing */
    static final int ID_REJECT = 125;
    /** → nothing */
    static final int ID_DISCONNECT = 126;
    /** → nothing */
    static final int ID_ESTABLISH = 127;
    /** option name, value kind (-1 null, 0 int, 1 boolean), value → nothing */
    static final int ID_SET_OPTION = 128;
    /** → nothing */
    static final int ID_CLOSE = 129;

    // callbacks of a hosted CM (target: the cm handle)
    /** sink id, CmEventInfo → nothing: CmEventSink.post */
    static final int CB_CM_EVENT = 1;
    /** listener's sink id, new cm id handle, CmEventInfo → the new ID's sink id, 0 when the front refuses it */
    static final int CB_CM_CONNECT_REQUEST = 2;

    // ------------------------------------------------------------------ scatter/gather segment kinds

    /** An SGE with no segment: address, length, L_Key only. */
    static final byte SGE_PLAIN = 0;
    /** An SGE whose segment lies in the shared memory: segment address and length follow. */
    static final byte SGE_SHARED = 1;
    /** An SGE whose segment is elsewhere (heap, private native memory): its bytes follow. */
    static final byte SGE_BYTES = 2;

    // ------------------------------------------------------------------ codec

    static <E extends Enum<E>> void writeEnum(DataOutputStream o, E e) throws IOException {
        o.writeInt(e == null ? -1 : e.ordinal());
    }

    static <E extends Enum<E>> E readEnum(DataInputStream in, Class<E> type) throws IOException {
        int i = in.readInt();
        return i < 0 ? null : type.getEnumConstants()[i];
    }

    static void writeString(DataOutputStream o, String s) throws IOException {
        o.writeBoolean(s != null);
        if (s != null) {
            o.writeUTF(s);
        }
    }

    static String readString(DataInputStream in) throws IOException {
        return in.readBoolean() ? in.readUTF() : null;
    }

    static void writeGid(DataOutputStream o, Gid g) throws IOException {
        o.writeBoolean(g != null);
        if (g != null) {
            o.writeLong(g.hi());
            o.writeLong(g.lo());
        }
    }

    static Gid readGid(DataInputStream in) throws IOException {
        return in.readBoolean() ? new Gid(in.readLong(), in.readLong()) : null;
    }

    static void writeAccess(DataOutputStream o, Set<AccessFlag> access) throws IOException {
        o.writeBoolean(access != null);
        if (access != null) {
            o.writeInt(AccessFlag.toBits(access));
        }
    }

    static Set<AccessFlag> readAccess(DataInputStream in) throws IOException {
        return in.readBoolean() ? AccessFlag.fromBits(in.readInt()) : null;
    }

    static void writeCap(DataOutputStream o, QpCapabilities c) throws IOException {
        o.writeBoolean(c != null);
        if (c != null) {
            o.writeInt(c.maxSendWr());
            o.writeInt(c.maxRecvWr());
            o.writeInt(c.maxSendSge());
            o.writeInt(c.maxRecvSge());
            o.writeInt(c.maxInlineData());
        }
    }

    static QpCapabilities readCap(DataInputStream in) throws IOException {
        return in.readBoolean() ? new QpCapabilities(in.readInt(), in.readInt(), in.readInt(), in.readInt(),
                in.readInt()) : null;
    }

    static void writeAh(DataOutputStream o, AhAttributes a) throws IOException {
        o.writeBoolean(a != null);
        if (a != null) {
            writeGid(o, a.dgid());
            o.writeInt(a.sgidIndex());
            o.writeInt(a.hopLimit());
            o.writeInt(a.trafficClass());
            o.writeInt(a.flowLabel());
            o.writeInt(a.dlid());
            o.writeInt(a.sl());
            o.writeInt(a.srcPathBits());
            o.writeInt(a.portNum());
            o.writeBoolean(a.isGlobal());
        }
    }

    static AhAttributes readAh(DataInputStream in) throws IOException {
        if (!in.readBoolean()) {
            return null;
        }
        return new AhAttributes().dgid(readGid(in)).sgidIndex(in.readInt()).hopLimit(in.readInt())
                .trafficClass(in.readInt()).flowLabel(in.readInt()).dlid(in.readInt()).sl(in.readInt())
                .srcPathBits(in.readInt()).portNum(in.readInt()).global(in.readBoolean());
    }

    /** Every field, whatever the mask says, then the mask: the copy is field for field the original. */
    static void writeQpAttrs(DataOutputStream o, QpAttributes a) throws IOException {
        o.writeInt(a.mask());
        writeEnum(o, a.state());
        writeEnum(o, a.curState());
        o.writeBoolean(a.enSqdAsyncNotify());
        o.writeInt(a.accessFlags());
        o.writeInt(a.pkeyIndex());
        o.writeInt(a.port());
        o.writeInt(a.qkey());
        writeAh(o, a.av());
        writeEnum(o, a.pathMtu());
        o.writeInt(a.timeout());
        o.writeInt(a.retryCnt());
        o.writeInt(a.rnrRetry());
        o.writeInt(a.rqPsn());
        o.writeInt(a.maxRdAtomic());
        o.writeInt(a.minRnrTimer());
        o.writeInt(a.sqPsn());
        o.writeInt(a.maxDestRdAtomic());
        writeCap(o, a.cap());
        o.writeInt(a.destQpNum());
        o.writeBoolean(a.sqDraining());
    }

    /** @return a copy with the same fields and the same mask */
    static QpAttributes readQpAttrs(DataInputStream in) throws IOException {
        int mask = in.readInt();
        QpState state = readEnum(in, QpState.class);
        QpState curState = readEnum(in, QpState.class);
        boolean sqd = in.readBoolean();
        int access = in.readInt();
        int pkey = in.readInt();
        int port = in.readInt();
        int qkey = in.readInt();
        AhAttributes av = readAh(in);
        Mtu mtu = readEnum(in, Mtu.class);
        int timeout = in.readInt();
        int retry = in.readInt();
        int rnrRetry = in.readInt();
        int rqPsn = in.readInt();
        int maxRd = in.readInt();
        int minRnr = in.readInt();
        int sqPsn = in.readInt();
        int maxDestRd = in.readInt();
        QpCapabilities cap = readCap(in);
        int destQp = in.readInt();
        boolean draining = in.readBoolean();
        QpAttributes a = new QpAttributes();
        // The setters set mask bits: set every field, clear the mask, then set again what the mask names.
        for (int pass = 0; pass < 2; pass++) {
            boolean all = pass == 0;
            if (all || (mask & QpAttrMask.STATE.bit()) != 0) {
                a.state(state);
            }
            if (all || (mask & QpAttrMask.CUR_STATE.bit()) != 0) {
                a.curState(curState);
            }
            if (all || (mask & QpAttrMask.EN_SQD_ASYNC_NOTIFY.bit()) != 0) {
                a.enSqdAsyncNotify(sqd);
            }
            if (all || (mask & QpAttrMask.ACCESS_FLAGS.bit()) != 0) {
                a.accessFlags(access);
            }
            if (all || (mask & QpAttrMask.PKEY_INDEX.bit()) != 0) {
                a.pkeyIndex(pkey);
            }
            if (all || (mask & QpAttrMask.PORT.bit()) != 0) {
                a.port(port);
            }
            if (all || (mask & QpAttrMask.QKEY.bit()) != 0) {
                a.qkey(qkey);
            }
            if ((all || (mask & QpAttrMask.AV.bit()) != 0) && av != null) {
                a.av(av);
            }
            if (all || (mask & QpAttrMask.PATH_MTU.bit()) != 0) {
                a.pathMtu(mtu);
            }
            if (all || (mask & QpAttrMask.TIMEOUT.bit()) != 0) {
                a.timeout(timeout);
            }
            if (all || (mask & QpAttrMask.RETRY_CNT.bit()) != 0) {
                a.retryCnt(retry);
            }
            if (all || (mask & QpAttrMask.RNR_RETRY.bit()) != 0) {
                a.rnrRetry(rnrRetry);
            }
            if (all || (mask & QpAttrMask.RQ_PSN.bit()) != 0) {
                a.rqPsn(rqPsn);
            }
            if (all || (mask & QpAttrMask.MAX_QP_RD_ATOMIC.bit()) != 0) {
                a.maxRdAtomic(maxRd);
            }
            if (all || (mask & QpAttrMask.MIN_RNR_TIMER.bit()) != 0) {
                a.minRnrTimer(minRnr);
            }
            if (all || (mask & QpAttrMask.SQ_PSN.bit()) != 0) {
                a.sqPsn(sqPsn);
            }
            if (all || (mask & QpAttrMask.MAX_DEST_RD_ATOMIC.bit()) != 0) {
                a.maxDestRdAtomic(maxDestRd);
            }
            if (all || (mask & QpAttrMask.CAP.bit()) != 0) {
                a.cap(cap);
            }
            if (all || (mask & QpAttrMask.DEST_QPN.bit()) != 0) {
                a.destQpNum(destQp);
            }
            if (all) {
                a.clearMask();
            }
        }
        a.sqDraining(draining);
        if (a.mask() != mask) {
            throw new IllegalStateException("qp_attr mask 0x" + Integer.toHexString(mask) + " decoded as 0x"
                    + Integer.toHexString(a.mask()) + ": QpAttrMask and this codec disagree");
        }
        return a;
    }

    static void writeDeviceAttrs(DataOutputStream o, DeviceAttributes d) throws IOException {
        writeString(o, d.fwVer());
        o.writeLong(d.nodeGuid());
        o.writeLong(d.sysImageGuid());
        o.writeLong(d.maxMrSize());
        o.writeLong(d.pageSizeCap());
        o.writeInt(d.vendorId());
        o.writeInt(d.vendorPartId());
        o.writeInt(d.hwVer());
        o.writeInt(d.maxQp());
        o.writeInt(d.maxQpWr());
        o.writeLong(d.deviceCapFlags());
        o.writeInt(d.maxSge());
        o.writeInt(d.maxCq());
        o.writeInt(d.maxCqe());
        o.writeInt(d.maxMr());
        o.writeInt(d.maxPd());
        o.writeInt(d.maxQpRdAtom());
        o.writeInt(d.maxQpInitRdAtom());
        o.writeInt(d.maxSrq());
        o.writeInt(d.maxSrqWr());
        o.writeInt(d.maxSrqSge());
        o.writeInt(d.maxAh());
        o.writeInt(d.maxInlineData());
        writeString(o, d.atomicCap());
        o.writeInt(d.physPortCnt());
        o.writeInt(d.localCaAckDelay());
    }

    static DeviceAttributes readDeviceAttrs(DataInputStream in) throws IOException {
        return new DeviceAttributes(readString(in), in.readLong(), in.readLong(), in.readLong(), in.readLong(),
                in.readInt(), in.readInt(), in.readInt(), in.readInt(), in.readInt(), in.readLong(), in.readInt(),
                in.readInt(), in.readInt(), in.readInt(), in.readInt(), in.readInt(), in.readInt(), in.readInt(),
                in.readInt(), in.readInt(), in.readInt(), in.readInt(), readString(in), in.readInt(), in.readInt());
    }

    static void writePortAttrs(DataOutputStream o, PortAttributes p) throws IOException {
        writeEnum(o, p.state());
        writeEnum(o, p.maxMtu());
        writeEnum(o, p.activeMtu());
        o.writeInt(p.gidTblLen());
        o.writeInt(p.portCapFlags());
        o.writeLong(p.maxMsgSz());
        o.writeInt(p.lid());
        o.writeInt(p.smLid());
        o.writeInt(p.lmc());
        o.writeInt(p.physState());
        writeString(o, p.linkLayer());
        o.writeInt(p.activeWidth());
        o.writeInt(p.activeSpeed());
        o.writeInt(p.pkeyTblLen());
    }

    static PortAttributes readPortAttrs(DataInputStream in) throws IOException {
        return new PortAttributes(readEnum(in, PortState.class), readEnum(in, Mtu.class), readEnum(in, Mtu.class),
                in.readInt(), in.readInt(), in.readLong(), in.readInt(), in.readInt(), in.readInt(), in.readInt(),
                readString(in), in.readInt(), in.readInt(), in.readInt());
    }

    /** The ten fields {@link WorkCompletion#set} fills (slid, sl and path bits are 0 on RoCE). */
    static void writeWc(DataOutputStream o, WorkCompletion wc) throws IOException {
        o.writeLong(wc.wrId());
        writeEnum(o, wc.status());
        writeEnum(o, wc.opcode());
        o.writeInt(wc.vendorErr());
        o.writeInt(wc.byteLen());
        o.writeInt(wc.immData());
        o.writeInt(wc.qpNum());
        o.writeInt(wc.srcQp());
        o.writeInt(wc.wcFlags());
        o.writeInt(wc.pkeyIndex());
    }

    static void readWc(DataInputStream in, WorkCompletion wc) throws IOException {
        wc.set(in.readLong(), readEnum(in, WcStatus.class), readEnum(in, WcOpcode.class), in.readInt(), in.readInt(),
                in.readInt(), in.readInt(), in.readInt(), in.readInt(), in.readInt());
    }

    /** Every field of the record; null as absent (the device then follows the child's rdma4j.soft.dma properties). */
    static void writeDma(DataOutputStream o, DmaConfig d) throws IOException {
        o.writeBoolean(d != null);
        if (d != null) {
            writeEnum(o, d.mode());
            o.writeLong(d.iommuWindow());
            o.writeLong(d.bouncePool());
            o.writeInt(d.addressBits());
            o.writeBoolean(d.forceBounce());
            o.writeBoolean(d.bounceRegistrations());
            o.writeBoolean(d.checker());
        }
    }

    static DmaConfig readDma(DataInputStream in) throws IOException {
        return in.readBoolean() ? new DmaConfig(readEnum(in, DmaMode.class), in.readLong(), in.readLong(), in.readInt(),
                in.readBoolean(), in.readBoolean(), in.readBoolean()) : null;
    }

    static void writeBytes(DataOutputStream o, byte[] b) throws IOException {
        o.writeInt(b == null ? -1 : b.length);
        if (b != null) {
            o.write(b);
        }
    }

    static byte[] readBytes(DataInputStream in) throws IOException {
        int n = in.readInt();
        if (n < 0) {
            return null;
        }
        byte[] b = new byte[n];
        in.readFully(b);
        return b;
    }

    /** An IP address as its bytes (and an IPv6 scope): the same InetAddress, without a host name. */
    static void writeInet(DataOutputStream o, InetAddress a) throws IOException {
        o.writeBoolean(a != null);
        if (a != null) {
            writeBytes(o, a.getAddress());
            o.writeInt(a instanceof Inet6Address v6 ? v6.getScopeId() : 0);
        }
    }

    static InetAddress readInet(DataInputStream in) throws IOException {
        if (!in.readBoolean()) {
            return null;
        }
        byte[] b = readBytes(in);
        int scope = in.readInt();
        return b.length == 16 && scope != 0 ? Inet6Address.getByAddress(null, b, scope) : InetAddress.getByAddress(b);
    }

    /** A CM address: null, an {@link InetSocketAddress} or an {@link IbSocketAddress}. */
    static void writeSocketAddress(DataOutputStream o, SocketAddress a) throws IOException {
        switch (a) {
            case null -> o.writeByte(0);
            case InetSocketAddress i -> {
                o.writeByte(1);
                writeInet(o, i.getAddress());
                o.writeInt(i.getPort());
            }
            case IbSocketAddress ib -> {
                o.writeByte(2);
                writeGid(o, ib.gid());
                o.writeLong(ib.serviceId());
                o.writeInt(ib.pkey());
            }
            default -> throw new IllegalArgumentException("a CM address of a kind the remote peer does not know: "
                    + a.getClass().getName());
        }
    }

    static SocketAddress readSocketAddress(DataInputStream in) throws IOException {
        byte kind = in.readByte();
        return switch (kind) {
            case 0 -> null;
            case 1 -> new InetSocketAddress(readInet(in), in.readInt());
            case 2 -> new IbSocketAddress(readGid(in), in.readLong(), in.readInt());
            default -> throw new IOException("bad socket address kind " + kind);
        };
    }

    static void writeConnParam(DataOutputStream o, ConnParam p) throws IOException {
        o.writeBoolean(p != null);
        if (p != null) {
            writeBytes(o, p.privateData());
            o.writeInt(p.responderResources());
            o.writeInt(p.initiatorDepth());
            o.writeBoolean(p.flowControl());
            o.writeInt(p.retryCount());
            o.writeInt(p.rnrRetryCount());
            o.writeBoolean(p.srq());
            o.writeInt(p.qpNum());
        }
    }

    static ConnParam readConnParam(DataInputStream in) throws IOException {
        if (!in.readBoolean()) {
            return null;
        }
        return new ConnParam().privateData(readBytes(in)).responderResources(in.readInt()).initiatorDepth(in.readInt())
                .flowControl(in.readBoolean()).retryCount(in.readInt()).rnrRetryCount(in.readInt()).srq(in.readBoolean())
                .qpNum(in.readInt());
    }

    static void writeRoute(DataOutputStream o, CmRoute r) throws IOException {
        o.writeBoolean(r != null);
        if (r != null) {
            writeGid(o, r.sgid());
            writeGid(o, r.dgid());
            o.writeInt(r.sgidIndex());
            o.writeInt(r.hopLimit());
            o.writeInt(r.trafficClass());
            o.writeInt(r.flowLabel());
            o.writeInt(r.pkey());
            writeEnum(o, r.mtu());
            o.writeInt(r.packetLifeTime());
            o.writeInt(r.sl());
        }
    }

    static CmRoute readRoute(DataInputStream in) throws IOException {
        if (!in.readBoolean()) {
            return null;
        }
        return new CmRoute(readGid(in), readGid(in), in.readInt(), in.readInt(), in.readInt(), in.readInt(), in.readInt(),
                readEnum(in, Mtu.class), in.readInt(), in.readInt());
    }

    static void writeEventInfo(DataOutputStream o, CmEventInfo e) throws IOException {
        writeEnum(o, e.type());
        o.writeInt(e.status());
        writeBytes(o, e.privateData());
        writeConnParam(o, e.connParam());
        UdParam ud = e.udParam();
        o.writeBoolean(ud != null);
        if (ud != null) {
            writeAh(o, ud.ah());
            o.writeInt(ud.qpNum());
            o.writeInt(ud.qkey());
        }
        writeString(o, e.detail());
    }

    static CmEventInfo readEventInfo(DataInputStream in) throws IOException {
        CmEventType type = readEnum(in, CmEventType.class);
        int status = in.readInt();
        byte[] data = readBytes(in);
        ConnParam param = readConnParam(in);
        UdParam ud = in.readBoolean() ? new UdParam(readAh(in), in.readInt(), in.readInt()) : null;
        return new CmEventInfo(type, status, data, param, ud, readString(in));
    }

    /** Writes a failure response: VerbsException keeps its errno and message. */
    static void writeError(DataOutputStream o, Throwable t) throws IOException {
        if (t instanceof VerbsException v) {
            o.writeByte(VERBS_ERROR);
            writeEnum(o, v.errno());
            String m = v.getMessage();
            String prefix = v.errno().name() + ": ";
            o.writeUTF(m.startsWith(prefix) ? m.substring(prefix.length()) : m);
        } else {
            o.writeByte(OTHER_ERROR);
            o.writeUTF(t.getClass().getName());
            o.writeUTF(String.valueOf(t.getMessage()));
        }
    }

    /** Reads the status byte of a response; throws what the child threw. */
    static void readStatus(DataInputStream in) throws IOException {
        readStatus(in.readByte(), in);
    }

    /** Acts on a status byte already read; throws what the other side threw. */
    static void readStatus(byte status, DataInputStream in) throws IOException {
        switch (status) {
            case OK -> {
            }
            case VERBS_ERROR -> {
                Errno errno = readEnum(in, Errno.class);
                throw new VerbsException(errno, in.readUTF());
            }
            case OTHER_ERROR -> {
                String type = in.readUTF();
                String message = in.readUTF();
                throw switch (type) {
                    case "java.lang.IllegalArgumentException" -> new IllegalArgumentException(message);
                    case "java.lang.IllegalStateException" -> new IllegalStateException(message);
                    case "java.lang.NullPointerException" -> new NullPointerException(message);
                    case "java.lang.UnsupportedOperationException" -> new UnsupportedOperationException(message);
                    case "java.lang.IndexOutOfBoundsException" -> new IndexOutOfBoundsException(message);
                    default -> new IllegalStateException("remote peer threw " + type + ": " + message);
                };
            }
            default -> throw new IOException("bad status byte " + status + " from the remote peer");
        }
    }
}
