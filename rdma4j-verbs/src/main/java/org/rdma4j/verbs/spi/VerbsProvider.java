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

    /**
     * Why the provider offers no (or fewer) devices than a user may expect, e.g. that the kernel has no
     * RDMA stack; {@link org.rdma4j.verbs.Verbs#device} adds it to its "not found" message.
     *
     * @return a sentence saying what is wrong and what to do, or "" when there is nothing to say
     */
    default String status() {
        return "";
    }
}
