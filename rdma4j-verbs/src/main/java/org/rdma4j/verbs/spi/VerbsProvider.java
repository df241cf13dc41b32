// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.spi;

import java.util.List;

import org.rdma4j.verbs.Device;

/** A source of devices, found with {@link java.util.ServiceLoader}. */
public interface VerbsProvider {
    /** {@return the provider's name, e.g. {@code soft}} */
    String name();

    /** {@return the devices it currently offers} */
    List<Device> devices();
}
