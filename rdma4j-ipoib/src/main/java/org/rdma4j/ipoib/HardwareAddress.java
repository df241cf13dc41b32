// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import org.rdma4j.verbs.Gid;

/**
 * The 20-byte IPoIB link-layer address (RFC 4391 section 9, address resolution): one octet of flags (reserved, zero in
 * datagram mode; RFC 4755 uses the top bit to offer connected mode), the 24-bit QP number, then the
 * port GID.
 *
 * @param flags the first octet
 * @param qpn   the QP number (24 bits)
 * @param gid   the GID
 */
public record HardwareAddress(int flags, int qpn, Gid gid) {
    /** Length on the wire. */
    public static final int BYTES = 20;
    /**
     * RFC 4755 section 5: the top bit of the flags octet, "connected mode supported" (Linux {@code IPOIB_FLAGS_RC}):
     * the interface accepts RC connections (the CM service of its UD QPN).
     */
    public static final int FLAG_RC = 0x80;
    private static final ValueLayout.OfInt INT_BE = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfLong LONG_BE = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    /** Validates the field ranges. */
    public HardwareAddress {
        if ((flags & ~0xFF) != 0 || (qpn & ~0xFF_FFFF) != 0 || gid == null) {
            throw new IllegalArgumentException("flags " + flags + ", qpn " + qpn + ", gid " + gid);
        }
    }

    /**
     * Writes the 20-byte link address (flags and QPN, then the GID).
     *
     * @param seg where to write
     * @param offset offset of the 20 bytes
     */
    public void encode(MemorySegment seg, long offset) {
        seg.set(INT_BE, offset, (flags << 24) | qpn);
        seg.set(LONG_BE, offset + 4, gid.hi());
        seg.set(LONG_BE, offset + 12, gid.lo());
    }

    /**
     * {@return the address}
     *
     * @param seg    where to read
     * @param offset offset of the 20 bytes
     */
    public static HardwareAddress decode(MemorySegment seg, long offset) {
        int w = seg.get(INT_BE, offset);
        return new HardwareAddress(w >>> 24, w & 0xFF_FFFF, new Gid(seg.get(LONG_BE, offset + 4), seg.get(LONG_BE, offset + 12)));
    }

    /**
     * {@return whether the bytes there equal this address (no allocation)}
     *
     * @param seg    where to read
     * @param offset offset of the 20 bytes
     */
    public boolean matches(MemorySegment seg, long offset) {
        return seg.get(INT_BE, offset) == ((flags << 24) | qpn) && seg.get(LONG_BE, offset + 4) == gid.hi()
                && seg.get(LONG_BE, offset + 12) == gid.lo();
    }

    /** {@return as Linux prints an IPoIB address: 20 colon-separated hex octets} */
    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder(59);
        long[] words = {((long) flags << 24) | qpn, gid.hi(), gid.lo()};
        int[] sizes = {4, 8, 8};
        for (int w = 0; w < 3; w++) {
            for (int i = sizes[w] - 1; i >= 0; i--) {
                if (!sb.isEmpty()) {
                    sb.append(':');
                }
                String h = Long.toHexString((words[w] >>> (8 * i)) & 0xFF);
                sb.append(h.length() == 1 ? "0" : "").append(h);
            }
        }
        return sb.toString();
    }
}
