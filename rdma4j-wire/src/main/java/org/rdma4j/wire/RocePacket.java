// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.lang.foreign.MemorySegment;

import static org.rdma4j.wire.RoceOpcode.M_ACK;
import static org.rdma4j.wire.RoceOpcode.M_AETH;
import static org.rdma4j.wire.RoceOpcode.M_ATMACK;
import static org.rdma4j.wire.RoceOpcode.M_ATMETH;
import static org.rdma4j.wire.RoceOpcode.M_ATOMIC_WRITE;
import static org.rdma4j.wire.RoceOpcode.M_DETH;
import static org.rdma4j.wire.RoceOpcode.M_END;
import static org.rdma4j.wire.RoceOpcode.M_FETH;
import static org.rdma4j.wire.RoceOpcode.M_IETH;
import static org.rdma4j.wire.RoceOpcode.M_IMMDT;
import static org.rdma4j.wire.RoceOpcode.M_PAYLOAD;
import static org.rdma4j.wire.RoceOpcode.M_RETH;
import static org.rdma4j.wire.RoceOpcode.M_START;

/**
 * A RoCEv2 packet in memory as a UDP socket delivers or sends it: BTH, extension headers, payload, pad
 * and ICRC ({@code udp length - 8} bytes). A reusable flyweight: {@link #wrap} checks a received packet's
 * structure and positions the header views, {@link #build} lays out a packet to send; in both cases the
 * header flyweights ({@link #bth()}, {@link #reth()} ...) then read and write fields in place, and nothing
 * is allocated. The ICRC is checked by {@link RoceParser} and written by {@link #seal}. Not thread-safe.
 *
 * <p>Receiving: {@code parser.parse(pkt, seg, off, len, ip) == OK}, then read {@code pkt.bth().psn()},
 * {@code pkt.reth().va()}, the payload at {@link #payloadOffset()} for {@link #payloadLength()} bytes.
 * Sending: {@code int n = pkt.build(seg, off, opcode, payloadLen)}, set fields, copy the payload to
 * {@link #payloadOffset()}, {@code pkt.seal(icrc, ip)}, send n bytes.
 */
public final class RocePacket {
    /** Creates a {@code RocePacket}. */
    public RocePacket() {
    }

    private final Bth bth = new Bth();
    private final Reth reth = new Reth();
    private final AtomicEth atomicEth = new AtomicEth();
    private final Aeth aeth = new Aeth();
    private final AtomicAckEth atomicAckEth = new AtomicAckEth();
    private final ImmDt immDt = new ImmDt();
    private final Ieth ieth = new Ieth();
    private final Deth deth = new Deth();
    private final Feth feth = new Feth();

    private MemorySegment seg;
    private long off;
    private int length;
    private int opcode = -1;
    private int mask;
    private int headerLength;
    private int payloadLength;
    private int pad;
    private boolean valid;

