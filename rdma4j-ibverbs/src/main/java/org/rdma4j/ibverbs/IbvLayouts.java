// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.lang.foreign.GroupLayout;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.lang.foreign.UnionLayout;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

/**
 * The x86_64 (LP64) layouts of the libibverbs structs this provider reads or writes, written by hand after
 * rdma-core 44's {@code infiniband/verbs.h} (jextract cannot run here, and would skip the inline verbs
 * anyway). Member names are the C names, so that {@code IbvLayoutsTest} can compile an {@code offsetof}
 * probe against the installed headers and compare every member; anonymous C unions are named with a
 * leading {@code $} and left out of C paths. FFM rejects a misaligned member, so a wrong padding fails at
 * class initialisation. Offsets used on the data path are {@code static final} constants from these
 * layouts ({@link #offset}).
 *
 * <p>Layout rules of libibverbs that are not struct members, also checked by the probe:
 * {@code ibv_context} is the last member of {@code struct verbs_context}, whose {@code sz} sits
 * {@link #VCTX_SZ_DISTANCE} bytes below the context pointer ("grows downwards", verbs.h
 * {@code verbs_get_ctx}); {@code abi_compat == (void *) -1} marks a context that has it.
 */
final class IbvLayouts {
    private IbvLayouts() {
    }

    private static final ValueLayout.OfLong U64 = ValueLayout.JAVA_LONG;
    private static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT;
    private static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT;
    private static final ValueLayout.OfByte U8 = ValueLayout.JAVA_BYTE;
    private static final ValueLayout PTR = ValueLayout.ADDRESS;

    private static MemoryLayout pad(long bytes) {
        return MemoryLayout.paddingLayout(bytes);
    }

    private static MemoryLayout chars(long n, String name) {
        return MemoryLayout.sequenceLayout(n, U8).withName(name);
    }

    /** struct ibv_sge. */
    static final StructLayout SGE = MemoryLayout.structLayout(
            U64.withName("addr"), U32.withName("length"), U32.withName("lkey")).withName("ibv_sge");

    /** struct ibv_mw_bind_info. */
    static final StructLayout MW_BIND_INFO = MemoryLayout.structLayout(
            PTR.withName("mr"), U64.withName("addr"), U64.withName("length"), U32.withName("mw_access_flags"), pad(4))
            .withName("ibv_mw_bind_info");

    /** struct ibv_send_wr (imm_data is big-endian). */
    static final StructLayout SEND_WR = MemoryLayout.structLayout(
            U64.withName("wr_id"),
            PTR.withName("next"),
            PTR.withName("sg_list"),
            U32.withName("num_sge"),
            U32.withName("opcode"),
            U32.withName("send_flags"),
            MemoryLayout.unionLayout(U32.withName("imm_data"), U32.withName("invalidate_rkey")).withName("$imm"),
            MemoryLayout.unionLayout(
                    MemoryLayout.structLayout(U64.withName("remote_addr"), U32.withName("rkey"), pad(4)).withName("rdma"),
                    MemoryLayout.structLayout(U64.withName("remote_addr"), U64.withName("compare_add"),
                            U64.withName("swap"), U32.withName("rkey"), pad(4)).withName("atomic"),
                    MemoryLayout.structLayout(PTR.withName("ah"), U32.withName("remote_qpn"),
                            U32.withName("remote_qkey")).withName("ud")).withName("wr"),
            MemoryLayout.unionLayout(MemoryLayout.structLayout(U32.withName("remote_srqn")).withName("xrc"))
                    .withName("qp_type"),
            pad(4),
            MemoryLayout.unionLayout(
                    MemoryLayout.structLayout(PTR.withName("mw"), U32.withName("rkey"), pad(4),
                            MW_BIND_INFO.withName("bind_info")).withName("bind_mw"),
                    MemoryLayout.structLayout(PTR.withName("hdr"), U16.withName("hdr_sz"), U16.withName("mss"), pad(4))
                            .withName("tso")).withName("$ext"))
            .withName("ibv_send_wr");

