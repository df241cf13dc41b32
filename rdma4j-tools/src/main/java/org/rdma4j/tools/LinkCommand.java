// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.PortAttributes;
import org.rdma4j.verbs.Verbs;
import org.rdma4j.verbs.VerbsException;

/**
 * {@code rdma4j link}: configures RoCEv2 devices without code, as iproute2's {@code rdma link} does for
 * rdma_rxe. The configuration is the links file ({@code $RDMA4J_LINKS}, else
 * {@code ~/.config/rdma4j/links}), one {@code name=addr[,addr][@port]} entry per line, which the soft
 * provider reads when a process starts (environment variable {@code RDMA4J_DEVICES} adds entries for one
 * run). Usage:
 * <pre>
 *   rdma4j link add rxe0 [type rxe] addr 10.99.0.1 [addr fd99::1] [port 4791]
 *   rdma4j link delete rxe0
 *   rdma4j link [show]
 * </pre>
 */
final class LinkCommand {
    private LinkCommand() {
    }

    static Path linksFile() {
        String env = System.getenv("RDMA4J_LINKS");
        if (env != null && !env.isBlank()) {
            return Path.of(env);
        }
        return Path.of(System.getProperty("user.home"), ".config", "rdma4j", "links");
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
            err.println("rdma4j link: " + linksFile() + ": " + e.getMessage());
            return 1;
        }
    }

    private static void usage(PrintStream s) {
        s.println("Usage: rdma4j link add NAME [type rxe] addr ADDRESS [addr ADDRESS] [port PORT]");
        s.println("       rdma4j link delete NAME");
        s.println("       rdma4j link [show]");
        s.println("A RoCEv2 device is bound to at most one IPv4 and one IPv6 address (its GIDs) and UDP port 4791.");
        s.println("Links file: " + linksFile() + " (RDMA4J_LINKS overrides; RDMA4J_DEVICES='rxe0=ADDR;...' adds for one run)");
    }

    private static int add(String[] args, PrintStream out, PrintStream err) throws IOException {
        if (args.length < 2) {
            usage(err);
            return 1;
        }
        String name = args[1];
        if (!name.matches("[A-Za-z0-9_.-]+")) {
            err.println("rdma4j link: bad device name '" + name + "'");
            return 1;
        }
        List<String> addrs = new ArrayList<>();
        int port = 4791;
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
                case "addr", "address" -> {
                    try {
                        if (!v.matches("[0-9A-Fa-f:.]+")) {
                            throw new UnknownHostException(v);
                        }
                        addrs.add(InetAddress.getByName(v).getHostAddress());
                    } catch (UnknownHostException e) {
                        err.println("rdma4j link: '" + v + "' is not an IP address");
                        return 1;
                    }
                }
                case "port" -> {
                    try {
                        port = Integer.parseInt(v);
                    } catch (NumberFormatException e) {
                        port = -1;
                    }
                    if (port < 1 || port > 65535) {
                        err.println("rdma4j link: bad port '" + v + "'");
                        return 1;
                    }
                }
                case "netdev" -> {
                    err.println("rdma4j link: give the device's addresses with 'addr' (a Java process binds "
                            + "addresses, not interfaces): rdma4j link add " + name + " addr <address of " + v + ">");
                    return 1;
                }
                default -> {
                    err.println("rdma4j link: unknown option '" + k + "'");
                    return 1;
                }
            }
        }
        if (addrs.isEmpty()) {
            err.println("rdma4j link: add " + name + " needs 'addr ADDRESS'");
            return 1;
        }
        String entry = name + "=" + String.join(",", addrs) + (port == 4791 ? "" : "@" + port);
        List<String> lines = readLines();
        List<String> kept = new ArrayList<>();
        for (String l : lines) {
            if (!name.equals(entryName(l))) {
                kept.add(l);
            }
        }
        kept.add(entry);
        write(kept);
        out.println("link " + name + " added: " + entry.substring(name.length() + 1) + " (" + linksFile() + ")");
        return 0;
    }

    private static int delete(String[] args, PrintStream out, PrintStream err) throws IOException {
        if (args.length != 2) {
            usage(err);
            return 1;
        }
        List<String> lines = readLines();
        List<String> kept = new ArrayList<>();
        boolean found = false;
        for (String l : lines) {
            if (args[1].equals(entryName(l))) {
                found = true;
            } else {
                kept.add(l);
            }
        }
        if (!found) {
            err.println("rdma4j link: no link " + args[1] + " in " + linksFile());
            return 1;
        }
        write(kept);
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

    private static String entryName(String line) {
        String l = line.trim();
        int eq = l.indexOf('=');
        return l.startsWith("#") || eq <= 0 ? null : l.substring(0, eq).trim();
    }

    private static List<String> readLines() throws IOException {
        Path f = linksFile();
        return Files.isRegularFile(f) ? new ArrayList<>(Files.readAllLines(f)) : new ArrayList<>();
    }

    private static void write(List<String> lines) throws IOException {
        Path f = linksFile();
        if (f.getParent() != null) {
            Files.createDirectories(f.getParent());
        }
        Path tmp = f.resolveSibling(f.getFileName() + ".tmp");
        Files.write(tmp, lines);
        Files.move(tmp, f, java.nio.file.StandardCopyOption.REPLACE_EXISTING, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    }
}