    /**
     * Checks the structure of a received packet (everything but the ICRC) and, if it is valid, positions
     * the header views. Never throws on any content of the bytes.
     *
     * @param segment memory holding the UDP payload
     * @param offset  offset of the BTH
     * @param len     UDP payload length (BTH through ICRC)
     * @return {@link RoceStatus#OK}, {@link RoceStatus#CNP} for a valid congestion notification, or why the
     *         packet is dropped; after OK, CNP, BAD_LENGTH and BAD_PAD the headers can be read ({@link #isValid()})
     * @throws IndexOutOfBoundsException if [offset, offset + len) is not inside the segment (a caller bug)
     */
    public RoceStatus wrap(MemorySegment segment, long offset, int len) {
        if (len < 0 || offset < 0 || offset > segment.byteSize() - len) {
            throw new IndexOutOfBoundsException("packet [" + offset + ", +" + len + ") outside a segment of "
                    + segment.byteSize() + " bytes");
        }
        valid = false;
        seg = segment;
        off = offset;
        length = len;
        if (len < Icrc.MIN_LENGTH) {
            opcode = -1;
            return RoceStatus.TOO_SHORT;
        }
        bth.wrap(segment, offset);
        opcode = bth.opcode();
        pad = bth.padCount();
        if (bth.tver() != Bth.TVER) {
            return RoceStatus.BAD_VERSION;
        }
        if (opcode == RoceOpcode.CNP) {
            // A17.9.3: BTH, 16 reserved bytes, ICRC; nothing else is a CNP
            mask = 0;
            headerLength = Bth.LENGTH + RoceOpcode.CNP_BODY_LENGTH;
            payloadLength = 0;
            if (len < headerLength + Icrc.LENGTH) {
                return RoceStatus.TOO_SHORT;
            }
            if (len != headerLength + Icrc.LENGTH || pad != 0) {
                return RoceStatus.BAD_LENGTH;
            }
            valid = true;
            return RoceStatus.CNP;
        }
        mask = RoceOpcode.mask(opcode);
        if (mask == 0) {
            return RoceStatus.UNKNOWN_OPCODE;
        }
        headerLength = RoceOpcode.headerLength(opcode);
        if (len < headerLength + Icrc.LENGTH) {
            return RoceStatus.TOO_SHORT;
        }

        // From here on the headers are all there: position them, so that for a length or pad error an RC
        // responder can still read the BTH and answer NAK invalid request, as rxe_resp_check_length does.
        int payPlusPad = len - headerLength - Icrc.LENGTH;
        payloadLength = Math.max(0, payPlusPad - pad);
        position();
        valid = true;
        return lengthRules(len, payPlusPad);
    }

    /** The length and pad rules of an opcode whose headers fit (see {@link RoceStatus#BAD_LENGTH}, {@link RoceStatus#BAD_PAD}). */
    private RoceStatus lengthRules(int len, int payPlusPad) {
        if ((len & 3) != 0) {
            return RoceStatus.BAD_LENGTH; // headers and ICRC are word multiples and payload + pad is one too
        }
        if (pad > payPlusPad) {
            return RoceStatus.BAD_PAD;
        }
        if ((mask & M_PAYLOAD) == 0) {
            if (payPlusPad != 0) {
                return RoceStatus.BAD_LENGTH;
            }
        } else if ((mask & M_END) == 0 && pad != 0) {
            // only the last packet of a message may be short, so only it has pad (IBA 9.2 PadCnt;
            // rxe_resp.c rxe_resp_check_length: FIRST/MIDDLE payload must equal the MTU, a multiple of 4)
            return RoceStatus.BAD_PAD;
        } else if ((mask & (M_START | M_END)) != (M_START | M_END) && payloadLength == 0) {
            // FIRST/MIDDLE carry exactly the path MTU and LAST at least one byte (a message of k*MTU bytes
            // ends with a full LAST; one that fits in a packet is ONLY; rxe_resp_check_length)
            return RoceStatus.BAD_LENGTH;
        } else if ((mask & M_ATOMIC_WRITE) != 0 && payloadLength != 8) {
            return RoceStatus.BAD_LENGTH; // ATOMIC_WRITE writes one 8-byte word
        }
        return RoceStatus.OK;
    }

