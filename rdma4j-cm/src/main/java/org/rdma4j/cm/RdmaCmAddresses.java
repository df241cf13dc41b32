// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import java.net.Inet6Address;
import java.net.InetAddress;
import java.util.Arrays;

/** Address comparison as {@code cma_addr_cmp} does it: by the address bytes, ignoring IPv6 scope IDs. */
final class RdmaCmAddresses {
    private RdmaCmAddresses() {
    }

    static boolean same(InetAddress a, InetAddress b) {
        if (a instanceof Inet6Address x && b instanceof Inet6Address y) {
            return Arrays.equals(x.getAddress(), y.getAddress());
        }
        return a.equals(b);
    }
}
