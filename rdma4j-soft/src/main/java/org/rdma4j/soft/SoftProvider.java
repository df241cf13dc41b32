package org.rdma4j.soft;

import java.util.ArrayList;
import java.util.List;

import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.spi.VerbsProvider;

/**
 * The ServiceLoader provider: one process-wide in-process fabric with devices {@code soft0},
 * {@code soft1}, ... ({@code -Drdma4j.soft.devices=N}, default 2), so two programs in one JVM, or a
 * server and client of one tool, talk through it. How they reach memory: {@code -Drdma4j.soft.dma=virtual|iommu|bounce}
 * and the other {@code rdma4j.soft.dma.*} properties of {@link org.rdma4j.dma.DmaConfig#fromProperties}.
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
            for (int i = 0; i < Math.max(1, n); i++) {
                SoftDevice d = f.addDevice("soft" + i);
                if (d.dma().checker() != null) {
                    d.dma().checker().listener(r -> System.err.print(r)); // like dma-debug's kernel log
                }
            }
            return f;
        }
    }

    /** Public no-argument constructor for ServiceLoader. */
    public SoftProvider() {
    }

    /** @return the process-wide fabric behind this provider's devices */
    public static SoftFabric defaultFabric() {
        return Holder.fabric();
    }

    @Override
    public String name() {
        return "soft";
    }

    @Override
    public List<Device> devices() {
        return new ArrayList<>(Holder.fabric().devices());
    }
}
