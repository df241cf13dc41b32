// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit;

import java.util.EnumSet;
import java.util.Set;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.SharedReceiveQueue;

/**
 * Parameters of one side of a {@link Players} pair: the QP type, its capabilities and every
 * attribute the RESET→INIT→RTR→RTS path sets. Defaults follow ibv_rc_pingpong and perftest
 * (roce-wire.md 4.5): timeout 14, retry_cnt 7, rnr_retry 7, min_rnr_timer 12, except that
 * access flags allow everything and max_rd_atomic is 4. Mutable builder; not thread-safe.
 */
public final class QpConfig {
    /** Creates a {@code QpConfig}. */
    public QpConfig() {
    }

    /** The Q_Key UD pairs use by default (ibv_ud_pingpong's). */
    public static final int DEFAULT_QKEY = 0x11111111;

    private QpType type = QpType.RC;
    private int timeout = 14;
    private int retryCnt = 7;
    private int rnrRetry = 7;
    private int minRnrTimer = 12;
    private Set<AccessFlag> accessFlags = EnumSet.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE,
            AccessFlag.REMOTE_READ, AccessFlag.REMOTE_ATOMIC);
    private int maxRdAtomic = 4;
    private int maxDestRdAtomic = 4;
    private int sendCqSize = 64;
    private int recvCqSize = 64;
    private int maxSendWr = 64;
    private int maxRecvWr = 64;
    private int maxSendSge = 4;
    private int maxRecvSge = 4;
    private int maxInlineData = 64;
    private boolean sqSigAll;
    private boolean createSrq;
    private int srqMaxWr = 64;
    private SharedReceiveQueue srq;
    private ProtectionDomain pd;
    private boolean recvChannel;
    private boolean sendChannel;
    private Mtu pathMtu = Mtu.MTU_1024;
    private int qkey = DEFAULT_QKEY;
    private int sqPsn = 0x00_1000;

    /** {@return a config with the defaults} */
    public static QpConfig rc() {
        return new QpConfig();
    }

    /** {@return a UC config with the defaults} */
    public static QpConfig uc() {
        return new QpConfig().type(QpType.UC);
    }

    /** {@return a UD config with the defaults} */
    public static QpConfig ud() {
        return new QpConfig().type(QpType.UD);
    }

    /** {@return a copy} */
    public QpConfig copy() {
        QpConfig c = new QpConfig();
        c.type = type;
        c.timeout = timeout;
        c.retryCnt = retryCnt;
        c.rnrRetry = rnrRetry;
        c.minRnrTimer = minRnrTimer;
        c.accessFlags = accessFlags.isEmpty() ? EnumSet.noneOf(AccessFlag.class) : EnumSet.copyOf(accessFlags);
        c.maxRdAtomic = maxRdAtomic;
        c.maxDestRdAtomic = maxDestRdAtomic;
        c.sendCqSize = sendCqSize;
        c.recvCqSize = recvCqSize;
        c.maxSendWr = maxSendWr;
        c.maxRecvWr = maxRecvWr;
        c.maxSendSge = maxSendSge;
        c.maxRecvSge = maxRecvSge;
        c.maxInlineData = maxInlineData;
        c.sqSigAll = sqSigAll;
        c.createSrq = createSrq;
        c.srqMaxWr = srqMaxWr;
        c.srq = srq;
        c.pd = pd;
        c.recvChannel = recvChannel;
        c.sendChannel = sendChannel;
        c.pathMtu = pathMtu;
        c.qkey = qkey;
        c.sqPsn = sqPsn;
        return c;
    }

    /** {@return QP type} */
    public QpType type() {
        return type;
    }

    /**
     * Sets QP type.
     *
     * @param v QP type
     * @return this
     */
    public QpConfig type(QpType v) {
        type = v;
        return this;
    }

    /** {@return local ACK timeout exponent (RC)} */
    public int timeout() {
        return timeout;
    }

    /**
     * Sets local ACK timeout exponent: 4.096 µs · 2^v.
     *
     * @param v local ACK timeout exponent: 4.096 µs · 2^v
     * @return this
     */
    public QpConfig timeout(int v) {
        timeout = v;
        return this;
    }

    /** {@return transport retry count (RC)} */
    public int retryCnt() {
        return retryCnt;
    }

    /**
     * Sets transport retry count 0..7.
     *
     * @param v transport retry count 0..7
     * @return this
     */
    public QpConfig retryCnt(int v) {
        retryCnt = v;
        return this;
    }

    /** {@return RNR retry count (RC)} */
    public int rnrRetry() {
        return rnrRetry;
    }

    /**
     * Sets RNR retry count 0..7, 7 = infinite.
     *
     * @param v RNR retry count 0..7, 7 = infinite
     * @return this
     */
    public QpConfig rnrRetry(int v) {
        rnrRetry = v;
        return this;
    }

    /** {@return minimum RNR NAK timer code (RC responder)} */
    public int minRnrTimer() {
        return minRnrTimer;
    }

    /**
     * Sets minimum RNR NAK timer code 1..31 (IBA table 45).
     *
     * @param v minimum RNR NAK timer code 1..31 (IBA table 45)
     * @return this
     */
    public QpConfig minRnrTimer(int v) {
        minRnrTimer = v;
        return this;
    }

    /** {@return QP access flags set at RESET→INIT (RC/UC)} */
    public Set<AccessFlag> accessFlags() {
        return accessFlags;
    }

    /**
     * Sets QP access flags.
     *
     * @param v QP access flags
     * @return this
     */
    public QpConfig accessFlags(Set<AccessFlag> v) {
        accessFlags = v.isEmpty() ? EnumSet.noneOf(AccessFlag.class) : EnumSet.copyOf(v);
        return this;
    }

    /** {@return outstanding RDMA READ/atomics as initiator (RC)} */
    public int maxRdAtomic() {
        return maxRdAtomic;
    }

    /**
     * Sets outstanding RDMA READ/atomics as initiator.
     *
     * @param v outstanding RDMA READ/atomics as initiator
     * @return this
     */
    public QpConfig maxRdAtomic(int v) {
        maxRdAtomic = v;
        return this;
    }

    /** {@return outstanding RDMA READ/atomics as responder (RC)} */
    public int maxDestRdAtomic() {
        return maxDestRdAtomic;
    }

    /**
     * Sets outstanding RDMA READ/atomics as responder.
     *
     * @param v outstanding RDMA READ/atomics as responder
     * @return this
     */
    public QpConfig maxDestRdAtomic(int v) {
        maxDestRdAtomic = v;
        return this;
    }

    /** {@return send CQ entries} */
    public int sendCqSize() {
        return sendCqSize;
    }

    /**
     * Sets send CQ entries.
     *
     * @param v send CQ entries
     * @return this
     */
    public QpConfig sendCqSize(int v) {
        sendCqSize = v;
        return this;
    }

    /** {@return receive CQ entries} */
    public int recvCqSize() {
        return recvCqSize;
    }

    /**
     * Sets receive CQ entries.
     *
     * @param v receive CQ entries
     * @return this
     */
    public QpConfig recvCqSize(int v) {
        recvCqSize = v;
        return this;
    }

    /** {@return send queue depth} */
    public int maxSendWr() {
        return maxSendWr;
    }

    /**
     * Sets send queue depth.
     *
     * @param v send queue depth
     * @return this
     */
    public QpConfig maxSendWr(int v) {
        maxSendWr = v;
        return this;
    }

    /** {@return receive queue depth} */
    public int maxRecvWr() {
        return maxRecvWr;
    }

    /**
     * Sets receive queue depth.
     *
     * @param v receive queue depth
     * @return this
     */
    public QpConfig maxRecvWr(int v) {
        maxRecvWr = v;
        return this;
    }

    /** {@return gather entries per send} */
    public int maxSendSge() {
        return maxSendSge;
    }

    /**
     * Sets gather entries per send.
     *
     * @param v gather entries per send
     * @return this
     */
    public QpConfig maxSendSge(int v) {
        maxSendSge = v;
        return this;
    }

    /** {@return scatter entries per receive} */
    public int maxRecvSge() {
        return maxRecvSge;
    }

    /**
     * Sets scatter entries per receive.
     *
     * @param v scatter entries per receive
     * @return this
     */
    public QpConfig maxRecvSge(int v) {
        maxRecvSge = v;
        return this;
    }

    /** {@return inline bytes requested} */
    public int maxInlineData() {
        return maxInlineData;
    }

    /**
     * Sets inline bytes requested.
     *
     * @param v inline bytes requested
     * @return this
     */
    public QpConfig maxInlineData(int v) {
        maxInlineData = v;
        return this;
    }

    /** {@return whether every send WR completes} */
    public boolean sqSigAll() {
        return sqSigAll;
    }

    /**
     * Sets every send WR completes.
     *
     * @param v every send WR completes
     * @return this
     */
    public QpConfig sqSigAll(boolean v) {
        sqSigAll = v;
        return this;
    }

    /** {@return whether the endpoint creates its own SRQ for its QP} */
    public boolean createSrq() {
        return createSrq;
    }

    /**
     * Sets create an SRQ of {@link #srqMaxWr()} entries for the QP.
     *
     * @param v create an SRQ of {@link #srqMaxWr()} entries for the QP
     * @return this
     */
    public QpConfig createSrq(boolean v) {
        createSrq = v;
        return this;
    }

    /** {@return SRQ depth when {@link #createSrq()}} */
    public int srqMaxWr() {
        return srqMaxWr;
    }

    /**
     * Sets SRQ depth.
     *
     * @param v SRQ depth
     * @return this
     */
    public QpConfig srqMaxWr(int v) {
        srqMaxWr = v;
        return this;
    }

    /** {@return an existing SRQ to attach the QP to, or null} */
    public SharedReceiveQueue srq() {
        return srq;
    }

    /**
     * Sets an existing SRQ (its PD is then used for the QP).
     *
     * @param v an existing SRQ (its PD is then used for the QP)
     * @return this
     */
    public QpConfig srq(SharedReceiveQueue v) {
        srq = v;
        return this;
    }

    /** {@return an existing PD to create the QP in, or null for a new one} */
    public ProtectionDomain pd() {
        return pd;
    }

    /**
     * Sets an existing PD.
     *
     * @param v an existing PD
     * @return this
     */
    public QpConfig pd(ProtectionDomain v) {
        pd = v;
        return this;
    }

    /** {@return whether the receive CQ gets a completion channel} */
    public boolean recvChannel() {
        return recvChannel;
    }

    /**
     * Sets give the receive CQ a completion channel.
     *
     * @param v give the receive CQ a completion channel
     * @return this
     */
    public QpConfig recvChannel(boolean v) {
        recvChannel = v;
        return this;
    }

    /** {@return whether the send CQ gets a completion channel} */
    public boolean sendChannel() {
        return sendChannel;
    }

    /**
     * Sets give the send CQ a completion channel.
     *
     * @param v give the send CQ a completion channel
     * @return this
     */
    public QpConfig sendChannel(boolean v) {
        sendChannel = v;
        return this;
    }

    /** {@return path MTU (RC/UC)} */
    public Mtu pathMtu() {
        return pathMtu;
    }

    /**
     * Sets path MTU.
     *
     * @param v path MTU
     * @return this
     */
    public QpConfig pathMtu(Mtu v) {
        pathMtu = v;
        return this;
    }

    /** {@return Q_Key (UD)} */
    public int qkey() {
        return qkey;
    }

    /**
     * Sets Q_Key.
     *
     * @param v Q_Key
     * @return this
     */
    public QpConfig qkey(int v) {
        qkey = v;
        return this;
    }

    /** {@return send PSN of this side (the peer's RQ_PSN)} */
    public int sqPsn() {
        return sqPsn;
    }

    /**
     * Sets send PSN, 24 bits.
     *
     * @param v send PSN, 24 bits
     * @return this
     */
    public QpConfig sqPsn(int v) {
        sqPsn = v & 0xFF_FFFF;
        return this;
    }
}
