// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/** Send work-request opcodes (ibv_wr_opcode) with the QP types that accept them. */
public enum WrOpcode {
    /** RDMA WRITE: RC, UC. */
    RDMA_WRITE(0, WcOpcode.RDMA_WRITE, true, true, false),
    /** RDMA WRITE with immediate data, consuming a receive at the responder: RC, UC. */
    RDMA_WRITE_WITH_IMM(1, WcOpcode.RDMA_WRITE, true, true, false),
    /** SEND: RC, UC, UD. */
    SEND(2, WcOpcode.SEND, true, true, true),
    /** SEND with immediate data: RC, UC, UD. */
    SEND_WITH_IMM(3, WcOpcode.SEND, true, true, true),
    /** RDMA READ: RC. */
    RDMA_READ(4, WcOpcode.RDMA_READ, true, false, false),
    /** Atomic compare and swap on 8 aligned bytes: RC. */
    ATOMIC_CMP_AND_SWP(5, WcOpcode.COMP_SWAP, true, false, false),
    /** Atomic fetch and add on 8 aligned bytes: RC. */
    ATOMIC_FETCH_AND_ADD(6, WcOpcode.FETCH_ADD, true, false, false);

    private final int value;
    private final WcOpcode wcOpcode;
    private final boolean rc;
    private final boolean uc;
    private final boolean ud;

    WrOpcode(int value, WcOpcode wcOpcode, boolean rc, boolean uc, boolean ud) {
        this.value = value;
        this.wcOpcode = wcOpcode;
        this.rc = rc;
        this.uc = uc;
        this.ud = ud;
    }

    /** {@return the ibv_wr_opcode value} */
    public int value() {
        return value;
    }

    /** {@return the opcode of this request's send-queue completion} */
    public WcOpcode wcOpcode() {
        return wcOpcode;
    }

    /**
     * {@return whether a QP of that type accepts this opcode (ibv_post_send.3 table)}
     *
     * @param type a QP type
     */
    public boolean validFor(QpType type) {
        return switch (type) {
            case RC -> rc;
            case UC -> uc;
            case UD -> ud;
        };
    }

    /** {@return true for the two atomic opcodes} */
    public boolean isAtomic() {
        return this == ATOMIC_CMP_AND_SWP || this == ATOMIC_FETCH_AND_ADD;
    }

    /** {@return true for opcodes that carry immediate data} */
    public boolean hasImm() {
        return this == SEND_WITH_IMM || this == RDMA_WRITE_WITH_IMM;
    }

    /** {@return true for RDMA READ and atomics, which need responder resources and a response} */
    public boolean isReadOrAtomic() {
        return this == RDMA_READ || isAtomic();
    }
}
