// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.util.List;

import org.rdma4j.common.RoceLinks;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.wire.Roce;

/**
 * How a software device speaks RoCEv2: the IP addresses it is bound to (each becomes a GID, as rxe
 * builds its GID table from the netdev's addresses), the UDP port, and the active MTU.
 *
 * @param addresses local IPv4 and/or IPv6 addresses, at most one of each family: GID 0 is the first,
 *                  GID 1 the second
 * @param udpPort   UDP port to bind and to send to: {@link Roce#UDP_PORT} (4791) to talk to rxe; tests may
 *                  use another one on both sides
 * @param activeMtu the port's active MTU, or null to derive it from the interface MTU as rxe_set_mtu does
 *                  (the largest IB MTU not above netdev MTU - 80 bytes of headers)
 */
public record RoceConfig(List<InetAddress> addresses, int udpPort, Mtu activeMtu) {
    /** rxe RXE_MAX_HDR_LENGTH: the headers rxe_set_mtu subtracts from the netdev MTU. */
    static final int MAX_HDR_LENGTH = 80;

    /** Validates the configuration (the rules of every configuration path: {@link RoceLinks#check}). */
    public RoceConfig {
        addresses = List.copyOf(addresses);
        try {
            RoceLinks.check(addresses, udpPort);
        } catch (IllegalArgumentException e) {
            throw new VerbsException(Errno.EINVAL, e.getMessage());
        }
    }

    /**
     * {@return a configuration on port 4791 with the MTU derived from the interfaces}
     *
     * @param addresses local addresses
     */
    public static RoceConfig of(InetAddress... addresses) {
        return new RoceConfig(List.of(addresses), Roce.UDP_PORT, null);
    }

    /**
     * Parses {@code addr[,addr][@port]}, e.g. {@code 127.0.0.1}, {@code 10.99.0.1,fd99::1} or
     * {@code 127.0.0.2@14791}.
     *
     * @param spec the text
     * @return the configuration
     */
    public static RoceConfig parse(String spec) {
        try {
            return of(RoceLinks.parseAddresses(spec, ""));
        } catch (IllegalArgumentException e) {
            throw new VerbsException(Errno.EINVAL, e.getMessage());
        }
    }

    /**
     * {@return a configuration with the MTU derived from the interfaces}
     *
     * @param a addresses and port, as the links file gives them
     */
    public static RoceConfig of(RoceLinks.Addresses a) {
        return new RoceConfig(a.ips(), a.udpPort(), null);
    }

    /** {@return the active MTU: as configured, or derived from the smallest MTU of the bound interfaces} */
    Mtu resolveMtu() {
        if (activeMtu != null) {
            return activeMtu;
        }
        int netdev = Integer.MAX_VALUE;
        for (InetAddress a : addresses) {
            try {
                NetworkInterface ni = NetworkInterface.getByInetAddress(a);
                if (ni == null && a.isLoopbackAddress()) {
                    ni = loopbackInterface(); // 127.0.0.2 and the rest of 127/8 live on lo without being listed
                }
                if (ni != null && ni.getMTU() > 0) {
                    netdev = Math.min(netdev, ni.getMTU());
                }
            } catch (SocketException e) {
                // unknown interface: keep the default below
            }
        }
        if (netdev == Integer.MAX_VALUE) {
            netdev = 1500;
        }
        return ibMtuFor(netdev);
    }

    private static NetworkInterface loopbackInterface() throws SocketException {
        var it = NetworkInterface.networkInterfaces().iterator();
        while (it.hasNext()) {
            NetworkInterface n = it.next();
            if (n.isLoopback()) {
                return n;
            }
        }
        return null;
    }

    /** rxe eth_mtu_int_to_enum + rxe_set_mtu: the largest IB MTU within netdev MTU - 80, clamped to 256..4096. */
    static Mtu ibMtuFor(int netdevMtu) {
        int room = netdevMtu - MAX_HDR_LENGTH;
        Mtu best = Mtu.MTU_256;
        for (Mtu m : Mtu.values()) {
            if (m.bytes() <= room) {
                best = m;
            }
        }
        return best;
    }
}
