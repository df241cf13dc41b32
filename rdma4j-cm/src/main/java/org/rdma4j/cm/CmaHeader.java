// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;

/**
 * rdma_cm's 36-byte header at the start of REQ and SIDR_REQ private data ({@code struct cma_hdr},
 * {@code cma_format_hdr}): version 0, the IP version in the high nibble, the active side's source port,
 * then source and destination address, each 16 bytes: an IPv4 address as 12 zero bytes and its 4 bytes
 * (not v4-mapped, unlike a GID), an IPv6 address as it is. The destination port is not here: it is the
 * service ID's low 16 bits.
 *
 * @param version   cma_version (0)
 * @param ipVersion 4 or 6
 * @param srcPort   the active side's port
 * @param src       the active side's address
 * @param dst       the passive side's address
 */
record CmaHeader(int version, int ipVersion, int srcPort, InetAddress src, InetAddress dst) {
    /** {@code sizeof(struct cma_hdr)}. */
    static final int SIZE = 36;
    /** {@code CMA_VERSION}. */
    static final int CMA_VERSION = 0;

    /** {@code cma_format_hdr} for a connection from {@code src} to {@code dst}. */
    static byte[] format(InetSocketAddress src, InetSocketAddress dst, byte[] userData) {
        byte[] pd = new byte[SIZE + (userData == null ? 0 : userData.length)];
        pd[0] = CMA_VERSION;
        boolean v4 = src.getAddress() instanceof Inet4Address;
        pd[1] = (byte) ((v4 ? 4 : 6) << 4);
        Mad.put16(pd, 2, src.getPort());
        putAddr(pd, 4, src.getAddress());
        putAddr(pd, 20, dst.getAddress());
        if (userData != null) {
            System.arraycopy(userData, 0, pd, SIZE, userData.length);
        }
        return pd;
    }

    private static void putAddr(byte[] pd, int off, InetAddress a) {
        byte[] b = a.getAddress();
        System.arraycopy(b, 0, pd, off + 16 - b.length, b.length);
    }

    /**
     * Parses the header at {@code off} of a MAD's private data.
     *
     * @return the header, or null if it is not one rdma_cm accepts (version not 0, IP version not 4 or 6:
     *         cma_save_ip_info and cma_get_net_info fail, and the listener rejects with reason 28)
     */
    static CmaHeader parse(byte[] mad, int off) {
        int version = mad[off] & 0xFF;
        int ipVersion = (mad[off + 1] & 0xFF) >>> 4;
        if (version != CMA_VERSION || (ipVersion != 4 && ipVersion != 6)) {
            return null;
        }
        try {
            InetAddress s;
            InetAddress d;
            if (ipVersion == 4) {
                s = InetAddress.getByAddress(Mad.slice(mad, off + 4 + 12, 4));
                d = InetAddress.getByAddress(Mad.slice(mad, off + 20 + 12, 4));
            } else {
                s = Inet6Address.getByAddress(null, Mad.slice(mad, off + 4, 16), null);
                d = Inet6Address.getByAddress(null, Mad.slice(mad, off + 20, 16), null);
            }
            return new CmaHeader(version, ipVersion, Mad.get16(mad, off + 2), s, d);
        } catch (UnknownHostException e) {
            return null;
        }
    }
}
