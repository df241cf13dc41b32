// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

import org.rdma4j.libc.Errors;

/**
 * The process's view of libibverbs: loaded and checked once ({@link IbvLibrary}), fork support set up before
 * anything is registered, and the device list read once. The list is never freed: every {@code ibv_device}
 * stays valid for the life of the process (devices added later are not seen; one removed later makes its
 * open contexts fail with EIO and a DEVICE_FATAL event, as in C).
 */
final class IbvDevices {
    private static final System.Logger LOG = System.getLogger("org.rdma4j.ibverbs");
    private static volatile IbvDevices instance;

    private final List<org.rdma4j.verbs.Device> devices;
    private final String status;

    private IbvDevices(List<org.rdma4j.verbs.Device> devices, String status) {
        this.devices = List.copyOf(devices);
        this.status = status;
    }

    /** {@return the devices, read on first use} */
    static IbvDevices get() {
        IbvDevices d = instance;
        if (d == null) {
            synchronized (IbvDevices.class) {
                d = instance;
                if (d == null) {
                    d = load();
                    instance = d;
                }
            }
        }
        return d;
    }

    List<org.rdma4j.verbs.Device> devices() {
        return devices;
    }

    String status() {
        return status;
    }

    private static IbvDevices load() {
        IbvLibrary.Loaded lib = IbvLibrary.get();
        if (!lib.ok()) {
            LOG.log(System.Logger.Level.DEBUG, "ibverbs provider offers no devices: {0}", lib.failure());
            return new IbvDevices(List.of(), lib.failure());
        }
        IbvFork.init();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment num = a.allocate(ValueLayout.JAVA_INT);
            MemorySegment list;
            try {
                list = (MemorySegment) Ibv.GET_DEVICE_LIST.invokeExact(st, num);
            } catch (Throwable t) {
                throw Ibv.rethrow(t);
            }
            if (list.equals(MemorySegment.NULL)) {
                int e = Ibv.errno(st);
                String why = noList(e);
                LOG.log(System.Logger.Level.DEBUG, "ibverbs provider offers no devices: {0}", why);
                return new IbvDevices(List.of(), why);
            }
            int n = num.get(ValueLayout.JAVA_INT, 0);
            MemorySegment arr = list.reinterpret(8L * (n + 1));
            List<org.rdma4j.verbs.Device> out = new ArrayList<>();
            List<String> refused = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                MemorySegment dev = arr.getAtIndex(ValueLayout.ADDRESS, i).reinterpret(IbvLayouts.DEVICE.byteSize());
                try {
                    out.add(IbvDevice.of(dev));
                } catch (IllegalStateException abi) {
                    refused.add(abi.getMessage());
                }
            }
            String status;
            if (!refused.isEmpty()) {
                status = String.join("; ", refused);
            } else if (n == 0) {
                status = "libibverbs found no RDMA devices (/sys/class/infiniband is empty): load the NIC's driver,"
                        + " or create a software device (rdma link add rxe0 type rxe netdev eth0, or type siw)";
            } else {
                status = "";
            }
            return new IbvDevices(out, status);
        }
    }

    /**
     * {@return why there is no list and what to do}
     *
     * @param errno what ibv_get_device_list left
     */
    static String noList(int errno) {
        return switch (errno) {
            // check_abi_version cannot read /sys/class/infiniband_verbs/abi_version (init.c)
            case Errors.ENOSYS -> "the kernel has no RDMA stack (ibv_get_device_list: ENOSYS, "
                    + "/sys/class/infiniband_verbs/abi_version is missing): load ib_uverbs and a device driver, "
                    + "e.g. modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0";
            case Errors.ENOMEM -> "ibv_get_device_list failed: ENOMEM (out of memory)";
            default -> "ibv_get_device_list failed: " + Errors.describe(errno);
        };
    }
}
