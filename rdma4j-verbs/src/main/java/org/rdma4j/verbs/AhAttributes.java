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

    /**
     * The address vector that answers the sender of a UD receive ({@code ibv_init_ah_from_wc}; with
     * {@link ProtectionDomain#createAh} it is {@code ibv_create_ah_from_wc}). Without {@link WcFlags#GRH}
     * the vector is local (LID only). With it, the 40-byte GRH area at the start of the receive buffer is
     * read as rdma-core does for RoCEv2 ({@code get_grh_header_version}): an IPv6 header, or 20 bytes
     * and an IPv4 header (chosen by the IPv6 version nibble, and by a valid IPv4 header checksum when the
     * nibble is 6 and the second half has an IPv4 IHL of 5). The destination GID is the packet's source
     * (an IPv4 source v4-mapped), the source GID index the port's entry equal to the packet's
     * destination, the hop limit, traffic class and flow label the packet's.
     *
     * @param ctx  the context of the receiving QP's device
     * @param port its port
     * @param wc   the receive completion
     * @param grh  the receive buffer's first 40 bytes (or more)
     * @return the attributes
     * @throws VerbsException EINVAL for a multicast destination or a GRH area shorter than 40 bytes;
     *                        EPROTONOSUPPORT-like EINVAL for a header that is neither IPv4 nor IPv6;
     *                        ENOENT when no GID of the port equals the packet's destination
     */
    public static AhAttributes fromWc(Context ctx, int port, WorkCompletion wc, java.lang.foreign.MemorySegment grh) {
        AhAttributes a = new AhAttributes().dlid(wc.slid()).sl(wc.sl()).srcPathBits(wc.dlidPathBits()).portNum(port);
        if ((wc.wcFlags() & WcFlags.GRH) == 0) {
            return a.global(false).hopLimit(0);
        }
        if (grh.byteSize() < 40) {
            throw new VerbsException(Errno.EINVAL, "ibv_init_ah_from_wc: the GRH area has " + grh.byteSize()
                    + " bytes; a UD receive buffer starts with 40");
        }
        byte[] g = grh.asSlice(0, 40).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
        int vtf = be32(g, 0);
        a.flowLabel(vtf & 0xF_FFFF);
        boolean v4;
        if (((vtf >>> 28) & 0xF) != 6) {
            if ((g[20] & 0xF0) != 0x40) {
                throw new VerbsException(Errno.EINVAL, "ibv_init_ah_from_wc: the GRH area holds neither an IPv6 nor an"
                        + " IPv4 header (EPROTONOSUPPORT)");
            }
            v4 = true;
        } else {
            v4 = (g[20] & 0x0F) == 5 && ipv4ChecksumOk(g);
        }
        Gid local;
        if (v4) {
            int daddr = be32(g, 36);
            if ((daddr & 0xF000_0000) == 0xE000_0000) {
                throw new VerbsException(Errno.EINVAL, "ibv_init_ah_from_wc: the packet went to a multicast group");
            }
            local = new Gid(0, 0x0000_FFFF_0000_0000L | (daddr & 0xFFFF_FFFFL));
            a.dgid(new Gid(0, 0x0000_FFFF_0000_0000L | (be32(g, 32) & 0xFFFF_FFFFL)));
            a.hopLimit(g[28] & 0xFF).trafficClass(g[21] & 0xFF);
        } else {
            if ((g[24] & 0xFF) == 0xFF) {
                throw new VerbsException(Errno.EINVAL, "ibv_init_ah_from_wc: the packet went to a multicast group");
            }
            local = Gid.of(java.util.Arrays.copyOfRange(g, 24, 40));
            a.dgid(Gid.of(java.util.Arrays.copyOfRange(g, 8, 24)));
            a.hopLimit(g[7] & 0xFF).trafficClass((vtf >>> 20) & 0xFF);
        }
        int n = ctx.queryPort(port).gidTblLen();
        for (int i = 0; i < n; i++) {
            Gid e;
            try {
                e = ctx.queryGid(port, i);
            } catch (VerbsException ex) {
                break;
            }
            if (e.equals(local)) {
                return a.global(true).sgidIndex(i);
            }
        }
        throw new VerbsException(Errno.ENOENT, "ibv_init_ah_from_wc: no GID of port " + port + " of "
                + ctx.device().name() + " is " + local + ", the address the packet was sent to");
    }

    private static int be32(byte[] b, int off) {
        return (b[off] & 0xFF) << 24 | (b[off + 1] & 0xFF) << 16 | (b[off + 2] & 0xFF) << 8 | (b[off + 3] & 0xFF);
    }

    /** The IPv4 header in the GRH area's second half has a valid header checksum (rdma-core's tie-break). */
    private static boolean ipv4ChecksumOk(byte[] g) {
        int sum = 0;
        for (int i = 20; i < 40; i += 2) {
            sum += (g[i] & 0xFF) << 8 | (g[i + 1] & 0xFF);
        }
        while ((sum >>> 16) != 0) {
            sum = (sum & 0xFFFF) + (sum >>> 16);
        }
        return sum == 0xFFFF;
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
