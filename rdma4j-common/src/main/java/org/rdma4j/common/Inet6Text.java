// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common;

/**
 * IPv6 addresses, and GIDs (which are IPv6 addresses), as text the way glibc's {@code inet_ntop(AF_INET6)}
 * writes them ({@code resolv/inet_ntop.c}, {@code inet_ntop6}), which is what rdma-core's tools print: groups in
 * lower-case hex without leading zeros, the first longest run of two or more zero groups as {@code ::} (RFC 5952
 * §4.2), and an IPv4-mapped ({@code ::ffff:a.b.c.d}) or IPv4-compatible ({@code ::a.b.c.d}) address with a dotted
 * quad. The project's one formatter of this text: the wire codecs' GIDs, the pingpong tools' output, and the
 * addresses in RoCE link messages all use it.
 */
public final class Inet6Text {
    private Inet6Text() {
    }

    /**
     * {@return the address as {@code inet_ntop(AF_INET6)} writes it, e.g. {@code fe80::200:ff:fe00:1},
     * {@code ::ffff:192.168.1.10}, {@code ::}}
     *
     * @param a the 16 bytes of the address, network order
     * @throws IllegalArgumentException if {@code a} is not 16 bytes long
     */
    public static String ntop(byte[] a) {
        if (a.length != 16) {
            throw new IllegalArgumentException("an IPv6 address has 16 bytes, not " + a.length);
        }
        int[] w = new int[8];
        for (int i = 0; i < 8; i++) {
            w[i] = (a[2 * i] & 0xFF) << 8 | a[2 * i + 1] & 0xFF;
        }
        int bestBase = -1;
        int bestLen = 0;
        int curBase = -1;
        int curLen = 0;
        for (int i = 0; i < 8; i++) {
            if (w[i] == 0) {
                if (curBase < 0) {
                    curBase = i;
                    curLen = 1;
                } else {
                    curLen++;
                }
            } else if (curBase >= 0) {
                if (bestBase < 0 || curLen > bestLen) {
                    bestBase = curBase;
                    bestLen = curLen;
                }
                curBase = -1;
            }
        }
        if (curBase >= 0 && (bestBase < 0 || curLen > bestLen)) {
            bestBase = curBase;
            bestLen = curLen;
        }
        if (bestBase >= 0 && bestLen < 2) {
            bestBase = -1;
        }
        StringBuilder sb = new StringBuilder(39);
        for (int i = 0; i < 8; i++) {
            if (bestBase >= 0 && i >= bestBase && i < bestBase + bestLen) {
                if (i == bestBase) {
                    sb.append(':');
                }
                continue;
            }
            if (i != 0) {
                sb.append(':');
            }
            if (i == 6 && bestBase == 0 && (bestLen == 6 || (bestLen == 5 && w[5] == 0xFFFF))) {
                sb.append(w[6] >>> 8).append('.').append(w[6] & 0xFF).append('.').append(w[7] >>> 8).append('.')
                        .append(w[7] & 0xFF);
                return sb.toString();
            }
            sb.append(Integer.toHexString(w[i]));
        }
        if (bestBase >= 0 && bestBase + bestLen == 8) {
            sb.append(':');
        }
        return sb.toString();
    }
}
