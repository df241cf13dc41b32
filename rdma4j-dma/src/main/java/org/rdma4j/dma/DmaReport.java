// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.dma;

import java.io.PrintWriter;
import java.io.StringWriter;

/**
 * One misuse found by the {@link DmaChecker}, with the stack that created the mapping (or posted the
 * request) and the stack of the misuse.
 *
 * @param kind      what went wrong
 * @param message   the details: addresses, sizes, directions
 * @param mappedAt  where the mapping involved was made (or the request posted); null if there is none
 * @param misusedAt where the misuse happened
 */
public record DmaReport(Kind kind, String message, Throwable mappedAt, Throwable misusedAt) {
    /** The checks, after Linux's CONFIG_DMA_API_DEBUG plus the ones RDMA needs. */
    public enum Kind {
        /** A device access to memory no live mapping covers. */
        ACCESS_OUTSIDE_MAPPING,
        /** A device read of a FROM_DEVICE mapping, or a write to a TO_DEVICE one. */
        WRONG_DIRECTION,
        /** Unmap of an address that was never mapped. */
        UNMAP_NOT_MAPPED,
        /** Unmap of a mapping already unmapped. */
        DOUBLE_UNMAP,
        /** Unmap with another size or direction than the map. */
        UNMAP_MISMATCH,
        /** Sync of memory no live mapping covers. */
        SYNC_NOT_MAPPED,
        /** Sync with another direction than the map. */
        SYNC_WRONG_DIRECTION,
        /** A device access to a buffer the CPU owns: synced for the CPU and not synced back for the device. */
        ACCESS_CPU_OWNED,
        /** A mapping used (or unmapped) before dma_mapping_error was asked about it. */
        MAPPING_ERROR_NOT_CHECKED,
        /** Mappings still live when their context closed. */
        LEAK,
        /** A device access through a memory region after it was deregistered. */
        ACCESS_AFTER_DEREGISTRATION,
        /** A send buffer the CPU changed between post and transmission. */
        SEND_BUFFER_CHANGED,
        /**
         * A device access to memory it may no longer (or never could) touch from its threads: the arena of a
         * registered or mapped segment was closed, or the segment is confined to another thread. The access
         * faulted (an error completion); no byte was read or written.
         */
        ACCESS_TO_UNREACHABLE_MEMORY
    }

    @Override
    public String toString() {
        StringWriter w = new StringWriter();
        PrintWriter p = new PrintWriter(w);
        p.println("DMA checker: " + kind + ": " + message);
        if (mappedAt != null) {
            p.print("  mapping: ");
            mappedAt.printStackTrace(p);
        }
        if (misusedAt != null) {
            p.print("  misuse: ");
            misusedAt.printStackTrace(p);
        }
        p.flush();
        return w.toString();
    }
}
