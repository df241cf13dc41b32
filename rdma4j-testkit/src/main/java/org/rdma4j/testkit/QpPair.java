// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit;

/**
 * Two endpoints on the two devices of the fabric, connected to each other (RC/UC) or both in RTS
 * (UD).
 *
 * @param local  the side on device 0
 * @param remote the side on device 1
 */
public record QpPair(Endpoint local, Endpoint remote) {
}
