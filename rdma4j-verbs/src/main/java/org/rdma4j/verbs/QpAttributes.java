// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

import java.util.EnumSet;
import java.util.Set;

/**
 * Queue-pair attributes (ibv_qp_attr) with the mask of the ones set: every setter also sets its
 * {@link QpAttrMask} bit, and {@link QueuePair#modify} uses exactly those. Mutable; not thread-safe.
 */
public final class QpAttributes {
    /** Creates a {@code QpAttributes}. */
    public QpAttributes() {
    }

    private int mask;
    private QpState state = QpState.RESET;
    private QpState curState = QpState.RESET;
    private boolean enSqdAsyncNotify;
    private int accessFlags;
    private int pkeyIndex;
    private int port = 1;
    private int qkey;
    private AhAttributes av = new AhAttributes();
    private Mtu pathMtu = Mtu.MTU_1024;
    private int timeout;
    private int retryCnt;
    private int rnrRetry;
    private int rqPsn;
    private int maxRdAtomic;
    private int minRnrTimer;
    private int sqPsn;
    private int maxDestRdAtomic;
    private QpCapabilities cap;
    private int destQpNum;
    private boolean sqDraining;

    /** {@return the {@link QpAttrMask} bits of the attributes set} */
    public int mask() {
        return mask;
    }

    /** {@return the attributes set, as a set} */
    public Set<QpAttrMask> maskSet() {
        EnumSet<QpAttrMask> s = EnumSet.noneOf(QpAttrMask.class);
        for (QpAttrMask m : QpAttrMask.values()) {
            if ((mask & m.bit()) != 0) {
                s.add(m);
            }
        }
        return s;
    }

    /**
     * {@return whether that attribute is set}
     *
     * @param m a mask bit
     */
    public boolean has(QpAttrMask m) {
        return (mask & m.bit()) != 0;
    }

    /**
     * Forgets which attributes were set (values stay).
     *
     * @return this
     */
    public QpAttributes clearMask() {
        mask = 0;
        return this;
    }

    private QpAttributes set(QpAttrMask m) {
        mask |= m.bit();
        return this;
    }

    /** {@return state} */
    public QpState state() {
        return state;
    }

    /**
     * Sets the next state.
     *
     * @param state next state
     * @return this
     */
    public QpAttributes state(QpState state) {
        this.state = state;
        return set(QpAttrMask.STATE);
    }

    /** {@return current state} */
    public QpState curState() {
        return curState;
    }

    /**
     * Sets the state the caller believes the QP is in.
     *
     * @param curState the state the caller believes the QP is in
     * @return this
     */
    public QpAttributes curState(QpState curState) {
        this.curState = curState;
        return set(QpAttrMask.CUR_STATE);
    }

    /** {@return whether the SQD event is enabled} */
    public boolean enSqdAsyncNotify() {
        return enSqdAsyncNotify;
    }

    /**
     * Sets whether to enable the SQ-drained event.
     *
     * @param v enable the SQ-drained event
     * @return this
     */
    public QpAttributes enSqdAsyncNotify(boolean v) {
        this.enSqdAsyncNotify = v;
        return set(QpAttrMask.EN_SQD_ASYNC_NOTIFY);
    }

    /** {@return remote access flags as ibv_access_flags bits} */
    public int accessFlags() {
        return accessFlags;
    }

    /** {@return remote access flags as a set} */
    public EnumSet<AccessFlag> accessFlagSet() {
        return AccessFlag.fromBits(accessFlags);
    }

    /**
     * Sets the remote operations this QP accepts as responder.
     *
     * @param flags remote operations this QP accepts as responder
     * @return this
     */
    public QpAttributes accessFlags(Set<AccessFlag> flags) {
        this.accessFlags = AccessFlag.toBits(flags);
        return set(QpAttrMask.ACCESS_FLAGS);
    }

    /**
     * Sets the remote access flags as ibv_access_flags bits.
     *
     * @param bits remote access flags as ibv_access_flags bits
     * @return this
     */
    public QpAttributes accessFlags(int bits) {
        this.accessFlags = bits;
        return set(QpAttrMask.ACCESS_FLAGS);
    }

    /** {@return P_Key index} */
    public int pkeyIndex() {
        return pkeyIndex;
    }

    /**
     * Sets P_Key index.
     *
     * @param v P_Key index
     * @return this
     */
    public QpAttributes pkeyIndex(int v) {
        this.pkeyIndex = v;
        return set(QpAttrMask.PKEY_INDEX);
    }

    /** {@return port number} */
    public int port() {
        return port;
    }

    /**
     * Sets the port number (1-based).
     *
     * @param v port number (1-based)
     * @return this
     */
    public QpAttributes port(int v) {
        this.port = v;
        return set(QpAttrMask.PORT);
    }

    /** {@return Q_Key} */
    public int qkey() {
        return qkey;
    }

    /**
     * Sets Q_Key.
     *
     * @param v Q_Key
     * @return this
     */
    public QpAttributes qkey(int v) {
        this.qkey = v;
        return set(QpAttrMask.QKEY);
    }

