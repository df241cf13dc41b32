// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import static org.rdma4j.ibverbs.IbvLayouts.offset;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.ScatterGatherEntry;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcOpcode;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * Work requests into {@code ibv_send_wr}/{@code ibv_recv_wr} + {@code ibv_sge}, and {@code ibv_wc} into
 * {@link WorkCompletion}, at offsets that are {@code static final} constants of {@link IbvLayouts}. Every
 * byte of a request slot is written (unused unions zeroed), so a reused slot never carries a field of the
 * previous request; {@code WrCodecTest} compares the bytes with what C writes for each request type.
 */
final class WrCodec {
    private WrCodec() {
    }

    static final long SEND_WR_SIZE = IbvLayouts.SEND_WR.byteSize();
    static final long RECV_WR_SIZE = IbvLayouts.RECV_WR.byteSize();
    static final long SGE_SIZE = IbvLayouts.SGE.byteSize();

    private static final ValueLayout.OfInt I = ValueLayout.JAVA_INT;
    private static final ValueLayout.OfLong L = ValueLayout.JAVA_LONG;
    private static final ValueLayout.OfInt BE32 = ValueLayout.JAVA_INT.withOrder(ByteOrder.BIG_ENDIAN);

    private static final long S_WR_ID = offset(IbvLayouts.SEND_WR, "wr_id");
    private static final long S_NEXT = offset(IbvLayouts.SEND_WR, "next");
    private static final long S_SG_LIST = offset(IbvLayouts.SEND_WR, "sg_list");
    private static final long S_NUM_SGE = offset(IbvLayouts.SEND_WR, "num_sge");
    private static final long S_OPCODE = offset(IbvLayouts.SEND_WR, "opcode");
    private static final long S_FLAGS = offset(IbvLayouts.SEND_WR, "send_flags");
    private static final long S_IMM = offset(IbvLayouts.SEND_WR, "imm_data");
    private static final long S_WR = offset(IbvLayouts.SEND_WR, "wr");
    private static final long S_RDMA_ADDR = offset(IbvLayouts.SEND_WR, "wr.rdma.remote_addr");
    private static final long S_RDMA_RKEY = offset(IbvLayouts.SEND_WR, "wr.rdma.rkey");
    private static final long S_ATOMIC_ADDR = offset(IbvLayouts.SEND_WR, "wr.atomic.remote_addr");
    private static final long S_ATOMIC_CMP = offset(IbvLayouts.SEND_WR, "wr.atomic.compare_add");
    private static final long S_ATOMIC_SWAP = offset(IbvLayouts.SEND_WR, "wr.atomic.swap");
    private static final long S_ATOMIC_RKEY = offset(IbvLayouts.SEND_WR, "wr.atomic.rkey");
    private static final long S_UD_AH = offset(IbvLayouts.SEND_WR, "wr.ud.ah");
    private static final long S_UD_QPN = offset(IbvLayouts.SEND_WR, "wr.ud.remote_qpn");
    private static final long S_UD_QKEY = offset(IbvLayouts.SEND_WR, "wr.ud.remote_qkey");

    private static final long R_WR_ID = offset(IbvLayouts.RECV_WR, "wr_id");
    private static final long R_NEXT = offset(IbvLayouts.RECV_WR, "next");
    private static final long R_SG_LIST = offset(IbvLayouts.RECV_WR, "sg_list");
    private static final long R_NUM_SGE = offset(IbvLayouts.RECV_WR, "num_sge");

    private static final long G_ADDR = offset(IbvLayouts.SGE, "addr");
    private static final long G_LENGTH = offset(IbvLayouts.SGE, "length");
    private static final long G_LKEY = offset(IbvLayouts.SGE, "lkey");

    private static final long W_WR_ID = offset(IbvLayouts.WC, "wr_id");
    private static final long W_STATUS = offset(IbvLayouts.WC, "status");
    private static final long W_OPCODE = offset(IbvLayouts.WC, "opcode");
    private static final long W_VENDOR_ERR = offset(IbvLayouts.WC, "vendor_err");
    private static final long W_BYTE_LEN = offset(IbvLayouts.WC, "byte_len");
    private static final long W_IMM = offset(IbvLayouts.WC, "imm_data");
    private static final long W_QP_NUM = offset(IbvLayouts.WC, "qp_num");
    private static final long W_SRC_QP = offset(IbvLayouts.WC, "src_qp");
    private static final long W_WC_FLAGS = offset(IbvLayouts.WC, "wc_flags");
    private static final long W_PKEY_INDEX = offset(IbvLayouts.WC, "pkey_index");

    private static final WcStatus[] STATUS = WcStatus.values();

    /**
     * Writes one send request.
     *
     * @param wr      the request
     * @param seg     the slot array
     * @param off     this slot's offset in {@code seg}
     * @param next    the address of the next slot, 0 for the last
     * @param sges    this slot's SGE array (room for {@code wr.numSge()} entries), or 0 when it has none
     * @param sgeSeg  the segment holding {@code sges}
     * @param sgeOff  the SGE array's offset in {@code sgeSeg}
     * @param ah      the address of the {@code ibv_ah} (UD), else 0
     * @param inline  where each SGE's inline bytes were staged (by SGE index), or null to use the SGE's address
     */
    static void writeSend(SendWorkRequest wr, MemorySegment seg, long off, long next, long sges, MemorySegment sgeSeg,
            long sgeOff, long ah, long[] inline) {
        writeSend(wr, seg, off, next, sges, sgeSeg, sgeOff, ah, inline, false);
    }

