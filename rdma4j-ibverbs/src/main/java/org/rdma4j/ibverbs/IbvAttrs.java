// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import static org.rdma4j.ibverbs.IbvLayouts.offset;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.DeviceAttributes;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.PortAttributes;
import org.rdma4j.verbs.PortState;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpState;

/** Conversions between the verbs API's attribute objects and libibverbs' structs ({@link IbvLayouts}). */
final class IbvAttrs {
    private IbvAttrs() {
    }

    private static final ValueLayout.OfInt I = ValueLayout.JAVA_INT;
    private static final ValueLayout.OfLong L = ValueLayout.JAVA_LONG;
    private static final ValueLayout.OfShort S = ValueLayout.JAVA_SHORT;
    private static final ValueLayout.OfByte B = ValueLayout.JAVA_BYTE;
    private static final ValueLayout.OfLong BE64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    static int u8(MemorySegment s, long off) {
        return s.get(B, off) & 0xFF;
    }

    static int u16(MemorySegment s, long off) {
        return s.get(S, off) & 0xFFFF;
    }

    // ------------------------------------------------------------------------------------------ GID

    static Gid gid(MemorySegment s, long off) {
        return new Gid(s.get(BE64, off), s.get(BE64, off + 8));
    }

    static void gid(MemorySegment s, long off, Gid g) {
        s.set(BE64, off, g.hi());
        s.set(BE64, off + 8, g.lo());
    }

    // ------------------------------------------------------------------------------------------ device

    private static final long DA_FW = offset(IbvLayouts.DEVICE_ATTR, "fw_ver");
    private static final long DA_NODE_GUID = offset(IbvLayouts.DEVICE_ATTR, "node_guid");
    private static final long DA_SYS_GUID = offset(IbvLayouts.DEVICE_ATTR, "sys_image_guid");

    private static int da(MemorySegment a, String field) {
        return a.get(I, offset(IbvLayouts.DEVICE_ATTR, field));
    }

    static DeviceAttributes deviceAttributes(MemorySegment a, int maxInline) {
        String atomic = switch (da(a, "atomic_cap")) {
            case 0 -> "ATOMIC_NONE";
            case 1 -> "ATOMIC_HCA";
            case 2 -> "ATOMIC_GLOB";
            default -> "invalid atomic capability";
        };
        return new DeviceAttributes(a.getString(DA_FW), a.get(BE64, DA_NODE_GUID), a.get(BE64, DA_SYS_GUID),
                a.get(L, offset(IbvLayouts.DEVICE_ATTR, "max_mr_size")),
                a.get(L, offset(IbvLayouts.DEVICE_ATTR, "page_size_cap")),
                da(a, "vendor_id"), da(a, "vendor_part_id"), da(a, "hw_ver"), da(a, "max_qp"), da(a, "max_qp_wr"),
                da(a, "device_cap_flags") & 0xFFFF_FFFFL, da(a, "max_sge"), da(a, "max_cq"), da(a, "max_cqe"),
                da(a, "max_mr"), da(a, "max_pd"), da(a, "max_qp_rd_atom"), da(a, "max_qp_init_rd_atom"),
                da(a, "max_srq"), da(a, "max_srq_wr"), da(a, "max_srq_sge"), da(a, "max_ah"), maxInline, atomic,
                u8(a, offset(IbvLayouts.DEVICE_ATTR, "phys_port_cnt")),
                u8(a, offset(IbvLayouts.DEVICE_ATTR, "local_ca_ack_delay")), da(a, "max_sge_rd"));
    }

    // ------------------------------------------------------------------------------------------ port

    private static int pa(MemorySegment a, String field) {
        return a.get(I, offset(IbvLayouts.PORT_ATTR, field));
    }

    private static int pa8(MemorySegment a, String field) {
        return u8(a, offset(IbvLayouts.PORT_ATTR, field));
    }

    private static int pa16(MemorySegment a, String field) {
        return u16(a, offset(IbvLayouts.PORT_ATTR, field));
    }

