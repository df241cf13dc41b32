// SPDX-License-Identifier: Apache-2.0
/**
 * RoCEv2 wire format (IBA Annex A17), byte-compatible with Linux rdma_rxe.
 *
 * <ul>
 * <li>Header flyweights that read and write fields in place in a {@link java.lang.foreign.MemorySegment}
 * (native or heap) at any offset, with no allocation: {@link org.rdma4j.wire.Ipv4Header},
 * {@link org.rdma4j.wire.Ipv6Header}, {@link org.rdma4j.wire.UdpHeader}, {@link org.rdma4j.wire.Bth},
 * {@link org.rdma4j.wire.Reth}, {@link org.rdma4j.wire.Aeth}, {@link org.rdma4j.wire.AtomicEth},
 * {@link org.rdma4j.wire.AtomicAckEth}, {@link org.rdma4j.wire.ImmDt}, {@link org.rdma4j.wire.Ieth},
 * {@link org.rdma4j.wire.Deth}, {@link org.rdma4j.wire.Feth}.</li>
 * <li>{@link org.rdma4j.wire.RoceOpcode}: which headers each RC/UC/UD opcode carries, in what order, and its
 * position in a message (as rxe_opcode.c).</li>
 * <li>{@link org.rdma4j.wire.Icrc}: the invariant CRC exactly as rxe computes it, and the IPv4
 * identification solver for receivers that cannot see the IP header.</li>
 * <li>{@link org.rdma4j.wire.RocePacket} (build and wrap a packet) and {@link org.rdma4j.wire.RoceParser}
 * (validate, with a counter per {@link org.rdma4j.wire.RoceStatus drop reason}).</li>
 * <li>{@link org.rdma4j.wire.Gids}, {@link org.rdma4j.wire.Roce#sourcePort(int)}: GIDs as IP addresses and the
 * per-QP UDP source port; {@link org.rdma4j.wire.PcapWriter} for captures Wireshark reads.</li>
 * </ul>
 *
 * <p>An engine sending a packet:
 * <pre>{@code
 * int n = pkt.build(buf, 0, RoceOpcode.RC | RoceOpcode.WRITE_ONLY, len);   // headers zeroed, PadCnt set
 * pkt.bth().destQp(qpn).psn(psn).ackReq(true);
 * pkt.reth().va(va).rkey(rkey).dmaLength(len);
 * MemorySegment.copy(src, srcOff, buf, pkt.payloadOffset(), len);
 * pkt.seal(icrc, ip);          // ip: PseudoHeader with addresses, ports, IPv4 ID 0 (DF, unconnected socket)
 * channel.send(buf, 0, n);     // the UDP payload
 * }</pre>
 * and receiving one:
 * <pre>{@code
 * if (parser.parse(pkt, buf, 0, n, ip) == RoceStatus.OK) {   // ip: addresses and ports of the datagram
 *     int psn = pkt.bth().psn();
 *     if (pkt.has(RoceOpcode.M_RETH)) { long va = pkt.reth().va(); ... }
 *     // payload: pkt.payloadOffset(), pkt.payloadLength()
 * }
 * }</pre>
 * Everything here is single-threaded by design: one {@link org.rdma4j.wire.Icrc}, parser and packet per thread.
 */
package org.rdma4j.wire;