    /** struct ibv_recv_wr. */
    static final StructLayout RECV_WR = MemoryLayout.structLayout(
            U64.withName("wr_id"), PTR.withName("next"), PTR.withName("sg_list"), U32.withName("num_sge"), pad(4))
            .withName("ibv_recv_wr");

    /** struct ibv_wc (imm_data is big-endian). */
    static final StructLayout WC = MemoryLayout.structLayout(
            U64.withName("wr_id"),
            U32.withName("status"),
            U32.withName("opcode"),
            U32.withName("vendor_err"),
            U32.withName("byte_len"),
            MemoryLayout.unionLayout(U32.withName("imm_data"), U32.withName("invalidated_rkey")).withName("$imm"),
            U32.withName("qp_num"),
            U32.withName("src_qp"),
            U32.withName("wc_flags"),
            U16.withName("pkey_index"),
            U16.withName("slid"),
            U8.withName("sl"),
            U8.withName("dlid_path_bits"),
            pad(2)).withName("ibv_wc");

    /** union ibv_gid (big-endian). */
    static final UnionLayout GID = MemoryLayout.unionLayout(
            chars(16, "raw"),
            MemoryLayout.structLayout(U64.withName("subnet_prefix"), U64.withName("interface_id")).withName("global"))
            .withName("ibv_gid");

    /** struct ibv_global_route. */
    static final StructLayout GLOBAL_ROUTE = MemoryLayout.structLayout(
            GID.withName("dgid"), U32.withName("flow_label"), U8.withName("sgid_index"), U8.withName("hop_limit"),
            U8.withName("traffic_class"), pad(1)).withName("ibv_global_route");

    /** struct ibv_ah_attr. */
    static final StructLayout AH_ATTR = MemoryLayout.structLayout(
            GLOBAL_ROUTE.withName("grh"), U16.withName("dlid"), U8.withName("sl"), U8.withName("src_path_bits"),
            U8.withName("static_rate"), U8.withName("is_global"), U8.withName("port_num"), pad(1))
            .withName("ibv_ah_attr");

    /** struct ibv_qp_cap. */
    static final StructLayout QP_CAP = MemoryLayout.structLayout(
            U32.withName("max_send_wr"), U32.withName("max_recv_wr"), U32.withName("max_send_sge"),
            U32.withName("max_recv_sge"), U32.withName("max_inline_data")).withName("ibv_qp_cap");

    /** struct ibv_qp_init_attr. */
    static final StructLayout QP_INIT_ATTR = MemoryLayout.structLayout(
            PTR.withName("qp_context"), PTR.withName("send_cq"), PTR.withName("recv_cq"), PTR.withName("srq"),
            QP_CAP.withName("cap"), U32.withName("qp_type"), U32.withName("sq_sig_all"), pad(4))
            .withName("ibv_qp_init_attr");

    /** struct ibv_qp_attr. */
    static final StructLayout QP_ATTR = MemoryLayout.structLayout(
            U32.withName("qp_state"), U32.withName("cur_qp_state"), U32.withName("path_mtu"),
            U32.withName("path_mig_state"), U32.withName("qkey"), U32.withName("rq_psn"), U32.withName("sq_psn"),
            U32.withName("dest_qp_num"), U32.withName("qp_access_flags"), QP_CAP.withName("cap"),
            AH_ATTR.withName("ah_attr"), AH_ATTR.withName("alt_ah_attr"), U16.withName("pkey_index"),
            U16.withName("alt_pkey_index"), U8.withName("en_sqd_async_notify"), U8.withName("sq_draining"),
            U8.withName("max_rd_atomic"), U8.withName("max_dest_rd_atomic"), U8.withName("min_rnr_timer"),
            U8.withName("port_num"), U8.withName("timeout"), U8.withName("retry_cnt"), U8.withName("rnr_retry"),
            U8.withName("alt_port_num"), U8.withName("alt_timeout"), pad(1), U32.withName("rate_limit"), pad(4))
            .withName("ibv_qp_attr");