    static PortAttributes portAttributes(MemorySegment a) {
        int state = pa(a, "state");
        PortState ps = state >= 0 && state < PortState.values().length ? PortState.values()[state] : PortState.NOP;
        // ibv_devinfo's link_layer_str: UNSPECIFIED and INFINIBAND print as InfiniBand
        String link = switch (pa8(a, "link_layer")) {
            case 0, 1 -> "InfiniBand";
            case 2 -> "Ethernet";
            default -> "Unknown";
        };
        return new PortAttributes(ps, mtu(pa(a, "max_mtu")), mtu(pa(a, "active_mtu")), pa(a, "gid_tbl_len"),
                pa(a, "port_cap_flags"), pa(a, "max_msg_sz") & 0xFFFF_FFFFL, pa16(a, "lid"), pa16(a, "sm_lid"),
                pa8(a, "lmc"), pa8(a, "phys_state"), link, pa8(a, "active_width"), pa8(a, "active_speed"),
                pa16(a, "pkey_tbl_len"));
    }

    /** {@return the MTU of an ibv_mtu value, MTU_256 for an out-of-range one (never seen from a real port)} */
    static Mtu mtu(int v) {
        return v >= 1 && v <= 5 ? Mtu.ofValue(v) : Mtu.MTU_256;
    }

    // ------------------------------------------------------------------------------------------ AH

    private static final long GRH_DGID = offset(IbvLayouts.AH_ATTR, "grh.dgid");
    private static final long GRH_FLOW = offset(IbvLayouts.AH_ATTR, "grh.flow_label");
    private static final long GRH_SGID = offset(IbvLayouts.AH_ATTR, "grh.sgid_index");
    private static final long GRH_HOP = offset(IbvLayouts.AH_ATTR, "grh.hop_limit");
    private static final long GRH_TCLASS = offset(IbvLayouts.AH_ATTR, "grh.traffic_class");
    private static final long AH_DLID = offset(IbvLayouts.AH_ATTR, "dlid");
    private static final long AH_SL = offset(IbvLayouts.AH_ATTR, "sl");
    private static final long AH_SRC_PATH = offset(IbvLayouts.AH_ATTR, "src_path_bits");
    private static final long AH_RATE = offset(IbvLayouts.AH_ATTR, "static_rate");
    private static final long AH_GLOBAL = offset(IbvLayouts.AH_ATTR, "is_global");
    private static final long AH_PORT = offset(IbvLayouts.AH_ATTR, "port_num");

    /** Writes an ibv_ah_attr at {@code off}. */
    static void ahAttr(MemorySegment s, long off, AhAttributes a) {
        s.asSlice(off, IbvLayouts.AH_ATTR.byteSize()).fill((byte) 0);
        gid(s, off + GRH_DGID, a.dgid());
        s.set(I, off + GRH_FLOW, a.flowLabel());
        s.set(B, off + GRH_SGID, (byte) a.sgidIndex());
        s.set(B, off + GRH_HOP, (byte) a.hopLimit());
        s.set(B, off + GRH_TCLASS, (byte) a.trafficClass());
        s.set(S, off + AH_DLID, (short) a.dlid());
        s.set(B, off + AH_SL, (byte) a.sl());
        s.set(B, off + AH_SRC_PATH, (byte) a.srcPathBits());
        s.set(B, off + AH_RATE, (byte) 0);
        s.set(B, off + AH_GLOBAL, (byte) (a.isGlobal() ? 1 : 0));
        s.set(B, off + AH_PORT, (byte) a.portNum());
    }

