// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.spi.VerbsProvider;

/**
 * The ServiceLoader provider: one process-wide fabric with in-process devices {@code soft0},
 * {@code soft1}, ... ({@code -Drdma4j.soft.devices=N}, default 2), so two programs in one JVM, or a
 * server and client of one tool, talk through it; plus the RoCEv2 devices configured for this process,
 * which reach other processes and hosts over UDP.
 *
 * <p>RoCE devices are configured without code, as {@code rdma link add rxe0 type rxe netdev eth0} does
 * for Linux: each entry is {@code name=addr[,addr][@port]} (one IPv4 and/or one IPv6 address, port 4791
 * by default). Sources, all merged, later ones winning per name:
 * <ol>
 * <li>the links file, {@code $RDMA4J_LINKS} or {@code ~/.config/rdma4j/links} (one entry per line,
 * {@code #} comments), which {@code rdma4j link add|del|show} edits;</li>
 * <li>the environment variable {@code RDMA4J_DEVICES} and the system property {@code rdma4j.devices}
 * (entries separated by {@code ;} or spaces).</li>
 * </ol>
 * A device that cannot be bound (address not configured, port in use) is left out with a warning on
 * standard error naming the address, so the other devices stay usable. How devices reach memory:
 * {@code -Drdma4j.soft.dma=virtual|iommu|bounce} and the other {@code rdma4j.soft.dma.*} properties of
 * {@link org.rdma4j.dma.DmaConfig#fromProperties}.
 */
public final class SoftProvider implements VerbsProvider {
    private static final class Holder {
        /** Why the fabric could not be built (a bad rdma4j.soft.* property), reported on every use. */
        static VerbsException failure;
        static final SoftFabric FABRIC = createOrRemember();

        private static SoftFabric createOrRemember() {
            try {
                return create();
            } catch (IllegalArgumentException e) {
                failure = new VerbsException(Errno.EINVAL, "soft provider: " + e.getMessage());
                return null;
            } catch (VerbsException e) {
                failure = e;
                return null;
            }
        }

        static SoftFabric fabric() {
            if (FABRIC == null) {
                throw failure;
            }
            return FABRIC;
        }

        private static SoftFabric create() {
            SoftFabric f = new SoftFabric();
            int n = Integer.getInteger("rdma4j.soft.devices", 2);
            for (int i = 0; i < Math.max(0, n); i++) {
                SoftDevice d = f.addDevice("soft" + i);
                if (d.dma().checker() != null) {
                    d.dma().checker().listener(SoftProvider::logDmaReport); // like dma-debug's kernel log
                }
            }
            Map<String, RoceConfig> roce;
            try {
                roce = configuredRoceDevices();
            } catch (VerbsException e) {
                SoftEvents.LOG.log(System.Logger.Level.WARNING, "rdma4j: ignoring RoCE device configuration: " + e.getMessage());
                roce = Map.of();
            }
            for (Map.Entry<String, RoceConfig> e : roce.entrySet()) {
                try {
                    SoftDevice d = f.addRoceDevice(e.getKey(), e.getValue());
                    if (d.dma().checker() != null) {
                        d.dma().checker().listener(SoftProvider::logDmaReport);
                    }
                } catch (VerbsException ex) {
                    SoftEvents.LOG.log(System.Logger.Level.WARNING,
                            "rdma4j: RoCE device " + e.getKey() + " not created: " + ex.getMessage());
                }
            }
            return f;
        }
    }

    /** Public no-argument constructor for ServiceLoader. */
    public SoftProvider() {
    }

    /** {@return the process-wide fabric behind this provider's devices} */
    public static SoftFabric defaultFabric() {
        return Holder.fabric();
    }

    /** {@return the links file: {@code $RDMA4J_LINKS}, else {@code ~/.config/rdma4j/links}} */
    public static Path linksFile() {
        String env = System.getenv("RDMA4J_LINKS");
        if (env != null && !env.isBlank()) {
            return Path.of(env);
        }
        return Path.of(System.getProperty("user.home"), ".config", "rdma4j", "links");
    }

    /**
     * The RoCE devices configured for this process (links file, then environment, then system property).
     *
     * @return device name to configuration, in configuration order
     * @throws VerbsException EINVAL for an entry that does not parse, naming it
     */
    public static Map<String, RoceConfig> configuredRoceDevices() {
        Map<String, RoceConfig> m = new LinkedHashMap<>();
        Path file = linksFile();
        if (Files.isRegularFile(file)) {
            try {
                for (String line : Files.readAllLines(file)) {
                    parseEntries(stripComment(line), m, file.toString());
                }
            } catch (IOException e) {
                throw new VerbsException(Errno.EINVAL, "cannot read " + file + ": " + e.getMessage());
            }
        }
        String env = System.getenv("RDMA4J_DEVICES");
        if (env != null) {
            parseEntries(env, m, "RDMA4J_DEVICES");
        }
        String prop = System.getProperty("rdma4j.devices");
        if (prop != null) {
            parseEntries(prop, m, "-Drdma4j.devices");
        }
        return m;
    }

    private static String stripComment(String line) {
        int h = line.indexOf('#');
        return h >= 0 ? line.substring(0, h) : line;
    }

    /**
     * Parses {@code name=addr[,addr][@port]} entries separated by {@code ;} or whitespace.
     *
     * @param text   the entries
     * @param into   where to put them (a later entry replaces an earlier one of the same name)
     * @param source where the text came from, for error messages
     */
    static void parseEntries(String text, Map<String, RoceConfig> into, String source) {
        for (String entry : text.trim().split("[;\\s]+")) {
            if (entry.isEmpty()) {
                continue;
            }
            int eq = entry.indexOf('=');
            if (eq <= 0 || eq == entry.length() - 1) {
                throw new VerbsException(Errno.EINVAL, "bad RoCE device entry '" + entry + "' in " + source
                        + " (expected name=address[,address][@port], e.g. rxe0=127.0.0.1)");
            }
            String name = entry.substring(0, eq);
            if (!name.matches("[A-Za-z0-9_.-]+")) {
                throw new VerbsException(Errno.EINVAL, "bad device name '" + name + "' in " + source);
            }
            into.put(name, RoceConfig.parse(entry.substring(eq + 1)));
        }
    }

    /**
     * Formats a configuration as a links-file entry.
     *
     * @param name   device name
     * @param config its configuration
     * @return {@code name=addr[,addr][@port]}
     */
    public static String formatEntry(String name, RoceConfig config) {
        List<String> a = new ArrayList<>();
        config.addresses().forEach(x -> a.add(x.getHostAddress()));
        String port = config.udpPort() == org.rdma4j.wire.Roce.UDP_PORT ? "" : "@" + config.udpPort();
        return name + "=" + String.join(",", a) + port;
    }

    @Override
    public String name() {
        return "soft";
    }

    @Override
    public List<Device> devices() {
        return new ArrayList<>(Holder.fabric().devices());
    }

    /** The DMA checker's reports of the provider's devices go to logger {@code org.rdma4j.dma} at WARNING. */
    private static void logDmaReport(org.rdma4j.dma.DmaReport r) {
        System.getLogger("org.rdma4j.dma").log(System.Logger.Level.WARNING, r.toString());
    }
}
