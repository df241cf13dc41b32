/** The DMA-mapping layer. */
package org.rdma4j.dma;
