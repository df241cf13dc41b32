// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common;

import java.io.IOException;
import java.net.DatagramSocket;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.UnaryOperator;
import java.util.regex.Pattern;

/**
 * The configuration of RoCEv2 devices without code, as {@code rdma link add rxe0 type rxe netdev eth0}
 * configures rdma_rxe: each device is an entry {@code name=addr[,addr][@port]} (at most one IPv4 and one
 * IPv6 address, which become its GIDs, and the UDP port, {@value #DEFAULT_UDP_PORT} unless given). The
 * entries come from, in this order, later ones replacing earlier ones of the same name:
 * <ol>
 * <li>the links file, {@code $RDMA4J_LINKS} or else {@code ~/.config/rdma4j/links}: one entry per line,
 * {@code #} starts a comment; {@code rdma4j link add|delete} edits it ({@link #put}, {@link #remove});</li>
 * <li>the environment variable {@code RDMA4J_DEVICES}, then the system property {@code rdma4j.devices}:
 * entries separated by {@code ;} or white space, for one run.</li>
 * </ol>
 * This class is the one reader and writer of that format: the soft provider reads it to create its
 * devices, and the {@code link} tool, which must not depend on a provider, edits it. Errors are
 * {@link IllegalArgumentException}s whose message names the text and where it came from.
 */