    /**
     * struct ibv_port_attr of rdma-core 44 (52 bytes; later releases append {@code active_speed_ex}). The
     * exported {@code ibv_query_port@IBVERBS_1.1} fills only the first 48 bytes ({@code _compat_ibv_port_attr},
     * verbs.c {@code __lib_query_port}), which hold every member read here.
     */
    static final StructLayout PORT_ATTR = MemoryLayout.structLayout(
            U32.withName("state"), U32.withName("max_mtu"), U32.withName("active_mtu"), U32.withName("gid_tbl_len"),
            U32.withName("port_cap_flags"), U32.withName("max_msg_sz"), U32.withName("bad_pkey_cntr"),
            U32.withName("qkey_viol_cntr"), U16.withName("pkey_tbl_len"), U16.withName("lid"), U16.withName("sm_lid"),
            U8.withName("lmc"), U8.withName("max_vl_num"), U8.withName("sm_sl"), U8.withName("subnet_timeout"),
            U8.withName("init_type_reply"), U8.withName("active_width"), U8.withName("active_speed"),
            U8.withName("phys_state"), U8.withName("link_layer"), U8.withName("flags"),
            U16.withName("port_cap_flags2"), pad(2)).withName("ibv_port_attr");

    /** Bytes of {@link #PORT_ATTR} that {@code ibv_query_port@IBVERBS_1.1} writes. */
    static final long PORT_ATTR_COMPAT_SIZE = 48;

    /** struct ibv_device_attr. */
    static final StructLayout DEVICE_ATTR = MemoryLayout.structLayout(
            chars(64, "fw_ver"), U64.withName("node_guid"), U64.withName("sys_image_guid"),
            U64.withName("max_mr_size"), U64.withName("page_size_cap"), U32.withName("vendor_id"),
            U32.withName("vendor_part_id"), U32.withName("hw_ver"), U32.withName("max_qp"), U32.withName("max_qp_wr"),
            U32.withName("device_cap_flags"), U32.withName("max_sge"), U32.withName("max_sge_rd"),
            U32.withName("max_cq"), U32.withName("max_cqe"), U32.withName("max_mr"), U32.withName("max_pd"),
            U32.withName("max_qp_rd_atom"), U32.withName("max_ee_rd_atom"), U32.withName("max_res_rd_atom"),
            U32.withName("max_qp_init_rd_atom"), U32.withName("max_ee_init_rd_atom"), U32.withName("atomic_cap"),
            U32.withName("max_ee"), U32.withName("max_rdd"), U32.withName("max_mw"), U32.withName("max_raw_ipv6_qp"),
            U32.withName("max_raw_ethy_qp"), U32.withName("max_mcast_grp"), U32.withName("max_mcast_qp_attach"),
            U32.withName("max_total_mcast_qp_attach"), U32.withName("max_ah"), U32.withName("max_fmr"),
            U32.withName("max_map_per_fmr"), U32.withName("max_srq"), U32.withName("max_srq_wr"),
            U32.withName("max_srq_sge"), U16.withName("max_pkeys"), U8.withName("local_ca_ack_delay"),
            U8.withName("phys_port_cnt"), pad(4)).withName("ibv_device_attr");

    /** struct ibv_async_event. */
    static final StructLayout ASYNC_EVENT = MemoryLayout.structLayout(
            MemoryLayout.unionLayout(PTR.withName("cq"), PTR.withName("qp"), PTR.withName("srq"), PTR.withName("wq"),
                    U32.withName("port_num")).withName("element"),
            U32.withName("event_type"), pad(4)).withName("ibv_async_event");

    /** struct ibv_srq_attr. */
    static final StructLayout SRQ_ATTR = MemoryLayout.structLayout(
            U32.withName("max_wr"), U32.withName("max_sge"), U32.withName("srq_limit")).withName("ibv_srq_attr");

