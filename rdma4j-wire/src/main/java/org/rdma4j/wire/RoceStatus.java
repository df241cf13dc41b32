// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

/**
 * Outcome of parsing a RoCEv2 packet: {@link #OK}, or the reason it is dropped. {@link RoceParser} keeps a
 * counter per value. TOO_SHORT, BAD_VERSION, UNKNOWN_OPCODE and BAD_ICRC are silent drops in rxe too (rxe_rcv).
 * BAD_LENGTH and BAD_PAD come with a good ICRC and readable headers: rxe's responder answers such an RC request
 * with NAK invalid request (rxe_resp_check_length), so an engine may do the same or drop it (UC, UD, responses).
 */
public enum RoceStatus {
    /** Valid: headers, lengths, pad and ICRC check out. */
    OK,
    /** Shorter than BTH + the opcode's extension headers + pad + ICRC (rxe_rcv / hdr_check: paylen too small). */
    TOO_SHORT,
    /** BTH TVer is not 0 (IBA 9.2: only version 0 is defined; rxe_recv.c hdr_check "bad tver"). */
    BAD_VERSION,
    /** An opcode rxe has no rxe_opcode[] entry for (RD, XRC, reserved values). */
    UNKNOWN_OPCODE,
    /**
     * Lengths that no conforming sender produces: a packet length that is not a multiple of 4 (IBA 9.2: the
     * payload is padded to a 4-byte multiple), a payload on an opcode that carries none, an empty FIRST,
     * MIDDLE or LAST, or an ATOMIC_WRITE payload other than 8 bytes.
     */
    BAD_LENGTH,
    /** PadCnt larger than the payload, or pad on a FIRST/MIDDLE packet (IBA 9.2 PadCnt; rxe_resp.c rxe_resp_check_length). */
    BAD_PAD,
    /** The ICRC does not match (rxe_icrc_check). */
    BAD_ICRC,
    /** A valid RoCEv2 congestion notification packet (A17.9.3): rxe has no opcode for it and drops it. */
    CNP,
    /** Full IP packets only: not IPv4 without options or IPv6, a fragment, a bad IPv4 header checksum, a bad
     * (non-zero) UDP checksum or inconsistent lengths. */
    BAD_IP,
    /** Full IP packets only: not UDP, or not to UDP port 4791. */
    NOT_ROCE
}
