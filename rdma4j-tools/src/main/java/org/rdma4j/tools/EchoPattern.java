// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The pseudo-random contents of the pingpongs' {@code --verify} messages: message {@code n} of a run
 * with seed {@code s} is a fixed function of {@code (s, n, offset)}, so the client can write it before
 * a send and compare the echo with it afterwards without keeping a copy. Every message differs from
 * the one before in every 8-byte word, so an echo that carries a stale or misplaced packet of an
 * earlier message is caught, not only a corrupted byte.
 *
 * <p>rdma-core's servers receive into their buffer and send that same buffer back, so the echo is the
 * peer's memory after its receive: checking it checks the peer's reassembly of our multi-packet
 * messages (under loss and reordering too) and our reassembly of its reply.
 */
public final class EchoPattern {
    private static final ValueLayout.OfLong WORD = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final long GOLDEN = 0x9E3779B97F4A7C15L;

    private EchoPattern() {
    }

    /** SplitMix64's finaliser: a bijection that spreads every input bit over the word. */
    private static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    /** The 8 bytes of message {@code msg} at word {@code w} (little-endian order in memory). */
    private static long word(long seed, long msg, long w) {
        return mix(seed + msg * GOLDEN + mix(w + 1));
    }

    /**
     * Writes message {@code msg} into {@code len} bytes of {@code seg} from {@code off}.
     *
     * @param seg  the buffer
     * @param off  first byte
     * @param len  number of bytes
     * @param seed the run's seed
     * @param msg  the message number
     */
    public static void fill(MemorySegment seg, long off, long len, long seed, long msg) {
        long w = 0;
        long i = 0;
        for (; i + 8 <= len; i += 8, w++) {
            seg.set(WORD, off + i, word(seed, msg, w));
        }
        if (i < len) {
            long v = word(seed, msg, w);
            for (; i < len; i++, v >>>= 8) {
                seg.set(ValueLayout.JAVA_BYTE, off + i, (byte) v);
            }
        }
    }

    /**
     * Compares {@code len} bytes of {@code seg} from {@code off} with message {@code msg}.
     *
     * @param seg  the buffer
     * @param off  first byte
     * @param len  number of bytes
     * @param seed the run's seed
     * @param msg  the message number
     * @return the offset (from {@code off}) of the first byte that differs, or -1 if all are equal
     */
    public static long mismatch(MemorySegment seg, long off, long len, long seed, long msg) {
        long w = 0;
        long i = 0;
        for (; i + 8 <= len; i += 8, w++) {
            long diff = seg.get(WORD, off + i) ^ word(seed, msg, w);
            if (diff != 0) {
                return i + Long.numberOfTrailingZeros(diff) / 8;
            }
        }
        if (i < len) {
            long v = word(seed, msg, w);
            for (; i < len; i++, v >>>= 8) {
                if (seg.get(ValueLayout.JAVA_BYTE, off + i) != (byte) v) {
                    return i;
                }
            }
        }
        return -1;
    }

    /**
     * The byte message {@code msg} has at {@code index}, for error messages.
     *
     * @param seed  the run's seed
     * @param msg   the message number
     * @param index byte offset in the message
     * @return the expected byte
     */
    public static byte expected(long seed, long msg, long index) {
        return (byte) (word(seed, msg, index / 8) >>> (8 * (index % 8)));
    }
}
