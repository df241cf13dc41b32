// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.List;

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

    /** Validates the configuration. */
    public RoceConfig {
        addresses = List.copyOf(addresses);
        if (addresses.isEmpty()) {
            throw new VerbsException(Errno.EINVAL, "a RoCE device needs at least one IP address");
        }
        int v4 = 0;
        int v6 = 0;
        for (InetAddress a : addresses) {
            if (a.isAnyLocalAddress()) {
                throw new VerbsException(Errno.EINVAL, "bind a RoCE device to a specific address, not " + a.getHostAddress()
                        + ": the ICRC covers the destination address, which a wildcard socket cannot tell");
            }
            if (a instanceof java.net.Inet4Address) {
                v4++;
            } else {
                v6++;
            }
        }
        if (v4 > 1 || v6 > 1) {
            throw new VerbsException(Errno.EINVAL, "at most one IPv4 and one IPv6 address per RoCE device: " + addresses);
        }
        if (udpPort < 1 || udpPort > 0xFFFF) {
            throw new VerbsException(Errno.EINVAL, "UDP port " + udpPort + " (expected 1..65535)");
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
        String s = spec.trim();
        int port = Roce.UDP_PORT;
        int at = s.lastIndexOf('@');
        if (at >= 0) {
            try {
                port = Integer.parseInt(s.substring(at + 1).trim());
            } catch (NumberFormatException e) {
                throw new VerbsException(Errno.EINVAL, "bad UDP port in '" + spec + "'");
            }
            s = s.substring(0, at);
        }
        List<InetAddress> list = new ArrayList<>();
        for (String part : s.split(",")) {
            String p = part.trim();
            if (p.isEmpty()) {
                continue;
            }
            if (!p.matches("[0-9A-Fa-f:.%a-z]+")) {
                throw new VerbsException(Errno.EINVAL, "'" + p + "' is not an IP address (in '" + spec + "')");
            }
            try {
                list.add(InetAddress.getByName(p)); // a literal: no name lookup
            } catch (UnknownHostException e) {
                throw new VerbsException(Errno.EINVAL, "'" + p + "' is not an IP address (in '" + spec + "')");
            }
        }
        return new RoceConfig(list, port, null);
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
