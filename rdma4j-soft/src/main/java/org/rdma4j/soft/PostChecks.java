// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.foreign.MemorySegment;

import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.ScatterGatherEntry;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WrOpcode;

/**
 * The checks of a send post (rdma-core's rxe validate_send_wr and rxe_post_send) and the copy of its inline
 * data: what SoftQp.enqueue does not keep inline, so the path of a valid request stays short. Run by the
 * posting thread while it owns the QP's executor (SoftQp.postSend); the refusals set the request's postError.
 */
final class PostChecks {
    private PostChecks() {
    }

    /**
     * {@return whether the request may be posted; if not, its postError and message say why}
     *
     * @param qp the QP posted to
     * @param wr the request
     */
    static boolean validate(SoftQp qp, SendWorkRequest wr) {
        QpState s = qp.state;
        if (qp.closed || s == QpState.RESET || s == QpState.INIT || s == QpState.RTR) {
            // rxe_post_send: the requester is not ready before RTS => -EINVAL
            return refuse(wr, Errno.EINVAL, qp.closed ? qp.describe() + " is closed" : qp.describe() + " is in " + s
                    + ": sends can be posted in RTS (and SQD, SQE, ERR) only; modify it "
                    + (s == QpState.RESET ? "RESET -> INIT -> RTR -> RTS" : s == QpState.INIT ? "INIT -> RTR -> RTS"
                    : "RTR -> RTS") + " first");
        }
        WrOpcode op = wr.opcode();
        if (op == null) {
            return refuse(wr, Errno.EINVAL, "the request has no opcode (SendWorkRequest.opcode)");
        }
        // An opcode the QP type does not have (READ or an atomic on UC, RDMA on UD) is accepted here, as
        // rdma-core's rxe provider accepts it; the requester then fails it (Requester.start).
        int n = wr.numSge();
        if (n > qp.cap.maxSendSge()) {
            return refuse(wr, Errno.EINVAL, "num_sge " + n + " exceeds max_send_sge " + qp.cap.maxSendSge() + " of "
                    + qp.describe() + " (ask for more in QpCapabilities when creating the QP)");
        }
        long total = 0;
        for (int i = 0; i < n; i++) {
            int l = wr.sge(i).length();
            if (l < 0) {
                return refuse(wr, Errno.EINVAL, "sge[" + i + "] has length " + l + " (lengths are unsigned 32-bit"
                        + " in verbs; rdma4j takes 0.." + Integer.MAX_VALUE + ")");
            }
            total += l;
        }
        if (total > SoftDevice.MAX_MSG_SZ) {
            return refuse(wr, Errno.EINVAL, "a message of " + total + " bytes exceeds max_msg_sz "
                    + SoftDevice.MAX_MSG_SZ);
        }
        if (op.isAtomic() && (total < 8 || (wr.remoteAddr() & 7) != 0)) {
            // rdma-core rxe validate_send_wr: fewer than 8 bytes, or a misaligned remote address; longer SGEs
            // are accepted and the original value lands in their first 8 bytes (seen in the VM)
            return refuse(wr, Errno.EINVAL, total < 8 ? op + " needs at least 8 bytes of local SGEs for the"
                    + " original value, has " + total : op + " remote_addr 0x" + Long.toHexString(wr.remoteAddr())
                    + " is not 8-byte aligned");
        }
        int f = wr.sendFlags();
        if ((f & SendFlags.INLINE) != 0) {
            if (!(op == WrOpcode.SEND || op == WrOpcode.SEND_WITH_IMM || op == WrOpcode.RDMA_WRITE
                    || op == WrOpcode.RDMA_WRITE_WITH_IMM)) {
                return refuse(wr, Errno.EINVAL, "INLINE is for SEND and RDMA WRITE, not " + op);
            }
            if (total > qp.cap.maxInlineData()) {
                return refuse(wr, Errno.EINVAL, "inline data of " + total + " bytes exceeds max_inline_data "
                        + qp.cap.maxInlineData() + " of " + qp.describe());
            }
        }
        if (qp.type == QpType.UD) {
            if (!(wr.ah() instanceof SoftAh ah) || ah.closed || ah.pd != qp.pd) {
                // the AH must belong to the QP's PD
                return refuse(wr, Errno.EINVAL, wr.ah() == null ? "a UD send needs an address handle (ah)"
                        : "the address handle is closed, of another device or of another PD than " + qp.describe());
            }
        }
        return true;
    }