    /** struct ibv_srq_init_attr. */
    static final StructLayout SRQ_INIT_ATTR = MemoryLayout.structLayout(
            PTR.withName("srq_context"), SRQ_ATTR.withName("attr"), pad(4)).withName("ibv_srq_init_attr");

    /** struct ibv_device. */
    static final StructLayout DEVICE = MemoryLayout.structLayout(
            pad(16), U32.withName("node_type"), U32.withName("transport_type"), chars(64, "name"),
            chars(64, "dev_name"), chars(256, "dev_path"), chars(256, "ibdev_path")).withName("ibv_device");

    /** struct ibv_context_ops: the five live data-path slots; the rest are ABI padding ({@code _compat_*}). */
    static final StructLayout CONTEXT_OPS = MemoryLayout.structLayout(
            pad(88), PTR.withName("poll_cq"), PTR.withName("req_notify_cq"), pad(56), PTR.withName("post_srq_recv"),
            pad(32), PTR.withName("post_send"), PTR.withName("post_recv"), pad(40)).withName("ibv_context_ops");

    /** struct ibv_context. */
    static final StructLayout CONTEXT = MemoryLayout.structLayout(
            PTR.withName("device"), CONTEXT_OPS.withName("ops"), U32.withName("cmd_fd"), U32.withName("async_fd"),
            U32.withName("num_comp_vectors"), pad(4), chars(40, "mutex"), PTR.withName("abi_compat"))
            .withName("ibv_context");

    /** struct ibv_comp_channel. */
    static final StructLayout COMP_CHANNEL = MemoryLayout.structLayout(
            PTR.withName("context"), U32.withName("fd"), U32.withName("refcnt")).withName("ibv_comp_channel");

    /** struct ibv_pd. */
    static final StructLayout PD = MemoryLayout.structLayout(PTR.withName("context"), U32.withName("handle"), pad(4))
            .withName("ibv_pd");

    /** struct ibv_mr. */
    static final StructLayout MR = MemoryLayout.structLayout(
            PTR.withName("context"), PTR.withName("pd"), PTR.withName("addr"), U64.withName("length"),
            U32.withName("handle"), U32.withName("lkey"), U32.withName("rkey"), pad(4)).withName("ibv_mr");

    /** struct ibv_cq. */
    static final StructLayout CQ = MemoryLayout.structLayout(
            PTR.withName("context"), PTR.withName("channel"), PTR.withName("cq_context"), U32.withName("handle"),
            U32.withName("cqe"), chars(40, "mutex"), chars(48, "cond"), U32.withName("comp_events_completed"),
            U32.withName("async_events_completed")).withName("ibv_cq");

    /** struct ibv_qp. */
    static final StructLayout QP = MemoryLayout.structLayout(
            PTR.withName("context"), PTR.withName("qp_context"), PTR.withName("pd"), PTR.withName("send_cq"),
            PTR.withName("recv_cq"), PTR.withName("srq"), U32.withName("handle"), U32.withName("qp_num"),
            U32.withName("state"), U32.withName("qp_type"), chars(40, "mutex"), chars(48, "cond"),
            U32.withName("events_completed"), pad(4)).withName("ibv_qp");

    /** struct ibv_srq. */
    static final StructLayout SRQ = MemoryLayout.structLayout(
            PTR.withName("context"), PTR.withName("srq_context"), PTR.withName("pd"), U32.withName("handle"), pad(4),
            chars(40, "mutex"), chars(48, "cond"), U32.withName("events_completed"), pad(4)).withName("ibv_srq");

    /** struct ibv_ah. */
    static final StructLayout AH = MemoryLayout.structLayout(
            PTR.withName("context"), PTR.withName("pd"), U32.withName("handle"), pad(4)).withName("ibv_ah");

