// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/**
 * Queue-pair creation attributes (ibv_qp_init_attr). Mutable builder; not thread-safe.
 */
public final class QpInitAttributes {
    /** Creates a {@code QpInitAttributes}. */
    public QpInitAttributes() {
    }

    private QpType type = QpType.RC;
    private CompletionQueue sendCq;
    private CompletionQueue recvCq;
    private SharedReceiveQueue srq;
    private QpCapabilities cap = new QpCapabilities(128, 128, 1, 1, 0);
    private boolean sqSigAll;

    /** {@return QP type} */
    public QpType type() {
        return type;
    }

    /**
     * Sets QP type.
     *
     * @param type QP type
     * @return this
     */
    public QpInitAttributes type(QpType type) {
        this.type = type;
        return this;
    }

    /** {@return send CQ} */
    public CompletionQueue sendCq() {
        return sendCq;
    }

    /**
     * Sets CQ for send completions.
     *
     * @param sendCq CQ for send completions
     * @return this
     */
    public QpInitAttributes sendCq(CompletionQueue sendCq) {
        this.sendCq = sendCq;
        return this;
    }

    /** {@return receive CQ} */
    public CompletionQueue recvCq() {
        return recvCq;
    }

    /**
     * Sets CQ for receive completions.
     *
     * @param recvCq CQ for receive completions
     * @return this
     */
    public QpInitAttributes recvCq(CompletionQueue recvCq) {
        this.recvCq = recvCq;
        return this;
    }

    /** {@return the SRQ, or null} */
    public SharedReceiveQueue srq() {
        return srq;
    }

    /**
     * Sets the shared receive queue (RC and UD only), or null.
     *
     * @param srq a shared receive queue (RC and UD only), or null
     * @return this
     */
    public QpInitAttributes srq(SharedReceiveQueue srq) {
        this.srq = srq;
        return this;
    }

    /** {@return requested capabilities} */
    public QpCapabilities cap() {
        return cap;
    }

    /**
     * Sets the requested capabilities.
     *
     * @param cap requested capabilities
     * @return this
     */
    public QpInitAttributes cap(QpCapabilities cap) {
        this.cap = cap;
        return this;
    }

    /** {@return whether every send request completes} */
    public boolean sqSigAll() {
        return sqSigAll;
    }

    /**
     * Sets whether every send request generates a completion.
     *
     * @param sqSigAll every send request generates a completion
     * @return this
     */
    public QpInitAttributes sqSigAll(boolean sqSigAll) {
        this.sqSigAll = sqSigAll;
        return this;
    }
}
