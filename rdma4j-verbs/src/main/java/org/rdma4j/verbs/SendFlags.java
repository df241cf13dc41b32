// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/** Send work-request flags (ibv_send_flags), combined as an int bit mask on the data path. */
public final class SendFlags {
    /** Wait until earlier RDMA READ and atomic operations complete before starting this one (RC). */
    public static final int FENCE = 1;
    /** Generate a completion for this request (always generated when the QP has sq_sig_all). */
    public static final int SIGNALED = 1 << 1;
    /** Ask the receiver to raise a solicited event (SEND and RDMA_WRITE_WITH_IMM). */
    public static final int SOLICITED = 1 << 2;
    /** Copy the data into the work request at post time; the L_Key is not checked (SEND, RDMA_WRITE). */
    public static final int INLINE = 1 << 3;

    static final int ALL = FENCE | SIGNALED | SOLICITED | INLINE;

    private SendFlags() {
    }
}