    /** struct ibv_gid_entry (for {@code _ibv_query_gid_ex}). */
    static final StructLayout GID_ENTRY = MemoryLayout.structLayout(
            GID.withName("gid"), U32.withName("gid_index"), U32.withName("port_num"), U32.withName("gid_type"),
            U32.withName("ndev_ifindex")).withName("ibv_gid_entry");

    /**
     * Distance of {@code verbs_context.sz} below the {@code ibv_context} it ends with: {@code sz} is the
     * member right before {@code context} ({@code offsetof(struct verbs_context, context) -
     * offsetof(struct verbs_context, sz)}).
     */
    static final long VCTX_SZ_DISTANCE = 8;

    /** Every struct above, for the header probe. */
    static final List<GroupLayout> ALL = List.of(SGE, MW_BIND_INFO, SEND_WR, RECV_WR, WC, GID, GLOBAL_ROUTE, AH_ATTR,
            QP_CAP, QP_INIT_ATTR, QP_ATTR, PORT_ATTR, DEVICE_ATTR, ASYNC_EVENT, SRQ_ATTR, SRQ_INIT_ATTR, DEVICE,
            CONTEXT_OPS, CONTEXT, COMP_CHANNEL, PD, MR, CQ, QP, SRQ, AH, GID_ENTRY);

    /**
     * The offset of a member named by its C path, e.g. {@code wr.rdma.rkey} or {@code imm_data} (anonymous
     * unions are looked through).
     *
     * @param layout a struct or union
     * @param cPath  dotted member names as C writes them
     * @return the byte offset
     */
    static long offset(GroupLayout layout, String cPath) {
        long off = 0;
        MemoryLayout cur = layout;
        for (String name : cPath.split("\\.")) {
            long[] found = find((GroupLayout) cur, name);
            if (found == null) {
                throw new IllegalArgumentException(layout.name().orElse("?") + " has no member " + cPath);
            }
            off += found[0];
            cur = member((GroupLayout) cur, name);
        }
        return off;
    }

    /** A leaf or group member with its C path, offset and size, for the probe. */
    record Member(String cPath, long offset, long size) {
    }

    /**
     * {@return every named member, nested ones included, with C paths (anonymous unions looked through)}
     *
     * @param layout a struct or union
     */
    static List<Member> members(GroupLayout layout) {
        List<Member> out = new ArrayList<>();
        collect(layout, "", 0, out);
        return out;
    }

    private static void collect(GroupLayout g, String prefix, long base, List<Member> out) {
        long off = 0;
        for (MemoryLayout m : g.memberLayouts()) {
            long at = g instanceof StructLayout ? off : 0;
            String name = m.name().orElse(null);
            if (name != null) {
                boolean anon = name.startsWith("$");
                String path = anon ? prefix : prefix + (prefix.isEmpty() ? "" : ".") + name;
                if (!anon) {
                    out.add(new Member(path, base + at, m.byteSize()));
                }
                if (m instanceof GroupLayout sub) {
                    collect(sub, path, base + at, out);
                }
            }
            off += m.byteSize();
        }
    }

    private static long[] find(GroupLayout g, String name) {
        long off = 0;
        for (MemoryLayout m : g.memberLayouts()) {
            long at = g instanceof StructLayout ? off : 0;
            String n = m.name().orElse("");
            if (n.equals(name)) {
                return new long[] {at};
            }
            if (n.startsWith("$") && m instanceof GroupLayout sub) {
                long[] inner = find(sub, name);
                if (inner != null) {
                    return new long[] {at + inner[0]};
                }
            }
            off += m.byteSize();
        }
        return null;
    }

    private static MemoryLayout member(GroupLayout g, String name) {
        for (MemoryLayout m : g.memberLayouts()) {
            String n = m.name().orElse("");
            if (n.equals(name)) {
                return m;
            }
            if (n.startsWith("$") && m instanceof GroupLayout sub) {
                MemoryLayout inner = member(sub, name);
                if (inner != null) {
                    return inner;
                }
            }
        }
        return null;
    }
}
