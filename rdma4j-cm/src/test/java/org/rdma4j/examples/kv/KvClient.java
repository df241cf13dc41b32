// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.examples.kv;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Arrays;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.verbs.cm.EndpointOptions;
import org.rdma4j.verbs.cm.RdmaEndpoint;

/**
 * The key-value client of the example: {@link #get} reads the key's slot from the server's table with one
 * RDMA READ (the server's CPU is not involved), {@link #put} and {@link #delete} send the update and wait
 * for the answer. Not thread-safe: one request at a time.
 */
public final class KvClient implements AutoCloseable {
    private static final Duration TIMEOUT = Duration.ofSeconds(10);
    private static final int TORN_READ_RETRIES = 100;

    private final Arena arena = Arena.ofShared();
    private final RdmaEndpoint ep;
    private final MemoryRegion buf;
    private final long tableAddr;
    private final int rkey;
    private final int slots;
    private final WorkCompletion wc = new WorkCompletion();
    private final SendWorkRequest swr = new SendWorkRequest();

    /** Layout of {@link #buf}: the slot read, the request sent, the answer received. */
    private static final long READ = 0;
    private static final long REQ = KvProtocol.SLOT;
    private static final long ANSWER = REQ + KvProtocol.MSG;

    private KvClient(InetSocketAddress server, EndpointOptions base) {
        MemoryRegion[] made = new MemoryRegion[1];
        EndpointOptions o = base.copy().sendQueueDepth(4).recvQueueDepth(4).readDepth(4).beforeConnect(e -> {
            made[0] = e.closeWith(e.pd().regMr(arena.allocate(ANSWER + 8, 64), AccessFlag.of(AccessFlag.LOCAL_WRITE)));
            postAnswerRecv(e, made[0]);
        });
        RdmaEndpoint connected;
        try {
            connected = RdmaEndpoint.connect(server, o);
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
        this.ep = connected;
        this.buf = made[0];
        MemorySegment info = MemorySegment.ofArray(ep.peerPrivateData());
        this.tableAddr = info.get(KvProtocol.LONG_BE, 0);
        this.rkey = info.get(KvProtocol.INT_BE, 8);
        this.slots = info.get(KvProtocol.INT_BE, 12);
    }

    /**
     * Connects to a server.
     *
     * @param server  its address
     * @param options the connection's options (the CM to use, timeouts)
     * @return the client
     */
    public static KvClient connect(InetSocketAddress server, EndpointOptions options) {
        return new KvClient(server, options);
    }

    private static void postAnswerRecv(RdmaEndpoint e, MemoryRegion m) {
        KvProtocol.recv(e.qp(), new RecvWorkRequest().wrId(1).singleSge(m.address() + ANSWER, 8, m.lkey()));
    }

    /**
     * Reads a key's value straight from the server's memory.
     *
     * @param key 1 to 16 bytes
     * @return the value, or null if the key is absent
     */
    public byte[] get(byte[] key) {
        KvProtocol.checkKey(key);
        long slot = tableAddr + (long) KvProtocol.slotOf(key, slots) * KvProtocol.SLOT;
        for (int attempt = 0; attempt < TORN_READ_RETRIES; attempt++) {
            KvProtocol.send(ep.qp(), swr.clear().opcode(WrOpcode.RDMA_READ).sendFlags(SendFlags.SIGNALED)
                    .singleSge(buf.address() + READ, KvProtocol.SLOT, buf.lkey()).remoteAddr(slot).rkey(rkey));
            KvProtocol.await(ep.sendCq(), wc, TIMEOUT, () -> true);
            byte[] s = KvProtocol.bytes(buf.segment(), READ, KvProtocol.SLOT);
            int kl = s[4] & 0xFF;
            if (kl == 0 && Arrays.equals(s, new byte[KvProtocol.SLOT])) {
                return null;
            }
            if (KvProtocol.crc(s) != MemorySegment.ofArray(s).get(KvProtocol.INT_BE, 0)) {
                continue; // raced a write: read again
            }
            if (kl != key.length || !Arrays.equals(s, 6, 6 + kl, key, 0, kl)) {
                return null;
            }
            return Arrays.copyOfRange(s, 6 + KvProtocol.MAX_KEY, 6 + KvProtocol.MAX_KEY + (s[5] & 0xFF));
        }
        throw new IllegalStateException("slot of the key kept changing during " + TORN_READ_RETRIES + " reads");
    }

    /**
     * Stores a value.
     *
     * @param key   1 to 16 bytes
     * @param value 0 to 42 bytes
     * @throws IllegalStateException if another key holds the slot
     */
    public void put(byte[] key, byte[] value) {
        KvProtocol.checkKey(key);
        KvProtocol.checkValue(value);
        byte status = request(KvProtocol.PUT, key, value);
        if (status != KvProtocol.OK) {
            throw new IllegalStateException("put refused: " + (status == KvProtocol.COLLISION
                    ? "another key holds its slot" : "status " + status));
        }
    }

    /**
     * Removes a key.
     *
     * @param key 1 to 16 bytes
     * @return whether it was there
     */
    public boolean delete(byte[] key) {
        KvProtocol.checkKey(key);
        return request(KvProtocol.DELETE, key, new byte[0]) == KvProtocol.OK;
    }

    private byte request(byte op, byte[] key, byte[] value) {
        MemorySegment m = buf.segment();
        m.asSlice(REQ, KvProtocol.MSG).fill((byte) 0);
        m.set(ValueLayout.JAVA_BYTE, REQ, op);
        m.set(ValueLayout.JAVA_BYTE, REQ + 1, (byte) key.length);
        m.set(ValueLayout.JAVA_BYTE, REQ + 2, (byte) value.length);
        MemorySegment.copy(key, 0, m, ValueLayout.JAVA_BYTE, REQ + 4, key.length);
        MemorySegment.copy(value, 0, m, ValueLayout.JAVA_BYTE, REQ + 4 + KvProtocol.MAX_KEY, value.length);
        KvProtocol.send(ep.qp(), swr.clear().opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                .singleSge(buf.address() + REQ, KvProtocol.MSG, buf.lkey()));
        KvProtocol.await(ep.sendCq(), wc, TIMEOUT, () -> true);
        KvProtocol.await(ep.recvCq(), wc, TIMEOUT, () -> true);
        byte status = m.get(ValueLayout.JAVA_BYTE, ANSWER);
        postAnswerRecv(ep, buf);
        return status;
    }

    /** Disconnects and frees the client's memory. */
    @Override
    public void close() {
        ep.close();
        arena.close();
    }
}
