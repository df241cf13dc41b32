// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.spi;

import java.net.InetAddress;
import java.util.List;

import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.cm.CmAddress;
import org.rdma4j.verbs.cm.PortSpace;

/**
 * A connection manager for some RDMA devices, found with {@link java.util.ServiceLoader} (or given to
 * {@link org.rdma4j.verbs.cm.RdmaCm#of}). The provider-neutral front ({@link org.rdma4j.verbs.cm.RdmaCm},
 * {@link org.rdma4j.verbs.cm.CmEventChannel}, {@link org.rdma4j.verbs.cm.CmId}) chooses the provider of
 * a CM ID by who owns the IP address it binds or resolves to, then forwards every call to that
 * provider's {@link CmIdSpi}. rdma4j-cm implements this over the IB CM on QP1 for devices that give it
 * their GSI ({@link GsiAccess}: the soft device); a provider over librdmacm implements it for kernel
 * devices. Implementations must be thread-safe.
 */
public interface CmProvider {
    /** {@return a short name for messages, e.g. {@code rdma4j-cm} or {@code librdmacm}} */
    String name();

    /**
     * The addresses of this provider's devices, as rdma_cm sees them: every RoCEv2 GID of every active
     * port that is an IP address. Read on every bind and resolve (devices and addresses may change).
     *
     * @return the addresses; empty when the provider serves no device
     */
    List<CmAddress> addresses();

    /**
     * The local address this provider would send from to reach {@code destination}, when neither the
     * application nor the host's routing table chose one of the provider's addresses (rdma_cm's route
     * lookup, for devices the host's routing does not know, such as in-process ones).
     *
     * @param destination the peer's IP address
     * @return one of {@link #addresses()}, or null if this provider does not reach the destination
     */
    default CmAddress sourceFor(InetAddress destination) {
        return null;
    }

    /**
     * Creates a provider-side CM ID ({@code rdma_create_id}), not yet bound.
     *
     * @param sink      where the ID's events go; the front's, valid for the ID's life
     * @param portSpace the port space
     * @param qpType    the QP type its connections use (RC or UC for TCP/IB, UD for UDP/IPOIB/IB)
     * @return the new ID
     */
    CmIdSpi createId(CmEventSink sink, PortSpace portSpace, QpType qpType);
}
