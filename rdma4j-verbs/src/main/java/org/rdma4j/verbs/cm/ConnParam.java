// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.cm;

import java.util.Arrays;

import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;

/**
 * Connection parameters ({@code struct rdma_conn_param}): given to {@link CmId#connect} and
 * {@link CmId#accept}, and reported by {@link CmEvent#connParam()} as the peer asked for them.
 * Mutable; not thread-safe; the CM copies it.
 *
 * <p>A new instance is a zeroed C struct, with its C meaning: depth 0 means no RDMA READ or atomic in
 * that direction, retry count 0 means no transport retries. {@link #defaults()} gives what librdmacm
 * uses when the parameter pointer is NULL: the device's maximum depths and 7 retries of each kind.
 * {@link #MAX_DEPTH} (0xFF, {@code RDMA_MAX_RESP_RES} / {@code RDMA_MAX_INIT_DEPTH}) asks for the device
 * maximum on connect, and for the lesser of the request's value and the device maximum on accept.
 *
 * <p>On the wire (cm.md 4.5): responder resources and initiator depth go into the REQ and REP as they
 * are; the passive side sees them swapped to its own point of view (its responder resources are the
 * active side's initiator depth); retry counts are capped at 7.
 */
public final class ConnParam {
    /** RDMA_MAX_RESP_RES / RDMA_MAX_INIT_DEPTH: "as many as the device allows". */
    public static final int MAX_DEPTH = 0xFF;
    /** User private data of a REQ in the TCP/IB port spaces: 92 minus the 36-byte cma header. */
    public static final int MAX_CONNECT_PRIVATE_DATA = 56;
    /** User private data of a REQ between IB addresses ({@link IbSocketAddress}: no rdma_cm header). */
    public static final int MAX_IB_CONNECT_PRIVATE_DATA = 92;
    /** User private data of a SIDR_REQ between IB addresses. */
    public static final int MAX_IB_UD_CONNECT_PRIVATE_DATA = 216;
    /** User private data of a REP. */
    public static final int MAX_ACCEPT_PRIVATE_DATA = 196;
    /** User private data of a REJ. */
    public static final int MAX_REJECT_PRIVATE_DATA = 148;
    /** User private data of a SIDR_REQ (UD connect): 216 minus the 36-byte cma header. */
    public static final int MAX_UD_CONNECT_PRIVATE_DATA = 180;
    /** User private data of a SIDR_REP (UD accept). */
    public static final int MAX_UD_ACCEPT_PRIVATE_DATA = 136;

    private static final byte[] NONE = new byte[0];

    private byte[] privateData = NONE;
    private int responderResources;
    private int initiatorDepth;
    private boolean flowControl;
    private int retryCount;
    private int rnrRetryCount;
    private boolean srq;
    private int qpNum;

    /** A zeroed parameter set (see the class comment). */
    public ConnParam() {
    }

    /**
     * The parameters librdmacm uses when given none.
     *
     * @return what librdmacm uses for a NULL parameter: {@link #MAX_DEPTH} both ways, retry count 7,
     *         RNR retry count 7 (infinite), no flow control, no private data
     */
    public static ConnParam defaults() {
        return new ConnParam().responderResources(MAX_DEPTH).initiatorDepth(MAX_DEPTH).retryCount(7).rnrRetryCount(7);
    }

    /** {@return a copy of the private data (empty when none)} */
    public byte[] privateData() {
        return privateData.clone();
    }

    /** {@return the private data length} */
    public int privateDataLength() {
        return privateData.length;
    }

    /**
     * Sets the private data.
     *
     * @param data bytes to send with the REQ/REP (copied); null for none. The limits are the constants of
     *             this class: the CM fails the call with EINVAL for longer data
     * @return this
     */
    public ConnParam privateData(byte[] data) {
        if (data != null && data.length > 255) {
            throw new VerbsException(Errno.EINVAL, "private data of " + data.length + " bytes: rdma_conn_param"
                    + " carries at most 255 (and a REQ at most " + MAX_CONNECT_PRIVATE_DATA + ")");
        }
        this.privateData = data == null ? NONE : data.clone();
        return this;
    }

    /** {@return RDMA READ / atomic requests this side accepts from the peer at once} */
    public int responderResources() {
        return responderResources;
    }

