// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * ARP over IPoIB (RFC 826 with the sizes of RFC 4391 section 9): hardware type 32 (INFINIBAND),
 * protocol type 0x0800, hardware length 20, protocol length 4, operation, then sender hardware and
 * protocol address and target hardware and protocol address: 56 bytes. A flyweight over a segment.
 */
public final class ArpPacket {
    /** Creates an {@code ArpPacket}. */
    public ArpPacket() {
    }

    /** Length of an IPoIB ARP packet. */
    public static final int BYTES = 8 + 2 * (HardwareAddress.BYTES + 4);
    /** ARP hardware type of InfiniBand (RFC 4391 section 9; IANA ARP parameters). */
    public static final int HTYPE_INFINIBAND = 32;
    /** ARP request. */
    public static final int OP_REQUEST = 1;
    /** ARP reply. */
    public static final int OP_REPLY = 2;

    private static final ValueLayout.OfShort SHORT_BE = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfInt INT_BE = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    static final int SHA = 8;
    static final int SPA = SHA + HardwareAddress.BYTES;
    static final int THA = SPA + 4;
    static final int TPA = THA + HardwareAddress.BYTES;

    /** Why a packet is not a usable IPoIB ARP packet. */
    public enum Verdict {
        /** Usable. */
        OK,
        /** Shorter than 56 bytes. */
        TRUNCATED,
        /** Hardware type is not 32, or the hardware length not 20. */
        BAD_HARDWARE,
        /** Protocol is not IPv4 with 4-byte addresses. */
        BAD_PROTOCOL,
        /** Operation neither request nor reply. */
        BAD_OPERATION
    }

    private MemorySegment seg;
    private long base;

    /**
     * Points the flyweight at a packet.
     *
     * @param segment buffer
     * @param offset  where the ARP packet starts
     * @return this
     */
    public ArpPacket wrap(MemorySegment segment, long offset) {
        this.seg = segment;
        this.base = offset;
        return this;
    }

    /**
     * {@return whether the packet is an IPoIB ARP packet we can use}
     *
     * @param length bytes available from the offset
     */
    public Verdict validate(int length) {
        if (length < BYTES) {
            return Verdict.TRUNCATED;
        }
        if (u16(0) != HTYPE_INFINIBAND || u8(4) != HardwareAddress.BYTES) {
            return Verdict.BAD_HARDWARE;
        }
        if (u16(2) != Ipoib.TYPE_IPV4 || u8(5) != 4) {
            return Verdict.BAD_PROTOCOL;
        }
        int op = operation();
        return op == OP_REQUEST || op == OP_REPLY ? Verdict.OK : Verdict.BAD_OPERATION;
    }

    /**
     * Writes a whole packet.
     *
     * @param op  request or reply
     * @param sha sender hardware address
     * @param spa sender IPv4 address
     * @param tha target hardware address (zero for a request: RFC 826 leaves it unknown)
     * @param tpa target IPv4 address
     * @return this
     */
    public ArpPacket write(int op, HardwareAddress sha, int spa, HardwareAddress tha, int tpa) {
        seg.set(SHORT_BE, base, (short) HTYPE_INFINIBAND);
        seg.set(SHORT_BE, base + 2, (short) Ipoib.TYPE_IPV4);
        seg.set(ValueLayout.JAVA_BYTE, base + 4, (byte) HardwareAddress.BYTES);
        seg.set(ValueLayout.JAVA_BYTE, base + 5, (byte) 4);
        seg.set(SHORT_BE, base + 6, (short) op);
        sha.encode(seg, base + SHA);
        seg.set(INT_BE, base + SPA, spa);
        if (tha != null) {
            tha.encode(seg, base + THA);
        } else {
            seg.asSlice(base + THA, HardwareAddress.BYTES).fill((byte) 0);
        }
        seg.set(INT_BE, base + TPA, tpa);
        return this;
    }

    /** {@return the operation} */
    public int operation() {
        return u16(6);
    }

    /** {@return the sender's hardware address} */
    public HardwareAddress senderHardware() {
        return HardwareAddress.decode(seg, base + SHA);
    }

    /** {@return the sender's IPv4 address} */
    public int senderIp() {
        return seg.get(INT_BE, base + SPA);
    }

    /** {@return the target's hardware address} */
    public HardwareAddress targetHardware() {
        return HardwareAddress.decode(seg, base + THA);
    }

    /** {@return the target's IPv4 address} */
    public int targetIp() {
        return seg.get(INT_BE, base + TPA);
    }

    private int u16(long off) {
        return seg.get(SHORT_BE, base + off) & 0xFFFF;
    }

    private int u8(long off) {
        return seg.get(ValueLayout.JAVA_BYTE, base + off) & 0xFF;
    }
}