    /** {@return primary address vector} */
    public AhAttributes av() {
        return av;
    }

    /**
     * Sets the primary address vector (copied).
     *
     * @param v primary address vector (copied)
     * @return this
     */
    public QpAttributes av(AhAttributes v) {
        this.av = v.copy();
        return set(QpAttrMask.AV);
    }

    /** {@return path MTU} */
    public Mtu pathMtu() {
        return pathMtu;
    }

    /**
     * Sets the path MTU.
     *
     * @param v path MTU
     * @return this
     */
    public QpAttributes pathMtu(Mtu v) {
        this.pathMtu = v;
        return set(QpAttrMask.PATH_MTU);
    }

    /** {@return local ACK timeout exponent (4.096 µs · 2^timeout; 0 = infinite)} */
    public int timeout() {
        return timeout;
    }

    /**
     * Sets the local ACK timeout exponent 0..31.
     *
     * @param v local ACK timeout exponent 0..31
     * @return this
     */
    public QpAttributes timeout(int v) {
        this.timeout = v;
        return set(QpAttrMask.TIMEOUT);
    }

    /** {@return transport retry count} */
    public int retryCnt() {
        return retryCnt;
    }

    /**
     * Sets the retry count 0..7.
     *
     * @param v retry count 0..7
     * @return this
     */
    public QpAttributes retryCnt(int v) {
        this.retryCnt = v;
        return set(QpAttrMask.RETRY_CNT);
    }

    /** {@return RNR retry count (7 = infinite)} */
    public int rnrRetry() {
        return rnrRetry;
    }

    /**
     * Sets RNR retry count 0..7, 7 = infinite.
     *
     * @param v RNR retry count 0..7, 7 = infinite
     * @return this
     */
    public QpAttributes rnrRetry(int v) {
        this.rnrRetry = v;
        return set(QpAttrMask.RNR_RETRY);
    }

    /** {@return receive PSN} */
    public int rqPsn() {
        return rqPsn;
    }

    /**
     * Sets the receive PSN (24 bits).
     *
     * @param v receive PSN (24 bits)
     * @return this
     */
    public QpAttributes rqPsn(int v) {
        this.rqPsn = v;
        return set(QpAttrMask.RQ_PSN);
    }

    /** {@return outstanding RDMA READ/atomics as initiator} */
    public int maxRdAtomic() {
        return maxRdAtomic;
    }

    /**
     * Sets the outstanding RDMA READ/atomics as initiator.
     *
     * @param v outstanding RDMA READ/atomics as initiator
     * @return this
     */
    public QpAttributes maxRdAtomic(int v) {
        this.maxRdAtomic = v;
        return set(QpAttrMask.MAX_QP_RD_ATOMIC);
    }

    /** {@return minimum RNR NAK timer code (0..31)} */
    public int minRnrTimer() {
        return minRnrTimer;
    }

    /**
     * Sets the minimum RNR NAK timer code 0..31 (IBA table 45).
     *
     * @param v minimum RNR NAK timer code 0..31 (IBA table 45)
     * @return this
     */
    public QpAttributes minRnrTimer(int v) {
        this.minRnrTimer = v;
        return set(QpAttrMask.MIN_RNR_TIMER);
    }

    /** {@return send PSN} */
    public int sqPsn() {
        return sqPsn;
    }

    /**
     * Sets the send PSN (24 bits).
     *
     * @param v send PSN (24 bits)
     * @return this
     */
    public QpAttributes sqPsn(int v) {
        this.sqPsn = v;
        return set(QpAttrMask.SQ_PSN);
    }

    /** {@return outstanding RDMA READ/atomics as responder} */
    public int maxDestRdAtomic() {
        return maxDestRdAtomic;
    }

    /**
     * Sets the outstanding RDMA READ/atomics as responder.
     *
     * @param v outstanding RDMA READ/atomics as responder
     * @return this
     */
    public QpAttributes maxDestRdAtomic(int v) {
        this.maxDestRdAtomic = v;
        return set(QpAttrMask.MAX_DEST_RD_ATOMIC);
    }

    /** {@return capabilities (query only)} */
    public QpCapabilities cap() {
        return cap;
    }

    /**
     * Sets the capabilities.
     *
     * @param v capabilities
     * @return this
     */
    public QpAttributes cap(QpCapabilities v) {
        this.cap = v;
        return set(QpAttrMask.CAP);
    }

    /** {@return destination QP number} */
    public int destQpNum() {
        return destQpNum;
    }

    /**
     * Sets the destination QP number.
     *
     * @param v destination QP number
     * @return this
     */
    public QpAttributes destQpNum(int v) {
        this.destQpNum = v;
        return set(QpAttrMask.DEST_QPN);
    }

    /** {@return whether the send queue is draining (query only)} */
    public boolean sqDraining() {
        return sqDraining;
    }

    /**
     * Sets whether the SQ is draining (a query result).
     *
     * @param v set by providers on query
     */
    public void sqDraining(boolean v) {
        this.sqDraining = v;
    }

    @Override
    public String toString() {
        return "qp_attr{mask=" + QpAttrMask.describe(mask) + ", state=" + state + '}';
    }
}