    /**
     * Sets the responder resources.
     *
     * @param v 0..255 ({@link #MAX_DEPTH}: device maximum)
     * @return this
     */
    public ConnParam responderResources(int v) {
        this.responderResources = check("responder_resources", v, 255);
        return this;
    }

    /** {@return RDMA READ / atomic requests this side sends to the peer at once} */
    public int initiatorDepth() {
        return initiatorDepth;
    }

    /**
     * Sets the initiator depth.
     *
     * @param v 0..255 ({@link #MAX_DEPTH}: device maximum)
     * @return this
     */
    public ConnParam initiatorDepth(int v) {
        this.initiatorDepth = check("initiator_depth", v, 255);
        return this;
    }

    /** {@return whether end-to-end flow control is advertised} */
    public boolean flowControl() {
        return flowControl;
    }

    /**
     * Sets end-to-end flow control.
     *
     * @param v advertise end-to-end credits (rsockets sets it)
     * @return this
     */
    public ConnParam flowControl(boolean v) {
        this.flowControl = v;
        return this;
    }

    /** {@return transport retries (REQ RetryCount, governs both sides)} */
    public int retryCount() {
        return retryCount;
    }

    /**
     * Sets the retry count.
     *
     * @param v 0..7 (larger values are sent as 7, as Linux does)
     * @return this
     */
    public ConnParam retryCount(int v) {
        this.retryCount = check("retry_count", v, 255);
        return this;
    }

    /** {@return RNR retries the peer may make towards this side (7 = infinite)} */
    public int rnrRetryCount() {
        return rnrRetryCount;
    }

    /**
     * Sets the RNR retry count.
     *
     * @param v 0..7, 7 = infinite (larger values are sent as 7)
     * @return this
     */
    public ConnParam rnrRetryCount(int v) {
        this.rnrRetryCount = check("rnr_retry_count", v, 255);
        return this;
    }

    /** {@return whether the QP uses a shared receive queue (set by the CM from the ID's QP)} */
    public boolean srq() {
        return srq;
    }

    /**
     * Sets the SRQ flag.
     *
     * @param v whether the QP uses an SRQ; only for IDs without a QP of their own
     * @return this
     */
    public ConnParam srq(boolean v) {
        this.srq = v;
        return this;
    }

    /** {@return the QP number advertised: the ID's QP's, or the one given for an ID without a QP} */
    public int qpNum() {
        return qpNum;
    }

    /**
     * Sets the QP number.
     *
     * @param v a QP number (24 bits); only for IDs without a QP of their own
     * @return this
     */
    public ConnParam qpNum(int v) {
        if ((v & ~0xFF_FFFF) != 0) {
            throw new VerbsException(Errno.EINVAL, "qp_num 0x" + Integer.toHexString(v) + " is wider than 24 bits");
        }
        this.qpNum = v;
        return this;
    }

    /** {@return a copy} */
    public ConnParam copy() {
        ConnParam c = new ConnParam();
        c.privateData = privateData;
        c.responderResources = responderResources;
        c.initiatorDepth = initiatorDepth;
        c.flowControl = flowControl;
        c.retryCount = retryCount;
        c.rnrRetryCount = rnrRetryCount;
        c.srq = srq;
        c.qpNum = qpNum;
        return c;
    }

    private static int check(String what, int v, int max) {
        if (v < 0 || v > max) {
            throw new VerbsException(Errno.EINVAL, what + "=" + v + " (expected 0.." + max + ")");
        }
        return v;
    }

    @Override
    public String toString() {
        return "conn_param{resp_res=" + responderResources + ", init_depth=" + initiatorDepth + ", flow_ctrl="
                + (flowControl ? 1 : 0) + ", retry=" + retryCount + ", rnr_retry=" + rnrRetryCount + ", srq="
                + (srq ? 1 : 0) + ", qp_num=0x" + Integer.toHexString(qpNum) + ", private_data_len="
                + privateData.length + (privateData.length > 0 ? " " + hex(privateData) : "") + '}';
    }

    private static String hex(byte[] b) {
        int n = Math.min(b.length, 16);
        StringBuilder sb = new StringBuilder(n * 2 + 3);
        for (byte x : Arrays.copyOf(b, n)) {
            sb.append(Character.forDigit((x >> 4) & 0xF, 16)).append(Character.forDigit(x & 0xF, 16));
        }
        return b.length > n ? sb.append("...").toString() : sb.toString();
    }
}
