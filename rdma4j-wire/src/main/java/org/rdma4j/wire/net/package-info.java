// SPDX-License-Identifier: Apache-2.0
/**
 * UDP and raw IP sockets through FFM for the RoCEv2 link (IBA Annex A17: UDP destination port 4791).
 *
 * <p>Java's own sockets cannot do what interop with Linux rdma_rxe needs, so this package calls libc
 * directly: {@link org.rdma4j.wire.net.UdpSocket} (IPv4/IPv6, batches through sendmmsg/recvmmsg,
 * DF, traffic class, hop limit, zero-checksum IPv6 receive), {@link org.rdma4j.wire.net.RawIpv4Socket}
 * (IPv4 with an Identification field of our choosing) and {@link org.rdma4j.wire.net.Ipv4IdSolver}
 * (recovers the sender's IPv4 Identification from the ICRC). Why each exists is in docs/roce-udp.md.
 * The libc calls are rdma4j-native's ({@code org.rdma4j.libc}); callers need
 * {@code --enable-native-access=org.rdma4j.libc} (or ALL-UNNAMED on the class path).
 */
package org.rdma4j.wire.net;
