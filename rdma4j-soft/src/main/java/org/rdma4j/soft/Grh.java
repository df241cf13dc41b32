// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/** The GRH area a UD receive buffer starts with ({@link Responder#GRH_BYTES}), as rxe fills it. */
final class Grh {
    private Grh() {
    }

    /**
     * The 40-byte GRH area: for an IPv4-mapped source GID, 20 zero bytes then the IPv4 header; else
     * the IPv6 header (rxe execute() copies the network header: union rdma_network_hdr), at the start of {@code grh}.
     */
    static void write(MemorySegment grh, Packet p) {
        grh.fill((byte) 0);
        int udpLen = 8 + 12 + 8 + (p.is(Opcodes.M_IMM) ? 4 : 0) + p.payloadLen + ((-p.payloadLen) & 3) + 4;
        if (p.sgid.isIpv4Mapped()) {
            byte[] s = p.sgid.toBytes();
            byte[] d = p.dgid.toBytes();
            grh.set(ValueLayout.JAVA_BYTE, 20, (byte) 0x45);
            grh.set(ValueLayout.JAVA_BYTE, 21, (byte) p.trafficClass);
            putShort(grh, 22, 20 + udpLen);
            grh.set(ValueLayout.JAVA_BYTE, 28, (byte) p.hopLimit);
            grh.set(ValueLayout.JAVA_BYTE, 29, (byte) 17);
            for (int i = 0; i < 4; i++) {
                grh.set(ValueLayout.JAVA_BYTE, 32 + i, s[12 + i]);
                grh.set(ValueLayout.JAVA_BYTE, 36 + i, d[12 + i]);
            }
            return;
        }
        int vtf = (6 << 28) | ((p.trafficClass & 0xFF) << 20);
        grh.set(ValueLayout.JAVA_INT_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN), 0, vtf);
        putShort(grh, 4, udpLen);
        grh.set(ValueLayout.JAVA_BYTE, 6, (byte) 17);
        grh.set(ValueLayout.JAVA_BYTE, 7, (byte) p.hopLimit);
        putLong(grh, 8, p.sgid.hi());
        putLong(grh, 16, p.sgid.lo());
        putLong(grh, 24, p.dgid.hi());
        putLong(grh, 32, p.dgid.lo());
    }

    private static void putShort(MemorySegment grh, long off, int v) {
        grh.set(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN), off, (short) v);
    }

    private static void putLong(MemorySegment grh, long off, long v) {
        grh.set(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN), off, v);
    }
}
