// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/** Work-completion flags (ibv_wc_flags). */
public final class WcFlags {
    /** The first 40 bytes of a UD receive buffer hold a valid GRH. */
    public static final int GRH = 1;
    /** The completion carries immediate data. */
    public static final int WITH_IMM = 1 << 1;

    private WcFlags() {
    }
}
