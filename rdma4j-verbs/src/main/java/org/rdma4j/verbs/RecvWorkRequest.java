// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/**
 * A receive work request (ibv_recv_wr). Mutable and reusable: the provider copies it at post time.
 * Not thread-safe.
 */
public final class RecvWorkRequest {
    private long wrId;
    private final ScatterGatherEntry[] sgList;
    private int numSge;
    private Errno postError;
    private String postErrorMessage;

    /** Creates a request with room for 4 scatter entries. */
    public RecvWorkRequest() {
        this(4);
    }

    /**
     * Creates an empty request.
     *
     * @param maxSge how many scatter entries this object can hold
     */
    public RecvWorkRequest(int maxSge) {
        if (maxSge < 1) {
            throw new IllegalArgumentException("maxSge=" + maxSge + " (expected >= 1)");
        }
        sgList = new ScatterGatherEntry[maxSge];
        for (int i = 0; i < maxSge; i++) {
            sgList[i] = new ScatterGatherEntry();
        }
    }

    /** {@return the user's identifier} */
    public long wrId() {
        return wrId;
    }

    /**
     * Sets identifier returned in the completion.
     *
     * @param wrId identifier returned in the completion
     * @return this
     */
    public RecvWorkRequest wrId(long wrId) {
        this.wrId = wrId;
        return this;
    }

    /** {@return entries in use} */
    public int numSge() {
        return numSge;
    }

    /**
     * Sets entries in use.
     *
     * @param numSge entries in use
     * @return this
     */
    public RecvWorkRequest numSge(int numSge) {
        if (numSge < 0 || numSge > sgList.length) {
            throw new IllegalArgumentException("numSge=" + numSge + " (expected 0.." + sgList.length + ")");
        }
        this.numSge = numSge;
        return this;
    }

    /** {@return capacity} */
    public int maxSge() {
        return sgList.length;
    }

    /**
     * {@return the i-th scatter entry}
     *
     * @param i index
     */
    public ScatterGatherEntry sge(int i) {
        return sgList[i];
    }

    /**
     * {@return this, with one scatter entry}
     *
     * @param addr   address
     * @param length length
     * @param lkey   L_Key
     */
    public RecvWorkRequest singleSge(long addr, int length, int lkey) {
        sgList[0].set(addr, length, lkey);
        numSge = 1;
        return this;
    }

    /** {@return why the last post of this request was refused, or null if it was accepted} */
    public Errno postError() {
        return postError;
    }

    /**
     * {@return what was wrong with the last refused post and what to do about it (for example "QP 0x11 is in
     * RESET: ..."), or null if it was accepted; the errno alone when the provider gave no sentence}
     *
     */
    public String postErrorMessage() {
        return postError == null ? null : postErrorMessage != null ? postErrorMessage : postError.name();
    }

    /**
     * Set by providers when they refuse this request at post time, without a sentence.
     *
     * @param postError the reason, or null
     */
    public void postError(Errno postError) {
        postError(postError, null);
    }

    /**
     * Set by providers when they refuse this request at post time.
     *
     * @param postError the reason, or null when the request was accepted
     * @param message   what was wrong and what to do, or null
     */
    public void postError(Errno postError, String message) {
        this.postError = postError;
        this.postErrorMessage = message;
    }

    @Override
    public String toString() {
        return "recv_wr{wr_id=" + wrId + ", num_sge=" + numSge + '}';
    }
}
