// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/** Work-completion opcodes (ibv_wc_opcode). Receive-side opcodes have {@link #isReceive()}. */
public enum WcOpcode {
    /** A SEND or SEND_WITH_IMM completed on the send queue. */
    SEND(0),
    /** An RDMA WRITE (with or without immediate) completed on the send queue. */
    RDMA_WRITE(1),
    /** An RDMA READ completed. */
    RDMA_READ(2),
    /** A compare-and-swap completed. */
    COMP_SWAP(3),
    /** A fetch-and-add completed. */
    FETCH_ADD(4),
    /** A SEND was received. */
    RECV(128),
    /** An RDMA WRITE with immediate consumed a receive request. */
    RECV_RDMA_WITH_IMM(129);

    private final int value;

    WcOpcode(int value) {
        this.value = value;
    }

    /** {@return the ibv_wc_opcode value} */
    public int value() {
        return value;
    }

    /** {@return true for completions of receive work requests ({@code opcode & IBV_WC_RECV})} */
    public boolean isReceive() {
        return (value & 128) != 0;
    }
}
