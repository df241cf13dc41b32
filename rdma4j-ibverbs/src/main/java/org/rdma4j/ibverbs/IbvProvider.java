// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.util.List;

import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.spi.VerbsProvider;

/**
 * The verbs provider over Linux's libibverbs ({@code libibverbs.so.1}), through FFM: real RDMA NICs and the
 * kernel's software devices (rxe, siw), found with {@link java.util.ServiceLoader} beside the soft device.
 * On a host without libibverbs, without the kernel's RDMA stack or without devices it offers no device and
 * says why in {@link #status()}; it never fails the JVM.
 */
public final class IbvProvider implements VerbsProvider {
    /** Creates the provider; the library is loaded on first use of {@link #devices()}. */
    public IbvProvider() {
    }

    @Override
    public String name() {
        return "ibverbs";
    }

    @Override
    public List<Device> devices() {
        return IbvDevices.get().devices();
    }

    @Override
    public String status() {
        return IbvDevices.get().status();
    }
}
