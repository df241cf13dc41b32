// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.cm;

import java.net.InetAddress;

import org.rdma4j.verbs.Device;

/**
 * A local IP address an RDMA device owns: on RoCE every RoCEv2 GID of a port is an IP address of its
 * interface ({@code ::ffff:a.b.c.d} for IPv4), and rdma_cm picks the device of a CM ID by the address
 * it binds or resolves to ({@code cma_acquire_dev_by_src_ip}).
 *
 * @param address  the IP address
 * @param device   the device that owns it
 * @param port     the port (1-based)
 * @param gidIndex the index of the address's GID in the port's GID table
 */
public record CmAddress(InetAddress address, Device device, int port, int gidIndex) {
    @Override
    public String toString() {
        return address.getHostAddress() + " (" + device.name() + " port " + port + " gid " + gidIndex + ")";
    }
}
