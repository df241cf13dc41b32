// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

import java.net.InetAddress;
import java.net.UnknownHostException;

/**
 * A 128-bit global identifier (ibv_gid), held as two big-endian longs.
 *
 * @param hi the first 8 bytes (subnet prefix)
 * @param lo the last 8 bytes (interface id)
 */
public record Gid(long hi, long lo) {
    /** The all-zero GID. */
    public static final Gid ZERO = new Gid(0, 0);

    /**
     * {@return the GID}
     *
     * @param bytes 16 bytes in network order
     */
    public static Gid of(byte[] bytes) {
        if (bytes.length != 16) {
            throw new VerbsException(Errno.EINVAL, "GID must be 16 bytes, got " + bytes.length);
        }
        long hi = 0;
        long lo = 0;
        for (int i = 0; i < 8; i++) {
            hi = (hi << 8) | (bytes[i] & 0xFF);
            lo = (lo << 8) | (bytes[i + 8] & 0xFF);
        }
        return new Gid(hi, lo);
    }

    /**
     * {@return the RoCEv2 GID: the IPv6 address, or ::ffff:a.b.c.d for IPv4}
     *
     * @param address an IPv4 or IPv6 address
     */
    public static Gid ofInetAddress(InetAddress address) {
        byte[] a = address.getAddress();
        if (a.length == 16) {
            return of(a);
        }
        return new Gid(0, 0x0000_FFFF_0000_0000L | (((a[0] & 0xFFL) << 24) | ((a[1] & 0xFFL) << 16) | ((a[2] & 0xFFL) << 8) | (a[3] & 0xFFL)));
    }

    /** {@return 16 bytes in network order} */
    public byte[] toBytes() {
        byte[] b = new byte[16];
        for (int i = 0; i < 8; i++) {
            b[i] = (byte) (hi >>> (56 - 8 * i));
            b[i + 8] = (byte) (lo >>> (56 - 8 * i));
        }
        return b;
    }

    /** {@return true for an IPv4-mapped GID (::ffff:a.b.c.d)} */
    public boolean isIpv4Mapped() {
        return hi == 0 && (lo >>> 32) == 0xFFFF;
    }

    /**
     * {@return whether this is a multicast GID: ff00::/8, or an IPv4-mapped address in 224.0.0.0/4 (the kernel's
     * rdma_is_multicast_addr, which RoCEv2 uses for IPv4 multicast groups)}
     *
     */
    public boolean isMulticast() {
        if ((hi >>> 56) == 0xFF) {
            return true;
        }
        return isIpv4Mapped() && ((lo >>> 28) & 0xF) == 0xE;
    }

    /** {@return the IP address this RoCEv2 GID stands for} */
    public InetAddress toInetAddress() {
        try {
            if (isIpv4Mapped()) {
                byte[] b = toBytes();
                return InetAddress.getByAddress(new byte[] {b[12], b[13], b[14], b[15]});
            }
            return InetAddress.getByAddress(toBytes());
        } catch (UnknownHostException e) {
            throw new IllegalStateException(e);
        }
    }

    /** {@return the GID as ibv_devinfo prints it: eight colon-separated groups of four hex digits} */
    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder(39);
        for (int i = 0; i < 8; i++) {
            long word = i < 4 ? hi : lo;
            int shift = 48 - 16 * (i % 4);
            if (i > 0) {
                sb.append(':');
            }
            String h = Long.toHexString((word >>> shift) & 0xFFFF);
            sb.append("0000", h.length(), 4).append(h);
        }
        return sb.toString();
    }
}
