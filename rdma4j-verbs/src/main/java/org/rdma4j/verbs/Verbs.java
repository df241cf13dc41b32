// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

import java.util.ArrayList;
import java.util.List;
import java.util.ServiceLoader;

import org.rdma4j.verbs.spi.VerbsProvider;

/** Device discovery (ibv_get_device_list) over every {@link VerbsProvider} on the module or class path. */
public final class Verbs {
    private Verbs() {
    }

    /** {@return every device of every provider} */
    public static List<Device> devices() {
        List<Device> all = new ArrayList<>();
        for (VerbsProvider p : ServiceLoader.load(VerbsProvider.class)) {
            all.addAll(p.devices());
        }
        return all;
    }

    /**
     * {@return the device}
     *
     * @param name a device name
     * @throws VerbsException ENOENT naming the known devices when there is none by that name
     */
    public static Device device(String name) {
        List<Device> all = new ArrayList<>();
        StringBuilder why = new StringBuilder();
        for (VerbsProvider p : ServiceLoader.load(VerbsProvider.class)) {
            for (Device d : p.devices()) {
                if (d.name().equals(name)) {
                    return d;
                }
                all.add(d);
            }
            String status = p.status();
            if (status != null && !status.isEmpty()) {
                why.append("; ").append(p.name()).append(": ").append(status);
            }
        }
        List<String> names = all.stream().map(Device::name).toList();
        throw new VerbsException(Errno.ENOENT, "IB device " + name + " not found; known devices: " + names + why);
    }
}
