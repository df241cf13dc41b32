// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.rdma4j.common.RoceLinks;
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
 * for Linux: entries {@code name=addr[,addr][@port]} in the links file ({@code rdma4j link add|delete}
 * edits it), {@code RDMA4J_DEVICES} and {@code -Drdma4j.devices}, read once per process
 * ({@link RoceLinks} is the format). Every process lists every configured device, but binds a device's
 * addresses only when it creates the device's first QP: two processes of one host can each use one of
 * the devices of one links file (a RoCE device serves one process at a time; the second gets EADDRINUSE
 * naming the device). A device whose address this host does not have is left out with a warning on
 * standard error naming the address and listing the local ones, so the other devices stay usable. How
 * devices reach memory: {@code -Drdma4j.soft.dma=virtual|iommu|bounce} and the other
 * {@code rdma4j.soft.dma.*} properties of {@link org.rdma4j.dma.DmaConfig#fromProperties}.
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
                    RoceLinks.checkLocal(e.getKey(), new RoceLinks.Addresses(e.getValue().addresses(),
                            e.getValue().udpPort()));
                } catch (IllegalArgumentException ex) {
                    SoftEvents.LOG.log(System.Logger.Level.WARNING, "rdma4j: RoCE device " + e.getKey() + " left out: EADDRNOTAVAIL: " + ex.getMessage());
                    continue;
                }
                try {
                    SoftDevice d = f.addRoceDeviceBoundOnFirstQp(e.getKey(), e.getValue());
                    if (d.dma().checker() != null) {
                        d.dma().checker().listener(SoftProvider::logDmaReport);
                    }
                } catch (VerbsException ex) {
                    SoftEvents.LOG.log(System.Logger.Level.WARNING, "rdma4j: RoCE device " + e.getKey() + " not created: " + ex.getMessage());
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

    /**
     * The RoCE devices configured for this process (links file, then environment, then system property).
     *
     * @return device name to configuration, in configuration order
     * @throws VerbsException EINVAL for an entry that does not parse or a links file that cannot be read,
     *                        naming it
     */
    public static Map<String, RoceConfig> configuredRoceDevices() {
        Map<String, RoceConfig> m = new LinkedHashMap<>();
        try {
            for (RoceLinks.Entry e : RoceLinks.configured().values()) {
                m.put(e.name(), RoceConfig.of(e.addresses()));
            }
        } catch (IOException e) {
            throw new VerbsException(Errno.EINVAL, "cannot read " + RoceLinks.file() + ": " + e.getMessage());
        } catch (IllegalArgumentException e) {
            throw new VerbsException(Errno.EINVAL, e.getMessage());
        }
        return m;
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
