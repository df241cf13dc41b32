// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

import java.lang.foreign.MemorySegment;

/**
 * Memory from {@link Dma#allocCoherent}: the CPU and the device see the same bytes at all times, so no
 * sync is ever needed (dma_alloc_coherent). For rings and other long-lived shared structures; free it
 * with {@link Dma#freeCoherent}.
 *
 * @param cpu        the CPU's view
 * @param dmaAddress the address the device uses for the first byte
 */
public record CoherentBuffer(MemorySegment cpu, long dmaAddress) {
}
