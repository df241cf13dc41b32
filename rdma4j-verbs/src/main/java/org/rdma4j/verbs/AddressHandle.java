// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/** An address handle (ibv_ah) for UD sends. */
public interface AddressHandle extends AutoCloseable {
    /** {@return the PD} */
    ProtectionDomain pd();

    /** {@return a copy of its attributes} */
    AhAttributes attributes();

    /** ibv_destroy_ah. */
    @Override
    void close();
}