public final class RoceLinks {
    /** The RoCEv2 UDP port (IANA 4791), which rdma_rxe uses. */
    public static final int DEFAULT_UDP_PORT = 4791;
    /** The environment variable naming the links file. */
    public static final String FILE_ENV = "RDMA4J_LINKS";
    /** The environment variable with entries for one run. */
    public static final String DEVICES_ENV = "RDMA4J_DEVICES";
    /** The system property with entries for one run. */
    public static final String DEVICES_PROPERTY = "rdma4j.devices";

    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9_.-]+");
    private static final Pattern SEPARATORS = Pattern.compile("[;\\s]+");

    private RoceLinks() {
    }

    /**
     * What a RoCE device binds: its addresses (GID 0 is the first, GID 1 the second) and UDP port.
     *
     * @param ips     one or two addresses, at most one of each family, none a wildcard or multicast address
     * @param udpPort the UDP port, 1..65535
     */
    public record Addresses(List<InetAddress> ips, int udpPort) {
        /** Validates the addresses and the port. */
        public Addresses {
            ips = List.copyOf(ips);
            check(ips, udpPort);
        }

        /** {@return {@code addr[,addr][@port]}, the port only when it is not {@value #DEFAULT_UDP_PORT}} */
        @Override
        public String toString() {
            List<String> a = new ArrayList<>();
            for (InetAddress ip : ips) {
                a.add(text(ip));
            }
            return String.join(",", a) + (udpPort == DEFAULT_UDP_PORT ? "" : "@" + udpPort);
        }
    }

    /**
     * One configured device.
     *
     * @param name      the device name, letters, digits and {@code _.-}
     * @param addresses what it binds
     */
    public record Entry(String name, Addresses addresses) {
        /** Validates the name. */
        public Entry {
            checkName(name, "");
            if (addresses == null) {
                throw new IllegalArgumentException("RoCE device " + name + " has no addresses");
            }
        }

        /** {@return the entry as the links file holds it: {@code name=addr[,addr][@port]}} */
        @Override
        public String toString() {
            return name + "=" + addresses;
        }
    }

    /**
     * Checks what a RoCE device may bind (the rules every configuration path shares).
     *
     * @param ips     the addresses
     * @param udpPort the UDP port
     * @throws IllegalArgumentException naming what is wrong
     */
    public static void check(List<InetAddress> ips, int udpPort) {
        if (ips.isEmpty()) {
            throw new IllegalArgumentException("a RoCE device needs at least one IP address");
        }
        int v4 = 0;
        int v6 = 0;
        for (InetAddress a : ips) {
            if (a.isAnyLocalAddress()) {
                throw new IllegalArgumentException("bind a RoCE device to a specific address, not " + a.getHostAddress()
                        + ": the ICRC covers the destination address, which a wildcard socket cannot tell");
            }
            if (a.isMulticastAddress()) {
                throw new IllegalArgumentException(a.getHostAddress() + " is a multicast address, not an interface's");
            }
            if (a instanceof Inet4Address) {
                v4++;
            } else {
                v6++;
            }
        }
        if (v4 > 1 || v6 > 1) {
            throw new IllegalArgumentException("at most one IPv4 and one IPv6 address per RoCE device (they are its"
                    + " GIDs): " + ips.stream().map(InetAddress::getHostAddress).toList());
        }
        if (udpPort < 1 || udpPort > 0xFFFF) {
            throw new IllegalArgumentException("UDP port " + udpPort + " (expected 1..65535)");
        }
    }

    /**
     * Checks a device name.
     *
     * @param name a device name
     * @param source where it came from, for the message ("" for none)
     * @throws IllegalArgumentException when it is not letters, digits and {@code _.-}
     */
    public static void checkName(String name, String source) {
        if (name == null || !NAME.matcher(name).matches()) {
            throw new IllegalArgumentException("bad device name '" + name + "'" + in(source)
                    + " (letters, digits and _.- only)");
        }
    }

    /**
     * Parses an address literal: no name is looked up.
     *
     * @param text   e.g. {@code 10.99.0.1} or {@code fd99::1}
     * @param source where it came from, for the message ("" for none)
     * @return the address
     * @throws IllegalArgumentException when it is not an IPv4 or IPv6 literal
     */
    public static InetAddress parseAddress(String text, String source) {
        try {
            return InetAddress.ofLiteral(text.trim());
        } catch (IllegalArgumentException | NullPointerException e) {
            throw new IllegalArgumentException("'" + text + "' is not an IP address" + in(source), e);
        }
    }

    /**
     * Parses {@code addr[,addr][@port]}, e.g. {@code 127.0.0.1}, {@code 10.99.0.1,fd99::1} or
     * {@code 127.0.0.2@14791}.
     *
     * @param spec   the text
     * @param source where it came from, for messages ("" for none)
     * @return the addresses
     * @throws IllegalArgumentException naming the text when it does not parse or break the rules of
     *                                  {@link #check}
     */
    public static Addresses parseAddresses(String spec, String source) {
        String s = spec.trim();
        int port = DEFAULT_UDP_PORT;
        int at = s.lastIndexOf('@');
        if (at >= 0) {
            try {
                port = Integer.parseInt(s.substring(at + 1).trim());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("bad UDP port in '" + spec + "'" + in(source), e);
            }
            s = s.substring(0, at);
        }
        List<InetAddress> ips = new ArrayList<>();
        for (String part : s.split(",")) {
            if (!part.isBlank()) {
                ips.add(parseAddress(part, source.isEmpty() ? "'" + spec + "'" : source));
            }
        }
        try {
            return new Addresses(ips, port);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(e.getMessage() + " ('" + spec + "'" + in(source) + ")", e);
        }
    }

    /**
     * Parses one {@code name=addr[,addr][@port]} entry.
     *
     * @param entry  the text
     * @param source where it came from, for messages
     * @return the entry
     * @throws IllegalArgumentException naming the entry and the source when it does not parse
     */
    public static Entry parseEntry(String entry, String source) {
        String e = entry.trim();
        int eq = e.indexOf('=');
        if (eq <= 0 || eq == e.length() - 1) {
            throw new IllegalArgumentException("bad RoCE device entry '" + entry + "'" + in(source)
                    + " (expected name=address[,address][@port], e.g. rxe0=127.0.0.1)");
        }
        String name = e.substring(0, eq).trim();
        checkName(name, source);
        return new Entry(name, parseAddresses(e.substring(eq + 1), source));
    }

    /**
     * Parses entries separated by {@code ;} or white space (an environment variable's or a property's).
     *
     * @param text   the entries
     * @param source where they came from, for messages
     * @return them in order
     * @throws IllegalArgumentException for the first that does not parse
     */
    public static List<Entry> parseList(String text, String source) {
        List<Entry> l = new ArrayList<>();
        for (String entry : SEPARATORS.split(text.trim())) {
            if (!entry.isEmpty()) {
                l.add(parseEntry(entry, source));
            }
        }
        return l;
    }

    /**
     * {@return the line without its comment ({@code #} to the end)}
     *
     * @param line a line of the links file
     */
    public static String stripComment(String line) {
        int h = line.indexOf('#');
        return h >= 0 ? line.substring(0, h) : line;
    }

    /** {@return the links file: {@code $RDMA4J_LINKS}, else {@code ~/.config/rdma4j/links}} */
    public static Path file() {
        return file(System::getenv);
    }

    /**
     * {@return the links file: {@code $RDMA4J_LINKS}, else {@code ~/.config/rdma4j/links}}
     *
     * @param env the environment
     */
    public static Path file(UnaryOperator<String> env) {
        String f = env.apply(FILE_ENV);
        if (f != null && !f.isBlank()) {
            return Path.of(f);
        }
        return Path.of(System.getProperty("user.home"), ".config", "rdma4j", "links");
    }

    /**
     * Reads a links file.
     *
     * @param file the file
     * @return its entries in file order (none when it does not exist)
     * @throws IOException when it cannot be read
     * @throws IllegalArgumentException naming the file and line of an entry that does not parse
     */
    public static List<Entry> read(Path file) throws IOException {
        List<Entry> l = new ArrayList<>();
        if (!Files.isRegularFile(file)) {
            return l;
        }
        List<String> lines = Files.readAllLines(file);
        for (int i = 0; i < lines.size(); i++) {
            String text = stripComment(lines.get(i));
            if (!text.isBlank()) {
                l.addAll(parseList(text, file + ":" + (i + 1)));
            }
        }
        return l;
    }

    /**
     * The devices configured for this process: the links file, then {@code RDMA4J_DEVICES}, then
     * {@code -Drdma4j.devices}, a later entry replacing an earlier one of the same name.
     *
     * @return name to entry, in configuration order
     * @throws IOException when the links file cannot be read
     * @throws IllegalArgumentException for an entry that does not parse, naming it and its source
     */
    public static Map<String, Entry> configured() throws IOException {
        Map<String, Entry> m = new LinkedHashMap<>();
        for (Entry e : read(file())) {
            m.put(e.name(), e);
        }
        String env = System.getenv(DEVICES_ENV);
        if (env != null) {
            parseList(env, DEVICES_ENV).forEach(e -> m.put(e.name(), e));
        }
        String prop = System.getProperty(DEVICES_PROPERTY);
        if (prop != null) {
            parseList(prop, "-D" + DEVICES_PROPERTY).forEach(e -> m.put(e.name(), e));
        }
        return m;
    }

    /**
     * Adds an entry to a links file, or replaces the one of the same name in its place; other lines and
     * comments stay. The file is replaced atomically.
     *
     * @param file  the links file (created with its directory if missing)
     * @param entry the entry
     * @throws IOException when it cannot be read or written
     */
    public static void put(Path file, Entry entry) throws IOException {
        List<String> lines = lines(file);
        boolean replaced = false;
        for (int i = 0; i < lines.size(); i++) {
            if (entry.name().equals(entryName(lines.get(i)))) {
                if (replaced) {
                    lines.remove(i--);
                } else {
                    lines.set(i, entry.toString());
                    replaced = true;
                }
            }
        }
        if (!replaced) {
            lines.add(entry.toString());
        }
        write(file, lines);
    }

    /**
     * Removes a device's entry from a links file.
     *
     * @param file the links file
     * @param name the device
     * @return whether there was one
     * @throws IOException when it cannot be read or written
     */
    public static boolean remove(Path file, String name) throws IOException {
        List<String> lines = lines(file);
        boolean found = lines.removeIf(l -> name.equals(entryName(l)));
        if (found) {
            write(file, lines);
        }
        return found;
    }

    /** The device a line of the links file configures, or null for a comment, a blank or a bad line. */
    private static String entryName(String line) {
        String l = stripComment(line).trim();
        int eq = l.indexOf('=');
        return eq <= 0 ? null : l.substring(0, eq).trim();
    }

    private static List<String> lines(Path file) throws IOException {
        return Files.isRegularFile(file) ? new ArrayList<>(Files.readAllLines(file)) : new ArrayList<>();
    }

    private static void write(Path file, List<String> lines) throws IOException {
        Path dir = file.toAbsolutePath().getParent();
        if (dir != null) {
            Files.createDirectories(dir);
        }
        Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
        Files.write(tmp, lines);
        Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }

    /**
     * Whether this host has the address, so that a socket can be bound to it: the test binds a UDP socket
     * to an ephemeral port of the address and closes it at once, so it holds nothing, and it agrees with
     * the kernel on 127.0.0.0/8, which lives on {@code lo} without being listed address by address.
     *
     * @param a an address
     * @return whether a socket can be bound to it here
     */
    public static boolean isLocal(InetAddress a) {
        try (DatagramSocket s = new DatagramSocket(null)) {
            s.bind(new InetSocketAddress(a, 0));
            return true;
        } catch (SocketException e) {
            return false;
        }
    }

    /**
     * The addresses of this host's interfaces, for messages: {@code 127.0.0.1 (lo)} and so on; IPv6
     * link-local addresses are left out (a RoCE device's GID cannot carry their scope).
     *
     * @return the addresses with their interface names
     */
    public static List<String> localAddresses() {
        List<String> l = new ArrayList<>();
        try {
            for (NetworkInterface ni : NetworkInterface.networkInterfaces().toList()) {
                if (!ni.isUp()) {
                    continue;
                }
                for (InetAddress a : ni.inetAddresses().toList()) {
                    if (!a.isLinkLocalAddress()) {
                        l.add(text(a) + " (" + ni.getName() + ")");
                    }
                }
            }
        } catch (SocketException e) {
            l.add("(the interfaces could not be listed: " + e.getMessage() + ")");
        }
        return l;
    }

    /**
     * Checks that this host has the addresses (see {@link #isLocal}).
     *
     * @param name      the device, for the message
     * @param addresses its addresses
     * @throws IllegalArgumentException naming each missing address and listing the local ones
     */
    public static void checkLocal(String name, Addresses addresses) {
        List<String> missing = new ArrayList<>();
        for (InetAddress a : addresses.ips()) {
            if (!isLocal(a)) {
                missing.add(text(a));
            }
        }
        if (!missing.isEmpty()) {
            throw new IllegalArgumentException(String.join(", ", missing) + (missing.size() == 1 ? " is" : " are")
                    + " not an address of this host, so " + name + " could not bind it. Local addresses: "
                    + String.join(", ", localAddresses()) + " (and all of 127.0.0.0/8 on lo)");
        }
    }

    /**
     * An address as people write it: dotted IPv4, IPv6 in RFC 5952's short form ({@code fd99::1}, not
     * {@code fd99:0:0:0:0:0:0:1}; {@link Inet6Text#ntop}), without a scope.
     *
     * @param a an address
     * @return its text
     */
    public static String text(InetAddress a) {
        byte[] b = a.getAddress();
        return b.length != 16 ? a.getHostAddress() : Inet6Text.ntop(b);
    }

    private static String in(String source) {
        return source == null || source.isEmpty() ? "" : " in " + source;
    }
}
