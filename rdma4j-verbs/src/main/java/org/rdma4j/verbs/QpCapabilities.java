// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/**
 * Queue-pair capabilities (ibv_qp_cap): requested at creation, returned as granted (providers may
 * round up).
 *
 * @param maxSendWr     outstanding send requests
 * @param maxRecvWr     outstanding receive requests (ignored with an SRQ)
 * @param maxSendSge    scatter/gather entries per send request
 * @param maxRecvSge    scatter entries per receive request
 * @param maxInlineData bytes of inline data per send request
 */
public record QpCapabilities(int maxSendWr, int maxRecvWr, int maxSendSge, int maxRecvSge, int maxInlineData) {
}
