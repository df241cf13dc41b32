// SPDX-License-Identifier: Apache-2.0
/** The DMA-mapping layer. */
package org.rdma4j.dma;