    /** Reads an ibv_ah_attr at {@code off}. */
    static AhAttributes ahAttr(MemorySegment s, long off) {
        return new AhAttributes().dgid(gid(s, off + GRH_DGID)).flowLabel(s.get(I, off + GRH_FLOW))
                .sgidIndex(u8(s, off + GRH_SGID)).hopLimit(u8(s, off + GRH_HOP)).trafficClass(u8(s, off + GRH_TCLASS))
                .dlid(u16(s, off + AH_DLID)).sl(u8(s, off + AH_SL)).srcPathBits(u8(s, off + AH_SRC_PATH))
                .global(u8(s, off + AH_GLOBAL) != 0).portNum(u8(s, off + AH_PORT));
    }

    // ------------------------------------------------------------------------------------------ QP

    static void qpCap(MemorySegment s, long off, QpCapabilities c) {
        s.set(I, off + offset(IbvLayouts.QP_CAP, "max_send_wr"), c.maxSendWr());
        s.set(I, off + offset(IbvLayouts.QP_CAP, "max_recv_wr"), c.maxRecvWr());
        s.set(I, off + offset(IbvLayouts.QP_CAP, "max_send_sge"), c.maxSendSge());
        s.set(I, off + offset(IbvLayouts.QP_CAP, "max_recv_sge"), c.maxRecvSge());
        s.set(I, off + offset(IbvLayouts.QP_CAP, "max_inline_data"), c.maxInlineData());
    }

    static QpCapabilities qpCap(MemorySegment s, long off) {
        return new QpCapabilities(s.get(I, off + offset(IbvLayouts.QP_CAP, "max_send_wr")),
                s.get(I, off + offset(IbvLayouts.QP_CAP, "max_recv_wr")),
                s.get(I, off + offset(IbvLayouts.QP_CAP, "max_send_sge")),
                s.get(I, off + offset(IbvLayouts.QP_CAP, "max_recv_sge")),
                s.get(I, off + offset(IbvLayouts.QP_CAP, "max_inline_data")));
    }

    private static long qa(String field) {
        return offset(IbvLayouts.QP_ATTR, field);
    }

    /** The ibv_qp_attr_mask bits the verbs API knows (IBV_QP_STATE .. IBV_QP_DEST_QPN). */
    static final int ALL_QP_ATTR_MASK = (1 << 21) - 1;

    /**
     * Refuses a value the C member cannot hold (struct ibv_qp_attr's u8 and u16 fields would silently wrap:
     * retry_cnt 256 would reach the kernel as 0).
     */
    private static void fits(boolean set, String name, int v, int max) {
        if (set && (v < 0 || v > max)) {
            throw new org.rdma4j.verbs.VerbsException(org.rdma4j.verbs.Errno.EINVAL, "ibv_modify_qp: " + name + " "
                    + v + " does not fit struct ibv_qp_attr (0.." + max + ")");
        }
    }

