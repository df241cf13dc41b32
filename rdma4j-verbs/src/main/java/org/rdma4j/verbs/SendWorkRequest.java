// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/**
 * A send work request (ibv_send_wr). Mutable and reusable: the provider copies what it needs at
 * post time, so the object may be changed or re-posted as soon as {@code postSend} returns. The
 * data buffers themselves must stay untouched until the request completes, except with
 * {@link SendFlags#INLINE}. Not thread-safe.
 */
public final class SendWorkRequest {
    private long wrId;
    private WrOpcode opcode = WrOpcode.SEND;
    private int sendFlags;
    private int immData;
    private final ScatterGatherEntry[] sgList;
    private int numSge;
    private long remoteAddr;
    private int rkey;
    private long compareAdd;
    private long swap;
    private AddressHandle ah;
    private int remoteQpn;
    private int remoteQkey;
    private Errno postError;
    private String postErrorMessage;

    /** Creates a request with room for 4 scatter/gather entries. */
    public SendWorkRequest() {
        this(4);
    }

    /**
     * Creates a SEND request with no SGEs.
     *
     * @param maxSge how many scatter/gather entries this object can hold
     */
    public SendWorkRequest(int maxSge) {
        if (maxSge < 1) {
            throw new IllegalArgumentException("maxSge=" + maxSge + " (expected >= 1)");
        }
        sgList = new ScatterGatherEntry[maxSge];
        for (int i = 0; i < maxSge; i++) {
            sgList[i] = new ScatterGatherEntry();
        }
    }

    /**
     * Resets every field to its default (SEND, no flags, no SGEs).
     *
     * @return this
     */
    public SendWorkRequest clear() {
        wrId = 0;
        opcode = WrOpcode.SEND;
        sendFlags = 0;
        immData = 0;
        numSge = 0;
        remoteAddr = 0;
        rkey = 0;
        compareAdd = 0;
        swap = 0;
        ah = null;
        remoteQpn = 0;
        remoteQkey = 0;
        postError = null;
        postErrorMessage = null;
        return this;
    }

    /** {@return the user's identifier, returned in the completion} */
    public long wrId() {
        return wrId;
    }

    /**
     * Sets identifier returned in the completion.
     *
     * @param wrId identifier returned in the completion
     * @return this
     */
    public SendWorkRequest wrId(long wrId) {
        this.wrId = wrId;
        return this;
    }

    /** {@return the opcode} */
    public WrOpcode opcode() {
        return opcode;
    }

    /**
     * Sets the operation.
     *
     * @param opcode the operation
     * @return this
     */
    public SendWorkRequest opcode(WrOpcode opcode) {
        this.opcode = opcode;
        return this;
    }

    /** {@return the {@link SendFlags} bit mask} */
    public int sendFlags() {
        return sendFlags;
    }

    /**
     * Sets a {@link SendFlags} bit mask.
     *
     * @param sendFlags a {@link SendFlags} bit mask
     * @return this
     */
    public SendWorkRequest sendFlags(int sendFlags) {
        this.sendFlags = sendFlags;
        return this;
    }

    /** {@return immediate data (the 32 bits sent in network order)} */
    public int immData() {
        return immData;
    }

    /**
     * Sets immediate data for the _WITH_IMM opcodes.
     *
     * @param immData immediate data for the _WITH_IMM opcodes
     * @return this
     */
    public SendWorkRequest immData(int immData) {
        this.immData = immData;
        return this;
    }

    /** {@return the number of scatter/gather entries in use} */
    public int numSge() {
        return numSge;
    }

    /**
     * Sets the number of entries of {@link #sge(int)} in use.
     *
     * @param numSge number of entries of {@link #sge(int)} in use
     * @return this
     */
    public SendWorkRequest numSge(int numSge) {
        if (numSge < 0 || numSge > sgList.length) {
            throw new IllegalArgumentException("numSge=" + numSge + " (expected 0.." + sgList.length + ")");
        }
        this.numSge = numSge;
        return this;
    }

    /** {@return how many entries this object can hold} */
    public int maxSge() {
        return sgList.length;
    }

    /**
     * {@return the i-th scatter/gather entry, to read or fill in}
     *
     * @param i index below {@link #maxSge()}
     */
    public ScatterGatherEntry sge(int i) {
        return sgList[i];
    }

    /**
     * Convenience: one gather entry.
     *
     * @param addr   address
     * @param length length
     * @param lkey   L_Key
     * @return this
     */
    public SendWorkRequest singleSge(long addr, int length, int lkey) {
        sgList[0].set(addr, length, lkey);
        numSge = 1;
        return this;
    }

    /** {@return the remote virtual address for RDMA and atomic operations} */
    public long remoteAddr() {
        return remoteAddr;
    }

    /**
     * Sets remote address.
     *
     * @param remoteAddr remote address
     * @return this
     */
    public SendWorkRequest remoteAddr(long remoteAddr) {
        this.remoteAddr = remoteAddr;
        return this;
    }

    /** {@return the remote R_Key} */
    public int rkey() {
        return rkey;
    }

    /**
     * Sets the remote region's R_Key.
     *
     * @param rkey the remote region's R_Key
     * @return this
     */
    public SendWorkRequest rkey(int rkey) {
        this.rkey = rkey;
        return this;
    }

    /** {@return compare value (CMP_AND_SWP) or addend (FETCH_AND_ADD)} */
    public long compareAdd() {
        return compareAdd;
    }

    /**
     * Sets compare value or addend.
     *
     * @param compareAdd compare value or addend
     * @return this
     */
    public SendWorkRequest compareAdd(long compareAdd) {
        this.compareAdd = compareAdd;
        return this;
    }

    /** {@return swap value (CMP_AND_SWP)} */
    public long swap() {
        return swap;
    }

    /**
     * Sets swap value.
     *
     * @param swap swap value
     * @return this
     */
    public SendWorkRequest swap(long swap) {
        this.swap = swap;
        return this;
    }

    /** {@return the UD address handle} */
    public AddressHandle ah() {
        return ah;
    }

    /**
     * Sets address handle of the UD destination.
     *
     * @param ah address handle of the UD destination
     * @return this
     */
    public SendWorkRequest ah(AddressHandle ah) {
        this.ah = ah;
        return this;
    }

    /** {@return the UD destination QP number} */
    public int remoteQpn() {
        return remoteQpn;
    }

    /**
     * Sets UD destination QP number.
     *
     * @param remoteQpn UD destination QP number
     * @return this
     */
    public SendWorkRequest remoteQpn(int remoteQpn) {
        this.remoteQpn = remoteQpn;
        return this;
    }

    /** {@return the UD destination Q_Key} */
    public int remoteQkey() {
        return remoteQkey;
    }

    /**
     * Sets the UD destination Q_Key. Linux rxe (and the soft device) send it as given, also with bit 31 set; HCAs that implement IBA C10-15 (controlled Q_Keys) send the QP's own Q_Key instead when bit 31 is set, so portable code gives the receiver's Q_Key here.
     *
     * @param remoteQkey UD destination Q_Key. Linux rxe (and the soft device) send it as given, also with bit
     *                   31 set; HCAs that implement IBA C10-15 (controlled Q_Keys) send the QP's own Q_Key
     *                   instead when bit 31 is set, so portable code gives the receiver's Q_Key here
     * @return this
     */
    public SendWorkRequest remoteQkey(int remoteQkey) {
        this.remoteQkey = remoteQkey;
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
        return "send_wr{wr_id=" + wrId + ", opcode=" + opcode + ", flags=0x" + Integer.toHexString(sendFlags)
                + ", num_sge=" + numSge + '}';
    }
}
