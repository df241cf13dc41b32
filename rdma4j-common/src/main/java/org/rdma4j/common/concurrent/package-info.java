// SPDX-License-Identifier: Apache-2.0
/**
 * Lock-free bounded rings with explicit memory ordering: {@link org.rdma4j.common.concurrent.SlotRing}
 * sequences fixed-size slots in a caller's {@code long[]} (a sequence word per slot, as Vyukov's bounded
 * queue and JCTools' array queues do), {@link org.rdma4j.common.concurrent.ArrayQueue} carries references
 * over one. Nothing is allocated per element.
 */
package org.rdma4j.common.concurrent;
