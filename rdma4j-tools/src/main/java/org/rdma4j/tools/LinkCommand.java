// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;

import org.rdma4j.common.RoceLinks;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.PortAttributes;
import org.rdma4j.verbs.Verbs;
import org.rdma4j.verbs.VerbsException;

/**
 * {@code rdma4j link}: configures RoCEv2 devices without code, as iproute2's {@code rdma link} does for
 * rdma_rxe. The configuration is the links file ({@code $RDMA4J_LINKS}, else
 * {@code ~/.config/rdma4j/links}; the format is {@link RoceLinks}'s), which the soft provider reads when a
 * process starts (environment variable {@code RDMA4J_DEVICES} adds entries for one run). Every process
 * lists every configured device and binds one only when it creates a QP on it, so two processes can use
 * two devices of one file. Usage:
 * <pre>
 *   rdma4j link add rxe0 [type rxe] addr 10.99.0.1 [addr fd99::1] [port 4791]
 *   rdma4j link delete rxe0
 *   rdma4j link [show]
 * </pre>
 */
final class LinkCommand {
    private LinkCommand() {
    }

    static int main(String[] args, PrintStream out, PrintStream err) {
        String sub = args.length == 0 ? "show" : args[0];
        try {
            return switch (sub) {
                case "add" -> add(args, out, err);
                case "delete", "del" -> delete(args, out, err);
                case "show", "list" -> show(out);
                case "help", "-h", "--help" -> {
                    usage(out);
                    yield 0;
                }
                default -> {
                    err.println("rdma4j link: unknown command '" + sub + "'");
                    usage(err);
                    yield 1;
                }
            };
        } catch (IOException e) {
            err.println("rdma4j link: " + RoceLinks.file() + ": " + e.getMessage());
            return 1;
        }
    }

    private static void usage(PrintStream s) {
        s.println("Usage: rdma4j link add NAME [type rxe] addr ADDRESS [addr ADDRESS] [port PORT]");
        s.println("       rdma4j link delete NAME");
        s.println("       rdma4j link [show]");
        s.println("A RoCEv2 device is bound to at most one IPv4 and one IPv6 address of this host (its GIDs) and UDP"
                + " port " + RoceLinks.DEFAULT_UDP_PORT + ",");
        s.println("by the one process that creates a QP on it; every process lists it.");
        s.println("Links file: " + RoceLinks.file() + " (" + RoceLinks.FILE_ENV + " overrides; " + RoceLinks.DEVICES_ENV
                + "='rxe0=ADDR;...' adds for one run)");
    }

    private static int add(String[] args, PrintStream out, PrintStream err) throws IOException {
        if (args.length < 2) {
            usage(err);
            return 1;
        }
        String name = args[1];
        List<InetAddress> addrs = new ArrayList<>();
        int port = RoceLinks.DEFAULT_UDP_PORT;
        try {
            RoceLinks.checkName(name, "");
            for (int i = 2; i < args.length; i++) {
                String k = args[i];
                if (i + 1 >= args.length) {
                    err.println("rdma4j link: '" + k + "' needs a value");
                    return 1;
                }
                String v = args[++i];
                switch (k) {
                    case "type" -> {
                        if (!v.equals("rxe")) {
                            err.println("rdma4j link: type " + v + " is not supported (rxe: RoCEv2 on UDP)");
                            return 1;
                        }
                    }
                    case "addr", "address" -> addrs.add(RoceLinks.parseAddress(v, ""));
                    case "port" -> {
                        try {
                            port = Integer.parseInt(v);
                        } catch (NumberFormatException e) {
                            err.println("rdma4j link: bad port '" + v + "'");
                            return 1;
                        }
                    }
                    case "netdev" -> {
                        err.println("rdma4j link: give the device's addresses with 'addr' (a Java process binds "
                                + "addresses, not interfaces): rdma4j link add " + name + " addr <address of " + v
                                + ">. Local addresses: " + String.join(", ", RoceLinks.localAddresses()));
                        return 1;
                    }
                    default -> {
                        err.println("rdma4j link: unknown option '" + k + "'");
                        return 1;
                    }
                }
            }
            if (addrs.isEmpty()) {
                err.println("rdma4j link: add " + name + " needs 'addr ADDRESS'. Local addresses: "
                        + String.join(", ", RoceLinks.localAddresses()));
                return 1;
            }
            RoceLinks.Entry entry = new RoceLinks.Entry(name, new RoceLinks.Addresses(addrs, port));
            // rdma link add ... netdev X refuses a netdev that does not exist; an address no interface has
            // would only fail later, in the process that first uses the device.
            RoceLinks.checkLocal(name, entry.addresses());
            RoceLinks.put(RoceLinks.file(), entry);
            out.println("link " + name + " added: " + entry.addresses() + " (" + RoceLinks.file() + ")");
            return 0;
        } catch (IllegalArgumentException e) {
            err.println("rdma4j link: " + e.getMessage());
            return 1;
        }
    }

    private static int delete(String[] args, PrintStream out, PrintStream err) throws IOException {
        if (args.length != 2) {
            usage(err);
            return 1;
        }
        if (!RoceLinks.remove(RoceLinks.file(), args[1])) {
            err.println("rdma4j link: no link " + args[1] + " in " + RoceLinks.file());
            return 1;
        }
        out.println("link " + args[1] + " deleted");
        return 0;
    }

    /** Lists the devices this process sees, with state, MTU and GIDs (the configured RoCE ones included). */
    private static int show(PrintStream out) {
        for (Device d : Verbs.devices()) {
            try (Context c = d.open()) {
                PortAttributes p = c.queryPort(1);
                StringBuilder gids = new StringBuilder();
                for (int i = 0; i < p.gidTblLen(); i++) {
                    gids.append(i == 0 ? "" : " ").append(c.queryGid(1, i));
                }
                out.printf("link %s/1 state %s mtu %d gids %s%n", d.name(), p.state(), p.activeMtu().bytes(), gids);
            } catch (VerbsException e) {
                out.printf("link %s/1 error: %s%n", d.name(), e.getMessage());
            }
        }
        return 0;
    }
}