    /** Writes every attribute of {@code a} into an ibv_qp_attr; the mask says which ones the kernel reads. */
    static void qpAttr(MemorySegment s, QpAttributes a) {
        fits(a.has(org.rdma4j.verbs.QpAttrMask.PKEY_INDEX), "pkey_index", a.pkeyIndex(), 0xFFFF);
        fits(a.has(org.rdma4j.verbs.QpAttrMask.MAX_QP_RD_ATOMIC), "max_rd_atomic", a.maxRdAtomic(), 0xFF);
        fits(a.has(org.rdma4j.verbs.QpAttrMask.MAX_DEST_RD_ATOMIC), "max_dest_rd_atomic", a.maxDestRdAtomic(), 0xFF);
        fits(a.has(org.rdma4j.verbs.QpAttrMask.MIN_RNR_TIMER), "min_rnr_timer", a.minRnrTimer(), 0xFF);
        fits(a.has(org.rdma4j.verbs.QpAttrMask.PORT), "port_num", a.port(), 0xFF);
        fits(a.has(org.rdma4j.verbs.QpAttrMask.TIMEOUT), "timeout", a.timeout(), 0xFF);
        fits(a.has(org.rdma4j.verbs.QpAttrMask.RETRY_CNT), "retry_cnt", a.retryCnt(), 0xFF);
        fits(a.has(org.rdma4j.verbs.QpAttrMask.RNR_RETRY), "rnr_retry", a.rnrRetry(), 0xFF);
        if (a.has(org.rdma4j.verbs.QpAttrMask.AV)) {
            AhAttributes av = a.av();
            fits(true, "ah_attr.grh.sgid_index", av.sgidIndex(), 0xFF);
            fits(true, "ah_attr.grh.hop_limit", av.hopLimit(), 0xFF);
            fits(true, "ah_attr.grh.traffic_class", av.trafficClass(), 0xFF);
            fits(true, "ah_attr.dlid", av.dlid(), 0xFFFF);
            fits(true, "ah_attr.sl", av.sl(), 0xFF);
            fits(true, "ah_attr.port_num", av.portNum(), 0xFF);
        }
        s.fill((byte) 0);
        s.set(I, qa("qp_state"), a.state().ordinal());
        s.set(I, qa("cur_qp_state"), a.curState().ordinal());
        s.set(I, qa("path_mtu"), a.pathMtu().value());
        s.set(I, qa("qkey"), a.qkey());
        s.set(I, qa("rq_psn"), a.rqPsn());
        s.set(I, qa("sq_psn"), a.sqPsn());
        s.set(I, qa("dest_qp_num"), a.destQpNum());
        s.set(I, qa("qp_access_flags"), a.accessFlags());
        if (a.cap() != null) {
            qpCap(s, qa("cap"), a.cap());
        }
        ahAttr(s, qa("ah_attr"), a.av());
        s.set(S, qa("pkey_index"), (short) a.pkeyIndex());
        s.set(B, qa("en_sqd_async_notify"), (byte) (a.enSqdAsyncNotify() ? 1 : 0));
        s.set(B, qa("max_rd_atomic"), (byte) a.maxRdAtomic());
        s.set(B, qa("max_dest_rd_atomic"), (byte) a.maxDestRdAtomic());
        s.set(B, qa("min_rnr_timer"), (byte) a.minRnrTimer());
        s.set(B, qa("port_num"), (byte) a.port());
        s.set(B, qa("timeout"), (byte) a.timeout());
        s.set(B, qa("retry_cnt"), (byte) a.retryCnt());
        s.set(B, qa("rnr_retry"), (byte) a.rnrRetry());
    }

    /** Reads an ibv_qp_attr as ibv_query_qp filled it, every attribute marked set. */
    static QpAttributes qpAttr(MemorySegment s) {
        QpAttributes a = new QpAttributes()
                .state(state(s.get(I, qa("qp_state"))))
                .curState(state(s.get(I, qa("cur_qp_state"))))
                .enSqdAsyncNotify(u8(s, qa("en_sqd_async_notify")) != 0)
                .accessFlags(s.get(I, qa("qp_access_flags")))
                .pkeyIndex(u16(s, qa("pkey_index")))
                .port(u8(s, qa("port_num")))
                .qkey(s.get(I, qa("qkey")))
                .av(ahAttr(s, qa("ah_attr")))
                .pathMtu(mtu(s.get(I, qa("path_mtu"))))
                .timeout(u8(s, qa("timeout")))
                .retryCnt(u8(s, qa("retry_cnt")))
                .rnrRetry(u8(s, qa("rnr_retry")))
                .rqPsn(s.get(I, qa("rq_psn")))
                .maxRdAtomic(u8(s, qa("max_rd_atomic")))
                .minRnrTimer(u8(s, qa("min_rnr_timer")))
                .sqPsn(s.get(I, qa("sq_psn")))
                .maxDestRdAtomic(u8(s, qa("max_dest_rd_atomic")))
                .cap(qpCap(s, qa("cap")))
                .destQpNum(s.get(I, qa("dest_qp_num")));
        a.sqDraining(u8(s, qa("sq_draining")) != 0);
        return a;
    }

    static QpState state(int v) {
        return v >= 0 && v < QpState.values().length ? QpState.values()[v] : QpState.ERR;
    }
}
