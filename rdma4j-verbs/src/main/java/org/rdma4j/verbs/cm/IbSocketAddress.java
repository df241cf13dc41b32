// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.cm;

import java.io.Serial;
import java.net.InetAddress;
import java.net.SocketAddress;

import org.rdma4j.verbs.Gid;

/**
 * An IB address ({@code struct sockaddr_ib}, AF_IB): a GID and an IB service ID instead of an IP address
 * and a port. A CM ID of {@link PortSpace#IB} bound or connected with one uses the service ID as it is on
 * the wire and sends no rdma_cm header, so the whole REQ private data (92 bytes) is the application's:
 * what a ULP that speaks the IB CM directly needs, such as IPoIB connected mode (RFC 4755, service ID
 * {@code 0x1000000000000000 | QPN}). On RoCE the GID is an IP address ({@link #inetAddress()}), which
 * decides the device as for IP addresses.
 */
public final class IbSocketAddress extends SocketAddress {
    @Serial
    private static final long serialVersionUID = 1L;

    /** The default P_Key. */
    public static final int DEFAULT_PKEY = 0xFFFF;

    /** The GID's upper half. */
    private final long gidHi;
    /** The GID's lower half. */
    private final long gidLo;
    /** The service ID. */
    private final long serviceId;
    /** The P_Key. */
    private final int pkey;

    /**
     * An address with the default P_Key.
     *
     * @param gid       the GID; {@link Gid#ZERO} is the wildcard (bind on every device)
     * @param serviceId the IB service ID (0 on bind: the provider picks one in the IB port space)
     */
    public IbSocketAddress(Gid gid, long serviceId) {
        this(gid, serviceId, DEFAULT_PKEY);
    }

    /**
     * An address.
     *
     * @param gid       the GID; {@link Gid#ZERO} is the wildcard
     * @param serviceId the IB service ID
     * @param pkey      the P_Key (0xFFFF on RoCE)
     */
    public IbSocketAddress(Gid gid, long serviceId, int pkey) {
        this.gidHi = gid.hi();
        this.gidLo = gid.lo();
        this.serviceId = serviceId;
        this.pkey = pkey & 0xFFFF;
    }

    /** {@return the GID} */
    public Gid gid() {
        return new Gid(gidHi, gidLo);
    }

    /** {@return the service ID} */
    public long serviceId() {
        return serviceId;
    }

    /** {@return the P_Key} */
    public int pkey() {
        return pkey;
    }

    /** {@return whether this is the wildcard GID} */
    public boolean isWildcard() {
        return gidHi == 0 && gidLo == 0;
    }

    /** {@return the GID as the IP address it stands for on RoCE (null for the wildcard)} */
    public InetAddress inetAddress() {
        return isWildcard() ? null : gid().toInetAddress();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof IbSocketAddress a && a.gidHi == gidHi && a.gidLo == gidLo && a.serviceId == serviceId
                && a.pkey == pkey;
    }

    @Override
    public int hashCode() {
        return Long.hashCode(gidHi * 31 + gidLo) * 31 + Long.hashCode(serviceId);
    }

    @Override
    public String toString() {
        return "ib:" + gid() + "/0x" + Long.toHexString(serviceId) + (pkey != DEFAULT_PKEY ? "/pkey 0x" + Integer.toHexString(pkey) : "");
    }
}
