// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/**
 * A work completion (ibv_wc), filled in by {@link CompletionQueue#poll}. Reusable: poll into the same
 * objects again and again. On a status other than SUCCESS only wrId, status, qpNum and vendorErr are
 * valid (ibv_poll_cq.3). Not thread-safe.
 */
public final class WorkCompletion {
    private long wrId;
    private WcStatus status = WcStatus.SUCCESS;
    private WcOpcode opcode = WcOpcode.SEND;
    private int vendorErr;
    private int byteLen;
    private int immData;
    private int qpNum;
    private int srcQp;
    private int wcFlags;
    private int pkeyIndex;
    private int slid;
    private int sl;
    private int dlidPathBits;

    /** Creates an empty completion. */
    public WorkCompletion() {
    }

    /**
     * Fills every field; used by providers.
     *
     * @param wrId      work request id
     * @param status    status
     * @param opcode    opcode
     * @param vendorErr vendor error
     * @param byteLen   bytes transferred (receives)
     * @param immData   immediate data
     * @param qpNum     local QP number
     * @param srcQp     source QP (UD)
     * @param wcFlags   {@link WcFlags}
     * @param pkeyIndex P_Key index (UD/GSI)
     * @return this
     */
    public WorkCompletion set(long wrId, WcStatus status, WcOpcode opcode, int vendorErr, int byteLen, int immData,
                              int qpNum, int srcQp, int wcFlags, int pkeyIndex) {
        this.wrId = wrId;
        this.status = status;
        this.opcode = opcode;
        this.vendorErr = vendorErr;
        this.byteLen = byteLen;
        this.immData = immData;
        this.qpNum = qpNum;
        this.srcQp = srcQp;
        this.wcFlags = wcFlags;
        this.pkeyIndex = pkeyIndex;
        this.slid = 0;
        this.sl = 0;
        this.dlidPathBits = 0;
        return this;
    }

    /**
     * Copies another completion into this one.
     *
     * @param o the source
     * @return this
     */
    public WorkCompletion copyFrom(WorkCompletion o) {
        set(o.wrId, o.status, o.opcode, o.vendorErr, o.byteLen, o.immData, o.qpNum, o.srcQp, o.wcFlags, o.pkeyIndex);
        slid = o.slid;
        sl = o.sl;
        dlidPathBits = o.dlidPathBits;
        return this;
    }

    /** {@return the work request id} */
    public long wrId() {
        return wrId;
    }

    /** {@return the status} */
    public WcStatus status() {
        return status;
    }

    /** {@return the opcode (valid on success)} */
    public WcOpcode opcode() {
        return opcode;
    }

    /** {@return the vendor error syndrome} */
    public int vendorErr() {
        return vendorErr;
    }

    /** {@return bytes received (receive completions; includes the 40-byte GRH area on UD)} */
    public int byteLen() {
        return byteLen;
    }

    /** {@return immediate data, valid when {@link WcFlags#WITH_IMM} is set} */
    public int immData() {
        return immData;
    }

    /** {@return the local QP number} */
    public int qpNum() {
        return qpNum;
    }

    /** {@return the source QP number (UD receives)} */
    public int srcQp() {
        return srcQp;
    }

    /** {@return the {@link WcFlags} bit mask} */
    public int wcFlags() {
        return wcFlags;
    }

    /** {@return the P_Key index (UD receives)} */
    public int pkeyIndex() {
        return pkeyIndex;
    }

    /** {@return the source LID (0 on RoCE)} */
    public int slid() {
        return slid;
    }

    /** {@return the service level} */
    public int sl() {
        return sl;
    }

    /** {@return the destination LID path bits} */
    public int dlidPathBits() {
        return dlidPathBits;
    }

    /** {@return true if {@link WcFlags#WITH_IMM} is set} */
    public boolean hasImm() {
        return (wcFlags & WcFlags.WITH_IMM) != 0;
    }

    @Override
    public String toString() {
        return "wc{wr_id=" + wrId + ", status=" + status + ", opcode=" + opcode + ", byte_len=" + byteLen
                + ", qp_num=0x" + Integer.toHexString(qpNum) + ", src_qp=0x" + Integer.toHexString(srcQp)
                + ", wc_flags=0x" + Integer.toHexString(wcFlags) + ", imm=0x" + Integer.toHexString(immData) + '}';
    }
}
