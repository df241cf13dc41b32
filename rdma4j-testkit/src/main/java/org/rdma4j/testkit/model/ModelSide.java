// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit.model;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.Collections;
import java.util.List;
import java.util.Random;

import org.rdma4j.testkit.Fabric;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.DeviceAttributes;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;

/**
 * One side of a model run: a context, PD, two CQs, one QP and one registered region, with a plain
 * byte[] copy of the region (the model) and the FIFO of posted receives.
 *
 * <pre>
 *   [SRC 16 KiB][SINK 16 KiB][TARGET 16 KiB][SLOT 0 .. SLOT 19, 9216 B each]
 *   SRC    gather source of SEND / RDMA WRITE (only this side's HCA reads it)
 *   SINK   RDMA READ sink and atomic result (only this side's HCA writes it)
 *   TARGET what the peer WRITEs, READs and atomically updates
 *   SLOT   receive buffers
 * </pre>
 */
final class ModelSide {
    static final int AREA = 16 * 1024;
    static final int SRC = 0;
    static final int SINK = AREA;
    static final int TARGET = 2 * AREA;
    static final int RECV_BASE = 3 * AREA;
    static final int SLOT = 9216;
    static final int SLOTS = 20;
    static final int SIZE = RECV_BASE + SLOTS * SLOT;
    static final int GRH = 40;
    static final long RECV_WR_BASE = 0x5EC0_0000_0000L;

    /** A posted receive as the model sees it. */
    record PostedRecv(long wrId, int slot, int[][] pieces) {
        @Override
        public String toString() {
            return "recv{wr_id=0x" + Long.toHexString(wrId) + " slot " + slot + " sges=" + ModelSide.describe(pieces) + '}';
        }
    }

    final String name;
    final Context ctx;
    final ProtectionDomain pd;
    final CompletionQueue sendCq;
    final CompletionQueue recvCq;
    /** Made by {@link #createQp}, once the run knows how the pair is connected. */
    QueuePair qp;
    final MemorySegment mem;
    final MemoryRegion mr;
    final byte[] model = new byte[SIZE];
    final BitSet dontCare = new BitSet(SIZE);
    final ArrayDeque<PostedRecv> posted = new ArrayDeque<>();
    final List<PostedRecv> consumed = new ArrayList<>();
    final ArrayDeque<Integer> freeSlots = new ArrayDeque<>();
    final Random recvRandom;
    AddressHandle ahToPeer;
    private long recvCount;

    private final QpType type;
    /** The device's max_sge_rd: an RDMA READ's local list is at most this long (iWARP: 1). */
    final int maxSgeRd;

