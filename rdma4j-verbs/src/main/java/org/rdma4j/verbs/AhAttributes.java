// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/**
 * Address-vector attributes (ibv_ah_attr with its GRH): used to create UD address handles and as the
 * primary path of connected QPs. On RoCE every address is global (a GID). Mutable; not thread-safe.
 */
public final class AhAttributes {
    /** Creates an {@code AhAttributes}. */
    public AhAttributes() {
    }

    private Gid dgid = Gid.ZERO;
    private int sgidIndex;
    private int hopLimit = 64;
    private int trafficClass;
    private int flowLabel;
    private int dlid;
    private int sl;
    private int srcPathBits;
    private int portNum = 1;
    private boolean global = true;

    /** {@return destination GID} */
    public Gid dgid() {
        return dgid;
    }

    /**
     * Sets the destination GID.
     *
     * @param dgid destination GID
     * @return this
     */
    public AhAttributes dgid(Gid dgid) {
        this.dgid = dgid;
        return this;
    }

    /** {@return source GID index} */
    public int sgidIndex() {
        return sgidIndex;
    }

    /**
     * Sets the index into the local port's GID table.
     *
     * @param sgidIndex index into the local port's GID table
     * @return this
     */
    public AhAttributes sgidIndex(int sgidIndex) {
        this.sgidIndex = sgidIndex;
        return this;
    }

    /** {@return hop limit} */
    public int hopLimit() {
        return hopLimit;
    }

    /**
     * Sets the hop limit (IP TTL on RoCEv2).
     *
     * @param hopLimit hop limit (IP TTL on RoCEv2)
     * @return this
     */
    public AhAttributes hopLimit(int hopLimit) {
        this.hopLimit = hopLimit;
        return this;
    }

    /** {@return traffic class} */
    public int trafficClass() {
        return trafficClass;
    }

    /**
     * Sets the traffic class.
     *
     * @param trafficClass traffic class
     * @return this
     */
    public AhAttributes trafficClass(int trafficClass) {
        this.trafficClass = trafficClass;
        return this;
    }

    /** {@return flow label} */
    public int flowLabel() {
        return flowLabel;
    }

    /**
     * Sets the flow label.
     *
     * @param flowLabel flow label
     * @return this
     */
    public AhAttributes flowLabel(int flowLabel) {
        this.flowLabel = flowLabel;
        return this;
    }

    /** {@return destination LID (0 on RoCE)} */
    public int dlid() {
        return dlid;
    }

    /**
     * Sets the destination LID.
     *
     * @param dlid destination LID
     * @return this
     */
    public AhAttributes dlid(int dlid) {
        this.dlid = dlid;
        return this;
    }

    /** {@return service level} */
    public int sl() {
        return sl;
    }

    /**
     * Sets the service level.
     *
     * @param sl service level
     * @return this
     */
    public AhAttributes sl(int sl) {
        this.sl = sl;
        return this;
    }

    /** {@return source path bits} */
    public int srcPathBits() {
        return srcPathBits;
    }

    /**
     * Sets the source path bits.
     *
     * @param srcPathBits source path bits
     * @return this
     */
    public AhAttributes srcPathBits(int srcPathBits) {
        this.srcPathBits = srcPathBits;
        return this;
    }

    /** {@return local port number} */
    public int portNum() {
        return portNum;
    }

    /**
     * Sets the local port number (1-based).
     *
     * @param portNum local port number (1-based)
     * @return this
     */
    public AhAttributes portNum(int portNum) {
        this.portNum = portNum;
        return this;
    }

    /** {@return whether a GRH is used (always on RoCE)} */
    public boolean isGlobal() {
        return global;
    }

    /**
     * Sets whether a GRH is used.
     *
     * @param global whether a GRH is used
     * @return this
     */
    public AhAttributes global(boolean global) {
        this.global = global;
        return this;
    }

    /** {@return a copy} */
    public AhAttributes copy() {
        AhAttributes c = new AhAttributes();
        c.dgid = dgid;
        c.sgidIndex = sgidIndex;
        c.hopLimit = hopLimit;
        c.trafficClass = trafficClass;
        c.flowLabel = flowLabel;
        c.dlid = dlid;
        c.sl = sl;
        c.srcPathBits = srcPathBits;
        c.portNum = portNum;
        c.global = global;
        return c;
    }

    @Override
    public String toString() {
        return "ah_attr{dgid=" + dgid + ", sgid_index=" + sgidIndex + ", hop_limit=" + hopLimit + ", port=" + portNum + '}';
    }
}