    /**
     * Lays out a packet to send: zeroes the headers, sets BTH OpCode and PadCnt, TVer 0 and P_Key 0xFFFF, zeroes
     * the pad, and positions the header views for the caller to fill. Then copy the payload to
     * {@link #payloadOffset()} and call {@link #seal}.
     *
     * @param segment       memory to build in
     * @param offset        where the BTH goes
     * @param opcode        a {@link RoceOpcode#known known} opcode or {@link RoceOpcode#CNP}
     * @param payloadLength payload bytes (0 for opcodes without payload)
     * @return the UDP payload length: BTH through ICRC
     * @throws IllegalArgumentException for an unknown opcode or a payload length the opcode cannot carry
     * @throws IndexOutOfBoundsException if the packet does not fit in the segment
     */
    public int build(MemorySegment segment, long offset, int opcode, int payloadLength) {
        int op = opcode & 0xFF;
        int m = RoceOpcode.mask(op);
        int hdr;
        if (op == RoceOpcode.CNP) {
            hdr = Bth.LENGTH + RoceOpcode.CNP_BODY_LENGTH;
        } else if (m == 0 || op != opcode) {
            throw new IllegalArgumentException("unknown opcode 0x" + Integer.toHexString(opcode));
        } else {
            hdr = RoceOpcode.headerLength(op);
        }
        if (payloadLength < 0 || payloadLength > 0xFFFF || payloadLength != 0 && (m & M_PAYLOAD) == 0) {
            throw new IllegalArgumentException(RoceOpcode.name(op) + " cannot carry " + payloadLength + " payload bytes");
        }
        int p = -payloadLength & 3;
        if (p != 0 && (m & M_END) == 0) {
            throw new IllegalArgumentException(RoceOpcode.name(op) + " is not a last packet: its payload must be a"
                    + " multiple of 4 (the path MTU), got " + payloadLength);
        }
        int len = hdr + payloadLength + p + Icrc.LENGTH;
        if (offset < 0 || offset > segment.byteSize() - len) {
            throw new IndexOutOfBoundsException("packet of " + len + " bytes at " + offset + " does not fit in "
                    + segment.byteSize() + " bytes");
        }
        for (int i = 0; i < hdr; i += 4) {
            Be.i32(segment, offset + i, 0);
        }
        for (int i = 0; i < p; i++) {
            Be.u8(segment, offset + hdr + payloadLength + i, 0);
        }
        seg = segment;
        off = offset;
        length = len;
        this.opcode = op;
        mask = m;
        headerLength = hdr;
        this.payloadLength = payloadLength;
        pad = p;
        bth.wrap(segment, offset).opcode(op).padCount(p).pkey(Bth.DEFAULT_PKEY);
        position();
        valid = true;
        return len;
    }

    /**
     * Writes the pad as zeros and the ICRC (little-endian) of a built packet whose fields and payload are
     * in place.
     *
     * @param icrc a calculator (one per thread)
     * @param ip   the IP/UDP fields the packet will be sent with (the IPv4 ID the kernel will write: 0 with DF)
     * @return the ICRC value
     */
    public int seal(Icrc icrc, PseudoHeader ip) {
        requireValid();
        long p = off + headerLength + payloadLength;
        for (int i = 0; i < pad; i++) {
            Be.u8(seg, p + i, 0);
        }
        return icrc.store(ip, seg, off, length);
    }

    private void position() {
        if ((mask & M_DETH) != 0) {
            deth.wrap(seg, off + RoceOpcode.offset(opcode, M_DETH));
        }
        if ((mask & M_FETH) != 0) {
            feth.wrap(seg, off + RoceOpcode.offset(opcode, M_FETH));
        }
        if ((mask & M_RETH) != 0) {
            reth.wrap(seg, off + RoceOpcode.offset(opcode, M_RETH));
        }
        if ((mask & M_ATMETH) != 0) {
            atomicEth.wrap(seg, off + RoceOpcode.offset(opcode, M_ATMETH));
        }
        if ((mask & M_AETH) != 0) {
            aeth.wrap(seg, off + RoceOpcode.offset(opcode, M_AETH));
        }
        if ((mask & M_ATMACK) != 0) {
            atomicAckEth.wrap(seg, off + RoceOpcode.offset(opcode, M_ATMACK));
        }
        if ((mask & M_IMMDT) != 0) {
            immDt.wrap(seg, off + RoceOpcode.offset(opcode, M_IMMDT));
        }
        if ((mask & M_IETH) != 0) {
            ieth.wrap(seg, off + RoceOpcode.offset(opcode, M_IETH));
        }
    }

    private void requireValid() {
        if (!valid) {
            throw new IllegalStateException("no packet headers: wrap() found none (too short, bad version, unknown opcode) and build() was not called");
        }
    }

    private <T> T header(T view, int m, String name) {
        requireValid();
        if ((mask & m) == 0) {
            throw new IllegalStateException(RoceOpcode.name(opcode) + " carries no " + name);
        }
        return view;
    }

    /**
     * {@return whether the headers can be read: the last wrap returned OK, CNP, BAD_LENGTH or BAD_PAD (its
     * headers are all present), or build succeeded}
     *
     */
    public boolean isValid() {
        return valid;
    }

    /** {@return the BTH view} */
    public Bth bth() {
        requireValid();
        return bth;
    }