    ModelSide(String name, Fabric fabric, int device, QpType type, long seed, Closer closer) {
        this.name = name;
        this.type = type;
        this.recvRandom = new Random(seed);
        Arena arena = closer.add(fabric.bufferArena());
        ctx = closer.add(fabric.openContext(device));
        pd = closer.add(ctx.allocPd());
        sendCq = closer.add(ctx.createCq(256, null, 0));
        recvCq = closer.add(ctx.createCq(256, null, 0));
        mem = arena.allocate(SIZE, 4096);
        new Random(seed * 31 + 7).nextBytes(model);
        mem.copyFrom(MemorySegment.ofArray(model));
        mr = closer.add(pd.regMr(mem, AccessFlag.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE,
                AccessFlag.REMOTE_READ, AccessFlag.REMOTE_ATOMIC)));
        maxSgeRd = Math.max(1, ctx.queryDevice().maxSgeRd());
        for (int i = 0; i < SLOTS; i++) {
            freeSlots.add(i);
        }
    }

    /**
     * Makes the side's QP on its PD and CQs.
     *
     * @param make {@code pd.createQp}, or a passive CM ID's {@code createQp(pd, ...)} (iWARP)
     * @param closer where the QP goes
     */
    void createQp(java.util.function.BiFunction<ProtectionDomain, QpInitAttributes, QueuePair> make, Closer closer) {
        DeviceAttributes da = ctx.queryDevice();
        QpCapabilities cap = new QpCapabilities(64, 64, Math.min(3, da.maxSge()), Math.min(3, da.maxSge()),
                Math.min(256, da.maxInlineData()));
        qp = closer.add(make.apply(pd, new QpInitAttributes().type(type).sendCq(sendCq).recvCq(recvCq).cap(cap)));
    }

    /** {@return the virtual address of offset {@code off} of the region} */
    long addr(int off) {
        return mr.address() + off;
    }

    /** Posts a receive on every free slot, each split into 1..3 scatter entries in a random order. */
    void postFreeSlots() {
        int maxSge = Math.max(1, Math.min(3, qp.cap().maxRecvSge()));
        RecvWorkRequest wr = new RecvWorkRequest(3);
        while (!freeSlots.isEmpty()) {
            int slot = freeSlots.poll();
            int[][] pieces = split(RECV_BASE + slot * SLOT, SLOT, 1 + recvRandom.nextInt(maxSge), recvRandom);
            long wrId = RECV_WR_BASE + ((long) name.charAt(0) << 32) + recvCount++;
            wr.wrId(wrId).numSge(pieces.length);
            for (int i = 0; i < pieces.length; i++) {
                wr.sge(i).set(addr(pieces[i][0]), pieces[i][1], mr.lkey());
            }
            if (!qp.postRecv(wr)) {
                throw new AssertionError(name + ": postRecv(" + wr + ") refused: " + wr.postError());
            }
            posted.add(new PostedRecv(wrId, slot, pieces));
        }
    }

    /** Takes the next posted receive, as an arriving SEND or WRITE_WITH_IMM would. */
    PostedRecv consumeRecv(String op) {
        PostedRecv r = posted.poll();
        if (r == null) {
            throw new IllegalStateException("model bug: no receive posted on " + name + " for " + op);
        }
        consumed.add(r);
        return r;
    }

    /** Reposts the slots consumed since the last call. */
    void repostConsumed() {
        for (PostedRecv r : consumed) {
            freeSlots.add(r.slot());
        }
        consumed.clear();
        postFreeSlots();
    }

    /**
     * Splits {@code [base, base+len)} into {@code k} contiguous pieces (some possibly empty) and shuffles
     * their order, so the list order (the message order) differs from the memory order.
     *
     * @return {offset, length} pairs in list order
     */
    static int[][] split(int base, int len, int k, Random r) {
        if (k == 0) {
            return new int[0][];
        }
        int[] cuts = new int[k + 1];
        cuts[k] = len;
        for (int i = 1; i < k; i++) {
            cuts[i] = r.nextInt(len + 1);
        }
        java.util.Arrays.sort(cuts, 1, k);
        List<int[]> pieces = new ArrayList<>(k);
        for (int i = 0; i < k; i++) {
            pieces.add(new int[] {base + cuts[i], cuts[i + 1] - cuts[i]});
        }
        Collections.shuffle(pieces, r);
        return pieces.toArray(new int[0][]);
    }

    /** {@return the model bytes of a gather list, in list order} */
    byte[] gather(int[][] pieces) {
        int total = 0;
        for (int[] p : pieces) {
            total += p[1];
        }
        byte[] out = new byte[total];
        int o = 0;
        for (int[] p : pieces) {
            System.arraycopy(model, p[0], out, o, p[1]);
            o += p[1];
        }
        return out;
    }

    /**
     * Writes {@code data} into the model at message offset {@code from} of a scatter list.
     *
     * @param pieces scatter list
     * @param from   message offset where data starts
     * @param data   the bytes, or null to mark {@code len} bytes as unknown (the UD GRH)
     * @param len    how many bytes
     */
    void scatter(int[][] pieces, int from, byte[] data, int len) {
        int msgOff = 0;
        int done = 0;
        for (int[] p : pieces) {
            int pStart = msgOff;
            int pEnd = msgOff + p[1];
            msgOff = pEnd;
            int s = Math.max(pStart, from + done);
            int e = Math.min(pEnd, from + len);
            if (s >= e) {
                continue;
            }
            int memOff = p[0] + (s - pStart);
            if (data == null) {
                dontCare.set(memOff, memOff + (e - s));
            } else {
                System.arraycopy(data, s - from, model, memOff, e - s);
            }
            done = e - from;
        }
        if (done < len) {
            throw new IllegalStateException("model bug: scatter list " + describe(pieces) + " too short for " + len
                    + " bytes at " + from);
        }
    }

    /** Inverts bytes of a gather list in memory and in the model (reuse of an inline send buffer). */
    void scribble(int[][] pieces) {
        for (int[] p : pieces) {
            for (int i = p[0]; i < p[0] + p[1]; i++) {
                model[i] = (byte) ~model[i];
                mem.set(ValueLayout.JAVA_BYTE, i, model[i]);
            }
        }
    }

    /**
     * Compares the region with the model; bytes the model cannot predict (the UD GRH) are first taken
     * from the region.
     *
     * @return null if equal, else a description of the first difference
     */
    String compareMemory() {
        for (int i = dontCare.nextSetBit(0); i >= 0; i = dontCare.nextSetBit(i + 1)) {
            model[i] = mem.get(ValueLayout.JAVA_BYTE, i);
        }
        dontCare.clear();
        long m = mem.mismatch(MemorySegment.ofArray(model));
        if (m < 0) {
            return null;
        }
        int first = (int) m;
        int count = 0;
        int last = first;
        for (int i = first; i < SIZE; i++) {
            if (mem.get(ValueLayout.JAVA_BYTE, i) != model[i]) {
                count++;
                last = i;
            }
        }
        StringBuilder sb = new StringBuilder();
        sb.append("memory of ").append(name).append(" differs from the model at ").append(region(first))
                .append(" (").append(count).append(" bytes differ, last at ").append(region(last)).append(")\n  expected:");
        int end = Math.min(SIZE, first + 24);
        for (int i = first; i < end; i++) {
            sb.append(String.format(" %02x", model[i] & 0xFF));
        }
        sb.append("\n  actual:  ");
        for (int i = first; i < end; i++) {
            sb.append(String.format(" %02x", mem.get(ValueLayout.JAVA_BYTE, i) & 0xFF));
        }
        return sb.toString();
    }

    /** {@return an offset of the region as area+offset} */
    static String region(int off) {
        if (off < SINK) {
            return "src+" + off;
        } else if (off < TARGET) {
            return "sink+" + (off - SINK);
        } else if (off < RECV_BASE) {
            return "target+" + (off - TARGET);
        }
        int slot = (off - RECV_BASE) / SLOT;
        return "slot" + slot + "+" + (off - RECV_BASE - slot * SLOT);
    }

    /** {@return a scatter/gather list as region offsets} */
    static String describe(int[][] pieces) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < pieces.length; i++) {
            if (i > 0) {
                sb.append(", ");
            }
            sb.append(region(pieces[i][0])).append(':').append(pieces[i][1]);
        }
        return sb.append(']').toString();
    }
}
