// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit.model;

import java.util.List;
import java.util.function.Supplier;

import org.rdma4j.verbs.WcFlags;
import org.rdma4j.verbs.WcOpcode;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;

/**
 * What the model predicts for one work completion. On a status other than SUCCESS only wr_id, status
 * and qp_num are compared (ibv_poll_cq.3: the other fields are undefined).
 *
 * @param wrId     work request id
 * @param status   status
 * @param opcode   opcode (SUCCESS only)
 * @param byteLen  byte_len, or -1 not to check it (send-queue completions)
 * @param withImm  whether WITH_IMM must be set (SUCCESS only)
 * @param imm      immediate data when {@code withImm}
 * @param qpNum    local QP number
 * @param srcQp    source QP (UD receives), or -1
 * @param grh      whether the GRH flag must be set (UD receives)
 * @param op       the operation that produced it, for messages
 */
record ExpectedCompletion(long wrId, WcStatus status, WcOpcode opcode, int byteLen, boolean withImm, int imm,
                          int qpNum, int srcQp, boolean grh, String op) {

    /** {@return an expected flush (or other error) completion for the same request} */
    static ExpectedCompletion error(long wrId, WcStatus status, int qpNum, String op) {
        return new ExpectedCompletion(wrId, status, null, -1, false, 0, qpNum, -1, false, op);
    }

    /**
     * {@return null if it matches, else what differs}
     *
     * @param wc an actual completion
     */
    String diff(WorkCompletion wc) {
        StringBuilder sb = new StringBuilder();
        if (wc.wrId() != wrId) {
            sb.append(" wr_id=0x").append(Long.toHexString(wc.wrId())).append(" (expected 0x")
                    .append(Long.toHexString(wrId)).append(')');
        }
        if (wc.status() != status) {
            sb.append(" status=").append(wc.status()).append(" (expected ").append(status).append(')');
        }
        if (wc.qpNum() != qpNum) {
            sb.append(" qp_num=0x").append(Integer.toHexString(wc.qpNum())).append(" (expected 0x")
                    .append(Integer.toHexString(qpNum)).append(')');
        }
        if (status == WcStatus.SUCCESS && wc.status() == WcStatus.SUCCESS) {
            if (wc.opcode() != opcode) {
                sb.append(" opcode=").append(wc.opcode()).append(" (expected ").append(opcode).append(')');
            }
            if (byteLen >= 0 && wc.byteLen() != byteLen) {
                sb.append(" byte_len=").append(wc.byteLen()).append(" (expected ").append(byteLen).append(')');
            }
            if (opcode.isReceive()) {
                if (wc.hasImm() != withImm) {
                    sb.append(" WITH_IMM=").append(wc.hasImm()).append(" (expected ").append(withImm).append(')');
                } else if (withImm && wc.immData() != imm) {
                    sb.append(" imm=0x").append(Integer.toHexString(wc.immData())).append(" (expected 0x")
                            .append(Integer.toHexString(imm)).append(')');
                }
                if (srcQp >= 0 && wc.srcQp() != srcQp) {
                    sb.append(" src_qp=0x").append(Integer.toHexString(wc.srcQp())).append(" (expected 0x")
                            .append(Integer.toHexString(srcQp)).append(')');
                }
                if (grh && (wc.wcFlags() & WcFlags.GRH) == 0) {
                    sb.append(" GRH flag not set (a RoCE UD receive always carries a GRH)");
                }
            }
        }
        return sb.isEmpty() ? null : sb.toString().trim();
    }

    /**
     * {@return {@code actual} reordered to the wr_ids of {@code expected}} When a wr_id is missing or repeated
     * it returns {@code actual} as it is, so that the positional match reports the difference.
     */
    static List<WorkCompletion> inExpectedOrder(List<ExpectedCompletion> expected, List<WorkCompletion> actual) {
        java.util.Map<Long, WorkCompletion> byId = new java.util.HashMap<>();
        for (WorkCompletion wc : actual) {
            if (byId.put(wc.wrId(), wc) != null) {
                return actual;
            }
        }
        List<WorkCompletion> out = new java.util.ArrayList<>(actual.size());
        for (ExpectedCompletion e : expected) {
            WorkCompletion wc = byId.get(e.wrId());
            if (wc == null) {
                return actual;
            }
            out.add(wc);
        }
        return out.size() == actual.size() ? out : actual;
    }

    /**
     * Compares completions one by one, in order.
     *
     * @param what     which CQ, for the message
     * @param expected predictions
     * @param actual   completions polled
     * @param context  the operations, for the message
     */
    static void assertMatch(String what, List<ExpectedCompletion> expected, List<WorkCompletion> actual,
                            Supplier<String> context) {
        for (int i = 0; i < expected.size(); i++) {
            String d = expected.get(i).diff(actual.get(i));
            if (d != null) {
                StringBuilder sb = new StringBuilder();
                sb.append(what).append(": completion #").append(i).append(" of ").append(expected.size())
                        .append(" differs from the model: ").append(d).append("\n  expected for ")
                        .append(expected.get(i).op()).append(": ").append(expected.get(i))
                        .append("\n  actual: ").append(actual.get(i)).append("\n  all expected:");
                for (ExpectedCompletion e : expected) {
                    sb.append("\n    ").append(e);
                }
                sb.append("\n  all actual:");
                for (WorkCompletion wc : actual) {
                    sb.append("\n    ").append(wc);
                }
                sb.append('\n').append(context.get());
                throw new AssertionError(sb.toString());
            }
        }
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder("{wr_id=0x").append(Long.toHexString(wrId)).append(' ').append(status);
        if (status == WcStatus.SUCCESS) {
            sb.append(' ').append(opcode);
            if (byteLen >= 0) {
                sb.append(" byte_len=").append(byteLen);
            }
            if (withImm) {
                sb.append(" imm=0x").append(Integer.toHexString(imm));
            }
        }
        return sb.append('}').toString();
    }
}
