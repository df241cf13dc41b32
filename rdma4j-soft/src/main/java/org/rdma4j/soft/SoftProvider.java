package org.rdma4j.soft;

import java.util.ArrayList;
import java.util.List;

import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.spi.VerbsProvider;

/**
 * The ServiceLoader provider: one process-wide in-process fabric with devices {@code soft0},
 * {@code soft1}, ... ({@code -Drdma4j.soft.devices=N}, default 2), so two programs in one JVM, or a
 * server and client of one tool, talk through it.
 */
public final class SoftProvider implements VerbsProvider {
    private static final class Holder {
        static final SoftFabric FABRIC = create();

        private static SoftFabric create() {
            SoftFabric f = new SoftFabric();
            int n = Integer.getInteger("rdma4j.soft.devices", 2);
            for (int i = 0; i < Math.max(1, n); i++) {
                f.addDevice("soft" + i);
            }
            return f;
        }
    }

    /** Public no-argument constructor for ServiceLoader. */
    public SoftProvider() {
    }

    /** @return the process-wide fabric behind this provider's devices */
    public static SoftFabric defaultFabric() {
        return Holder.FABRIC;
    }

    @Override
    public String name() {
        return "soft";
    }

    @Override
    public List<Device> devices() {
        return new ArrayList<>(Holder.FABRIC.devices());
    }
}
