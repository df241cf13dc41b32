// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

import java.lang.foreign.MemorySegment;
import java.util.Set;

/** A registered memory region (ibv_mr). {@link #close()} deregisters it. Thread-safe. */
public interface MemoryRegion extends AutoCloseable {
    /** {@return the PD} */
    ProtectionDomain pd();

    /** {@return the registered segment} */
    MemorySegment segment();

    /** {@return the start virtual address} */
    long address();

    /** {@return length in bytes} */
    long length();

    /** {@return L_Key: table index in the upper 24 bits, a random variant in the low 8} */
    int lkey();

    /** {@return R_Key (equal to the L_Key on software devices)} */
    int rkey();

    /** {@return the access flags} */
    Set<AccessFlag> access();

    /** ibv_dereg_mr. Later accesses with its keys fail with protection errors. */
    @Override
    void close();
}
