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
     * Sets the identifier returned in the completion.
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
     * Sets the entries in use.
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

    /** {@return why the last post of this request was refused, or null} */
    public Errno postError() {
        return postError;
    }

    /**
     * Sets why the request was refused.
     *
     * @param postError set by providers when they refuse the request
     */
    public void postError(Errno postError) {
        this.postError = postError;
    }

    @Override
    public String toString() {
        return "recv_wr{wr_id=" + wrId + ", num_sge=" + numSge + '}';
    }
}