    /**
     * As {@link #writeSend(SendWorkRequest, MemorySegment, long, long, long, MemorySegment, long, long, long[])},
     * leaving out the gather entries of length 0 when {@code dropEmpty} (they carry no byte and their key is
     * not checked, so the request means the same): siw 6.1 dereferences a NULL memory object for a zero-length
     * entry ahead of a non-empty one (siw_check_sgl_tx skips it, siw_tx_hdt does not: a kernel oops, seen in
     * the VM).
     */
    static void writeSend(SendWorkRequest wr, MemorySegment seg, long off, long next, long sges, MemorySegment sgeSeg,
            long sgeOff, long ah, long[] inline, boolean dropEmpty) {
        int n = 0;
        for (int i = 0; i < wr.numSge(); i++) {
            ScatterGatherEntry e = wr.sge(i);
            if (dropEmpty && e.length() == 0) {
                continue;
            }
            long o = sgeOff + n * SGE_SIZE;
            sgeSeg.set(L, o + G_ADDR, inline != null && inline[i] != 0 ? inline[i] : e.addr());
            sgeSeg.set(I, o + G_LENGTH, e.length());
            sgeSeg.set(I, o + G_LKEY, e.lkey());
            n++;
        }
        seg.asSlice(off, SEND_WR_SIZE).fill((byte) 0);
        seg.set(L, off + S_WR_ID, wr.wrId());
        seg.set(L, off + S_NEXT, next);
        seg.set(L, off + S_SG_LIST, n == 0 ? 0 : sges);
        seg.set(I, off + S_NUM_SGE, n);
        WrOpcode op = wr.opcode();
        seg.set(I, off + S_OPCODE, op.value());
        seg.set(I, off + S_FLAGS, wr.sendFlags());
        if (op.hasImm()) {
            seg.set(BE32, off + S_IMM, wr.immData()); // htonl: the verbs API holds the value in host order
        }
        if (ah != 0) {
            seg.set(L, off + S_UD_AH, ah);
            seg.set(I, off + S_UD_QPN, wr.remoteQpn());
            seg.set(I, off + S_UD_QKEY, wr.remoteQkey());
        } else if (op.isAtomic()) {
            seg.set(L, off + S_ATOMIC_ADDR, wr.remoteAddr());
            seg.set(L, off + S_ATOMIC_CMP, wr.compareAdd());
            seg.set(L, off + S_ATOMIC_SWAP, wr.swap());
            seg.set(I, off + S_ATOMIC_RKEY, wr.rkey());
        } else if (op != WrOpcode.SEND && op != WrOpcode.SEND_WITH_IMM) {
            seg.set(L, off + S_RDMA_ADDR, wr.remoteAddr());
            seg.set(I, off + S_RDMA_RKEY, wr.rkey());
        }
    }

    /** The offset of the {@code wr} union (for tests). */
    static long sendWrUnionOffset() {
        return S_WR;
    }

    /**
     * Writes one receive request.
     *
     * @param wr     the request
     * @param seg    the slot array
     * @param off    this slot's offset
     * @param next   the next slot's address, 0 for the last
     * @param sges   this slot's SGE array address, 0 without entries
     * @param sgeSeg the segment holding it
     * @param sgeOff its offset in {@code sgeSeg}
     */
    static void writeRecv(RecvWorkRequest wr, MemorySegment seg, long off, long next, long sges, MemorySegment sgeSeg,
            long sgeOff) {
        int n = wr.numSge();
        for (int i = 0; i < n; i++) {
            ScatterGatherEntry e = wr.sge(i);
            long o = sgeOff + i * SGE_SIZE;
            sgeSeg.set(L, o + G_ADDR, e.addr());
            sgeSeg.set(I, o + G_LENGTH, e.length());
            sgeSeg.set(I, o + G_LKEY, e.lkey());
        }
        seg.asSlice(off, RECV_WR_SIZE).fill((byte) 0);
        seg.set(L, off + R_WR_ID, wr.wrId());
        seg.set(L, off + R_NEXT, next);
        seg.set(L, off + R_SG_LIST, n == 0 ? 0 : sges);
        seg.set(I, off + R_NUM_SGE, n);
    }

    /**
     * Reads one {@code ibv_wc}.
     *
     * @param seg the array
     * @param off the entry's offset
     * @param wc  filled in
     */
    static void readWc(MemorySegment seg, long off, WorkCompletion wc) {
        int status = seg.get(I, off + W_STATUS);
        int flags = seg.get(I, off + W_WC_FLAGS);
        // the TM_* statuses (22, 23) and anything newer are errors the verbs API has no name for
        WcStatus s = status >= 0 && status < STATUS.length ? STATUS[status] : WcStatus.GENERAL_ERR;
        wc.set(seg.get(L, off + W_WR_ID), s, opcode(seg.get(I, off + W_OPCODE)), seg.get(I, off + W_VENDOR_ERR),
                seg.get(I, off + W_BYTE_LEN), seg.get(BE32, off + W_IMM), seg.get(I, off + W_QP_NUM),
                seg.get(I, off + W_SRC_QP), flags, seg.get(ValueLayout.JAVA_SHORT, off + W_PKEY_INDEX) & 0xFFFF);
    }

    /**
     * {@return the verbs API's opcode; SEND for BIND_MW, LOCAL_INV and TSO, which this provider never posts (and
     * for the undefined opcode of an error completion)}
     *
     * @param v an ibv_wc_opcode
     */
    static WcOpcode opcode(int v) {
        return switch (v) {
            case 1 -> WcOpcode.RDMA_WRITE;
            case 2 -> WcOpcode.RDMA_READ;
            case 3 -> WcOpcode.COMP_SWAP;
            case 4 -> WcOpcode.FETCH_ADD;
            case 128 -> WcOpcode.RECV;
            case 129 -> WcOpcode.RECV_RDMA_WITH_IMM;
            default -> WcOpcode.SEND;
        };
    }
}
