// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.Set;

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
 * {@link RemoteVerbs} and {@link RemotePeerMain}, named beside the constant.
 */
final class RemoteProtocol {
    private RemoteProtocol() {
    }

    static final byte OK = 0;
    static final byte VERBS_ERROR = 1;
    static final byte OTHER_ERROR = 2;

    // peer: handle 0
    /** path, size, address → address the child mapped at (the same unless it could not) */
    static final int SHM_MAP = 1;
    /** startNs, udpPort → fabric handle, device handle, name, guid, providerName */
    static final int FABRIC_OPEN = 2;
    /** (fabric handle) → nothing; closes the child's fabric and forgets its objects */
    static final int FABRIC_CLOSE = 3;
    /** (fabric handle) nowNs → nothing; that fabric's clock moves to nowNs and its timers run before the reply */
    static final int ADVANCE = 4;
    /** (device handle) port, active → nothing */
    static final int PORT_STATE = 5;
    /** shm address → nothing; unmaps the shared memory (before a new negotiation) */
    static final int SHM_UNMAP = 6;

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
        byte status = in.readByte();
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
