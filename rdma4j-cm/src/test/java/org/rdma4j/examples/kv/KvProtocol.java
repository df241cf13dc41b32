// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.examples.kv;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.zip.CRC32;

import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;

/**
 * What the key-value client and server agree on. The table is {@code slots} slots of {@link #SLOT} bytes
 * in server memory the clients read with RDMA READ; a key lives in the slot its hash picks. A slot is
 * {@code [crc32 of bytes 4..64: 4][key length: 1][value length: 1][key: 16][value: 42]}, all zero when
 * empty; the checksum lets a reader that raced the server's write see the tear and read again. Updates
 * go by SEND ({@link #PUT}, {@link #DELETE}: {@code [op][key length][value length][0][key][value]}, 64
 * bytes) and are answered by SEND ({@code [status]}). The server's accept carries the table's address,
 * rkey and slot count: {@code [address: 8][rkey: 4][slots: 4]}, big-endian.
 */
final class KvProtocol {
    static final int SLOT = 64;
    static final int MAX_KEY = 16;
    static final int MAX_VALUE = 42;
    static final int MSG = 64;
    static final int TABLE_INFO = 16;

    static final byte PUT = 1;
    static final byte DELETE = 2;

    static final byte OK = 0;
    static final byte NOT_FOUND = 1;
    static final byte COLLISION = 2;
    static final byte BAD_REQUEST = 3;

    static final ValueLayout.OfInt INT_BE = ValueLayout.JAVA_INT_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN);
    static final ValueLayout.OfLong LONG_BE = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN);

    private KvProtocol() {
    }

    /** {@return the slot of a key (FNV-1a)} */
    static int slotOf(byte[] key, int slots) {
        int h = 0x811c9dc5;
        for (byte b : key) {
            h = (h ^ (b & 0xFF)) * 0x01000193;
        }
        return Integer.remainderUnsigned(h, slots);
    }

    /** {@return the checksum of a slot image} */
    static int crc(byte[] slot) {
        CRC32 c = new CRC32();
        c.update(slot, 4, SLOT - 4);
        return (int) c.getValue();
    }

    /** {@return a filled slot image} */
    static byte[] slotImage(byte[] key, byte[] value) {
        byte[] s = new byte[SLOT];
        s[4] = (byte) key.length;
        s[5] = (byte) value.length;
        System.arraycopy(key, 0, s, 6, key.length);
        System.arraycopy(value, 0, s, 6 + MAX_KEY, value.length);
        int c = crc(s);
        s[0] = (byte) (c >>> 24);
        s[1] = (byte) (c >>> 16);
        s[2] = (byte) (c >>> 8);
        s[3] = (byte) c;
        return s;
    }

    static void checkKey(byte[] key) {
        if (key.length == 0 || key.length > MAX_KEY) {
            throw new IllegalArgumentException("key of " + key.length + " bytes (1.." + MAX_KEY + ")");
        }
    }

    static void checkValue(byte[] value) {
        if (value.length > MAX_VALUE) {
            throw new IllegalArgumentException("value of " + value.length + " bytes (0.." + MAX_VALUE + ")");
        }
    }

    static byte[] bytes(MemorySegment m, long off, int len) {
        return m.asSlice(off, len).toArray(ValueLayout.JAVA_BYTE);
    }

    static void send(QueuePair qp, SendWorkRequest wr) {
        if (!qp.postSend(wr)) {
            throw new IllegalStateException("post send: " + wr.postErrorMessage());
        }
    }

    static void recv(QueuePair qp, RecvWorkRequest wr) {
        if (!qp.postRecv(wr)) {
            throw new IllegalStateException("post receive: " + wr.postErrorMessage());
        }
    }

    /**
     * Waits for one completion of {@code cq}.
     *
     * @return the completion, or null if {@code stillWanted} turned false (the connection went away)
     * @throws IllegalStateException for an unsuccessful completion or the deadline
     */
    static WorkCompletion await(CompletionQueue cq, WorkCompletion wc, Duration timeout, java.util.function.BooleanSupplier stillWanted) {
        long deadline = System.nanoTime() + timeout.toNanos();
        int spins = 0;
        while (!cq.poll(wc)) {
            if (++spins % 1024 == 0) {
                if (!stillWanted.getAsBoolean()) {
                    return null;
                }
                if (System.nanoTime() - deadline > 0) {
                    throw new IllegalStateException("no completion within " + timeout);
                }
                Thread.yield();
            } else {
                Thread.onSpinWait();
            }
        }
        if (wc.status() != WcStatus.SUCCESS) {
            throw new IllegalStateException("work request " + wc.wrId() + " failed: " + wc.status());
        }
        return wc;
    }
}