    /**
     * {@return the RETH view}
     *
     * @throws IllegalStateException if the opcode carries none
     */
    public Reth reth() {
        return header(reth, M_RETH, "RETH");
    }

    /**
     * {@return the AtomicETH view}
     *
     * @throws IllegalStateException if the opcode carries none
     */
    public AtomicEth atomicEth() {
        return header(atomicEth, M_ATMETH, "AtomicETH");
    }

    /**
     * {@return the AETH view}
     *
     * @throws IllegalStateException if the opcode carries none
     */
    public Aeth aeth() {
        return header(aeth, M_AETH, "AETH");
    }

    /**
     * {@return the AtomicAckETH view}
     *
     * @throws IllegalStateException if the opcode carries none
     */
    public AtomicAckEth atomicAckEth() {
        return header(atomicAckEth, M_ATMACK, "AtomicAckETH");
    }

    /**
     * {@return the ImmDt view}
     *
     * @throws IllegalStateException if the opcode carries none
     */
    public ImmDt immDt() {
        return header(immDt, M_IMMDT, "ImmDt");
    }

    /**
     * {@return the IETH view}
     *
     * @throws IllegalStateException if the opcode carries none
     */
    public Ieth ieth() {
        return header(ieth, M_IETH, "IETH");
    }

    /**
     * {@return the DETH view}
     *
     * @throws IllegalStateException if the opcode carries none
     */
    public Deth deth() {
        return header(deth, M_DETH, "DETH");
    }

    /**
     * {@return the FETH view}
     *
     * @throws IllegalStateException if the opcode carries none
     */
    public Feth feth() {
        return header(feth, M_FETH, "FETH");
    }

    /** {@return the segment last wrapped or built in} */
    public MemorySegment segment() {
        return seg;
    }

    /** {@return the offset of the BTH in the segment} */
    public long offset() {
        return off;
    }

    /** {@return the UDP payload length: BTH through ICRC} */
    public int length() {
        return length;
    }

    /** {@return the BTH opcode, -1 if the packet was too short to have one} */
    public int opcode() {
        return opcode;
    }

    /** {@return the opcode's {@link RoceOpcode} M_ bits (0 for CNP)} */
    public int mask() {
        return mask;
    }

    /**
     * {@return whether the opcode has any of them}
     *
     * @param m M_ bits
     */
    public boolean has(int m) {
        return (mask & m) != 0;
    }

    /** {@return whether this is a response (ACK, atomic ACK, READ response)} */
    public boolean isResponse() {
        return (mask & M_ACK) != 0;
    }

    /** {@return BTH + extension headers, in bytes} */
    public int headerLength() {
        return headerLength;
    }

    /** {@return the payload's offset in the segment} */
    public long payloadOffset() {
        return off + headerLength;
    }

    /** {@return payload bytes (without pad)} */
    public int payloadLength() {
        return payloadLength;
    }

    /** {@return pad bytes between payload and ICRC} */
    public int padCount() {
        return pad;
    }

    /** {@return the ICRC's offset in the segment} */
    public long icrcOffset() {
        return off + length - Icrc.LENGTH;
    }

    /** {@return the stored ICRC (read little-endian)} */
    public int storedIcrc() {
        requireValid();
        return Icrc.stored(seg, off, length);
    }

    /**
     * {@return the header's offset in the segment, -1 if the opcode does not carry it}
     *
     * @param header one M_ header bit
     */
    public long headerOffset(int header) {
        int o = RoceOpcode.offset(opcode, header);
        return o < 0 ? -1 : off + o;
    }

    /** {@return a slice over the payload (allocates: for tests and tools, not the data path)} */
    public MemorySegment payload() {
        requireValid();
        return seg.asSlice(payloadOffset(), payloadLength);
    }

    @Override
    public String toString() {
        if (!valid) {
            return "RocePacket(invalid, opcode=" + RoceOpcode.name(opcode) + ", len=" + length + ")";
        }
        return RoceOpcode.name(opcode) + " qpn=0x" + Integer.toHexString(bth.destQp()) + " psn=0x"
                + Integer.toHexString(bth.psn()) + (bth.ackReq() ? " A" : "") + " payload=" + payloadLength
                + " pad=" + pad;
    }
}