    /**
     * Refuses a post: the request's postError says why.
     *
     * @param wr the request
     * @param e the errno
     * @param message the sentence
     * @return false
     */
    static boolean refuse(SendWorkRequest wr, Errno e, String message) {
        wr.postError(e, message);
        return false;
    }

    /**
     * Copies inline data into the WQE's stride of the inline area and sets its length; the L_Key is not checked
     * (ibv_post_send.3).
     *
     * @param qp the QP posted to
     * @param w the WQE's slot
     * @param wr the request
     * @return whether every entry was readable
     */
    static boolean copyInline(SoftQp qp, int w, SendWorkRequest wr) {
        long pos = 0;
        MemorySegment dst = qp.inlineArea;
        long base = qp.sq.inlineOff(w);
        try {
            for (int i = 0, n = wr.numSge(); i < n; i++) {
                ScatterGatherEntry s = wr.sge(i);
                int l = s.length();
                if (l == 0) {
                    continue;
                }
                MemorySegment src = s.segment();
                if (src != null) {
                    // The CPU copies inline data (no device access, no L_Key): from the memory the entry
                    // names, at the address's offset in it (0 for ScatterGatherEntry.inline).
                    long o = s.addr() - src.address();
                    if (o < 0 || o > src.byteSize() - l) {
                        return false;
                    }
                    Bytes.copy(src, o, dst, base + pos, l);
                } else {
                    SoftMr mr = qp.device.lookupMr(s.lkey());
                    if (mr == null || mr.pd.ctx != qp.pd.ctx || !mr.contains(s.addr(), l)) {
                        mr = qp.device.findMrByAddress(qp.pd.ctx, s.addr(), l);
                    }
                    if (mr == null) {
                        return false; // an address outside registered memory cannot be read safely
                    }
                    Bytes.copy(mr.segment, s.addr() - mr.address, dst, base + pos, l);
                }
                pos += l;
            }
        } catch (IllegalStateException | IndexOutOfBoundsException | WrongThreadException ex) {
            return false; // a closed arena, a range outside the segment, a confined segment of another thread
        }
        qp.sq.setLength(w, pos);
        return true;
    }


    /**
     * Refuses a post to a full send queue.
     *
     * @param qp the QP posted to
     * @param wr the request
     * @return false
     */
    static boolean sqFull(SoftQp qp, SendWorkRequest wr) {
        String m = qp.sqFullMessage;
        if (m == null) {
            m = qp.sqFullMessage = "send queue of " + qp.describe() + " is full (" + qp.cap.maxSendWr()
                    + " WRs outstanding, max_send_wr): poll its send CQ, and signal at least every "
                    + qp.cap.maxSendWr() + "th WR, so that slots are freed";
        }
        wr.postError(Errno.ENOMEM, m);
        return false;
    }

    /**
     * Refuses a post whose inline data {@link #copyInline} could not read.
     *
     * @param wr the request
     * @return false
     */
    static boolean inlineUnreadable(SendWorkRequest wr) {
        long total = 0;
        for (int i = 0, n = wr.numSge(); i < n; i++) {
            total += wr.sge(i).length();
        }
        return refuse(wr, Errno.EINVAL, "inline data of " + total + " bytes is not readable: each entry must"
                + " lie in its segment (ScatterGatherEntry.inline) or in a registered region of this context,"
                + " and in memory this thread may access");
    }
}
