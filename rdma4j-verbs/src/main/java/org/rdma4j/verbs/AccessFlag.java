// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

import java.util.EnumSet;
import java.util.Set;

/**
 * Memory-region and queue-pair access flags (ibv_access_flags). Local read is always allowed.
 */
public enum AccessFlag {
    /** The HCA may write the memory: receive buffers, RDMA READ sinks, atomic results. */
    LOCAL_WRITE(1),
    /** Remote peers may RDMA WRITE into the memory. Requires {@link #LOCAL_WRITE}. */
    REMOTE_WRITE(1 << 1),
    /** Remote peers may RDMA READ the memory. */
    REMOTE_READ(1 << 2),
    /** Remote peers may perform atomics on the memory. Requires {@link #LOCAL_WRITE}. */
    REMOTE_ATOMIC(1 << 3);

    private final int bit;

    AccessFlag(int bit) {
        this.bit = bit;
    }

    /** {@return the ibv_access_flags bit} */
    public int bit() {
        return bit;
    }

    /**
     * {@return an EnumSet of them (empty when none)}
     *
     * @param flags flags to combine
     */
    public static EnumSet<AccessFlag> of(AccessFlag... flags) {
        EnumSet<AccessFlag> set = EnumSet.noneOf(AccessFlag.class);
        for (AccessFlag f : flags) {
            set.add(f);
        }
        return set;
    }

    /**
     * {@return the ibv_access_flags bit mask}
     *
     * @param flags a set of flags
     */
    public static int toBits(Set<AccessFlag> flags) {
        int bits = 0;
        for (AccessFlag f : flags) {
            bits |= f.bit;
        }
        return bits;
    }

    /**
     * {@return the set}
     *
     * @param bits an ibv_access_flags bit mask (unknown bits are ignored)
     */
    public static EnumSet<AccessFlag> fromBits(int bits) {
        EnumSet<AccessFlag> set = EnumSet.noneOf(AccessFlag.class);
        for (AccessFlag f : values()) {
            if ((bits & f.bit) != 0) {
                set.add(f);
            }
        }
        return set;
    }
}
