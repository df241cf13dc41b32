// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.foreign.MemorySegment;
import java.util.zip.CRC32C;

import org.rdma4j.dma.DmaChecker;
import org.rdma4j.dma.DmaPiece;
import org.rdma4j.dma.DmaSpace;

/**
 * A resolved scatter/gather list: pieces of registered or DMA-mapped memory (segment, offset, length)
 * that checks have already approved, each with the device address it was reached by. All the device's
 * data movement goes through {@link #transfer}, so every copy is bounded by what the key checks
 * allowed. On a device that is not virtual, or has a DMA checker, every access is also checked when
 * it happens ({@link #access}): an IOMMU mapping removed since translation faults. Not thread-safe.
 */
final class Sgl {
    /** Thrown by {@link #transfer} when the device may not touch the memory (any more). */
    static final IllegalStateException FAULT = new IllegalStateException("DMA fault") {
        private static final long serialVersionUID = 1L;

        @Override
        public synchronized Throwable fillInStackTrace() {
            return this; // preallocated: a fault costs no stack walk
        }
    };

    MemorySegment[] seg;
    long[] off;
    long[] len;
    /** Device address of each piece ({@link DmaSpace#NO_DMA} for the device's own memory). */
    long[] dma;
    int n;
    long total;
    /** The device whose accesses these are, when they must be checked; null on a plain virtual device. */
    final DmaSpace port;

    Sgl(int capacity) {
        this(capacity, null);
    }

    Sgl(int capacity, DmaSpace space) {
        seg = new MemorySegment[Math.max(1, capacity)];
        off = new long[seg.length];
        len = new long[seg.length];
        dma = new long[seg.length];
        port = space != null && space.checksAccesses ? space : null;
    }

    void clear() {
        n = 0;
        total = 0;
    }

    void add(MemorySegment s, long o, long l) {
        add(s, o, l, DmaSpace.NO_DMA);
    }

    void add(MemorySegment s, long o, long l, long dmaAddr) {
        if (n == seg.length) {
            grow();
        }
        if (seg[n] != s) {
            seg[n] = s; // skip the reference store (and its GC barrier) when the piece is reused
        }
        off[n] = o;
        len[n] = l;
        dma[n] = dmaAddr;
        n++;
        total += l;
    }

    /**
     * Makes this list the pieces of bytes [pos, pos+count) of {@code src} (a snapshot: {@code src} may change
     * afterwards, the memory it refers to is not copied).
     */
    void setRange(Sgl src, long pos, long count) {
        clear();
        for (int i = 0; i < src.n && count > 0; i++) {
            if (pos >= src.len[i]) {
                pos -= src.len[i];
                continue;
            }
            long chunk = Math.min(count, src.len[i] - pos);
            long d = src.dma[i];
            add(src.seg[i], src.off[i] + pos, chunk, d == DmaSpace.NO_DMA ? d : d + pos);
            count -= chunk;
            pos = 0;
        }
    }

    void set(MemorySegment s, long o, long l) {
        clear();
        add(s, o, l, DmaSpace.NO_DMA);
    }

    void set(MemorySegment s, long o, long l, long dmaAddr) {
        clear();
        add(s, o, l, dmaAddr);
    }

    /**
     * Adds [mr.address + o, +l) of a registered region, reached through the device's mapping of it:
     * the segment itself when the mapping is direct, else through translation (IOMMU, bounced).
     *
     * @return false on a fault
     */
    boolean addMr(SoftMr mr, long o, long l, int access, DmaPiece scratch) {
        if (mr.direct) {
            add(mr.segment, o, l, mr.dmaAddr + o);
            return true;
        }
        return addDma(mr.pd.device.dma, scratch, mr.dmaAddr + o, l, null, access);
    }

    /**
     * Adds the memory behind device addresses [addr, addr+l): a local-DMA-L_Key entry, or a translated
     * registration.
     *
     * @return false on a fault
     */
    boolean addDma(DmaSpace space, DmaPiece p, long addr, long l, MemorySegment buffer, int access) {
        long a = addr;
        long rem = l;
        while (rem > 0) {
            if (!space.translate(a, rem, buffer, access, p)) {
                return false;
            }
            add(p.segment, p.offset, p.length, a);
            a += p.length;
            rem -= p.length;
        }
        return true;
    }

    /**
     * Checks (and lets the checker record) a device access of bytes [pos, pos+count) of the list.
     *
     * @return false on a fault; always true on a plain virtual device
     */
    boolean access(long pos, long count, int kind) {
        DmaSpace sp = port;
        if (sp == null || count <= 0) {
            return true;
        }
        for (int i = 0; i < n && count > 0; i++) {
            if (pos >= len[i]) {
                pos -= len[i];
                continue;
            }
            long chunk = Math.min(count, len[i] - pos);
            long d = dma[i];
            if (!sp.access(d == DmaSpace.NO_DMA ? d : d + pos, chunk, kind, seg[i])) {
                return false;
            }
            count -= chunk;
            pos = 0;
        }
        return true;
    }

    /**
     * Whether this thread may still touch bytes [pos, pos+count) of the list: the memory's arena may have
     * been closed under a live registration (FFM cannot keep a shared arena open for us), or a segment be
     * confined to another thread. A device reading memory that is gone faults; the caller fails the request
     * with the status of a DMA fault, and {@link #unreachable} reports it.
     *
     * @return false if some piece is gone or out of this thread's reach
     */
    boolean reachable(long pos, long count) {
        Thread me = null;
        for (int i = 0; i < n && count > 0; i++) {
            if (pos >= len[i]) {
                pos -= len[i];
                continue;
            }
            MemorySegment s = seg[i];
            if (!s.scope().isAlive()) {
                return false;
            }
            if (me == null) {
                me = Thread.currentThread();
            }
            if (!s.isAccessibleBy(me)) {
                return false;
            }
            count -= Math.min(count, len[i] - pos);
            pos = 0;
        }
        return true;
    }

    /**
     * Reports a device access that found memory gone or out of reach: to the DMA checker of the list's
     * device when it has one, and in the log (rate-limited). The access itself is a fault for the caller.
     *
     * @param what the access ("RDMA WRITE into MR lkey 0x..."), for the report
     */
    void unreachable(String what) {
        EngineErrors.unreachableMemory(port, what);
    }

    /** {@return a CRC-32C of bytes [pos, pos+count) (the DMA checker's send-buffer check)} */
    long checksum(long pos, long count) {
        CRC32C crc = new CRC32C();
        for (int i = 0; i < n && count > 0; i++) {
            if (pos >= len[i]) {
                pos -= len[i];
                continue;
            }
            long chunk = Math.min(count, len[i] - pos);
            DmaChecker.checksum(seg[i], off[i] + pos, chunk, crc);
            count -= chunk;
            pos = 0;
        }
        return crc.getValue();
    }

    private void grow() {
        int c = seg.length * 2;
        seg = java.util.Arrays.copyOf(seg, c);
        off = java.util.Arrays.copyOf(off, c);
        len = java.util.Arrays.copyOf(len, c);
        dma = java.util.Arrays.copyOf(dma, c);
    }

    /**
     * Copies {@code count} bytes starting at byte {@code srcPos} of {@code src} to byte {@code dstPos}
     * of {@code dst}. Both ranges must lie within the lists (callers check lengths first).
     */
    static void transfer(Sgl src, long srcPos, Sgl dst, long dstPos, long count) {
        // The destination device's write is checked here; the source device checked its read when it
        // put the bytes on the link (requester, read responder).
        if (dst.port != null && !dst.access(dstPos, count, DmaSpace.WRITE)) {
            throw FAULT;
        }
        try {
            copy(src, srcPos, dst, dstPos, count);
        } catch (IllegalStateException | WrongThreadException gone) {
            // FFM refused the access: an arena closed under a live registration or mapping, or a confined
            // segment touched from another thread. Nothing was read or written at the refused piece; the
            // caller fails the request as for a DMA fault, and the checker and the log say why.
            (src.reachable(srcPos, count) ? dst : src).unreachable("a " + count + "-byte copy found memory "
                    + (gone instanceof WrongThreadException ? "confined to another thread" : "whose arena is closed")
                    + " (" + gone.getMessage() + ")");
            throw FAULT;
        }
    }

    /**
     * Copies {@code count} bytes starting at byte {@code srcPos} of {@code src} into the device's own memory
     * (an inbox slot: no access of the destination to check). The source range must lie within the list.
     *
     * @throws IllegalStateException ({@link #FAULT}) if FFM refuses the source (an arena closed, a confined segment)
     */
    static void transfer(Sgl src, long srcPos, MemorySegment dst, long dstOff, long count) {
        try {
            if (src.n == 1) {
                Bytes.copy(src.seg[0], src.off[0] + srcPos, dst, dstOff, count);
                return;
            }
            int si = 0;
            while (si < src.n && srcPos >= src.len[si]) {
                srcPos -= src.len[si++];
            }
            while (count > 0) {
                long chunk = Math.min(count, src.len[si] - srcPos);
                Bytes.copy(src.seg[si], src.off[si] + srcPos, dst, dstOff, chunk);
                count -= chunk;
                dstOff += chunk;
                srcPos = 0;
                si++;
            }
        } catch (IllegalStateException | WrongThreadException gone) {
            src.unreachable("a " + count + "-byte copy found memory " + (gone instanceof WrongThreadException
                    ? "confined to another thread" : "whose arena is closed") + " (" + gone.getMessage() + ")");
            throw FAULT;
        }
    }

    private static void copy(Sgl src, long srcPos, Sgl dst, long dstPos, long count) {
        if (src.n == 1 && dst.n == 1) {
            Bytes.copy(src.seg[0], src.off[0] + srcPos, dst.seg[0], dst.off[0] + dstPos, count);
            return;
        }
        int si = 0;
        while (si < src.n && srcPos >= src.len[si]) {
            srcPos -= src.len[si++];
        }
        int di = 0;
        while (di < dst.n && dstPos >= dst.len[di]) {
            dstPos -= dst.len[di++];
        }
        while (count > 0) {
            long chunk = Math.min(count, Math.min(src.len[si] - srcPos, dst.len[di] - dstPos));
            Bytes.copy(src.seg[si], src.off[si] + srcPos, dst.seg[di], dst.off[di] + dstPos, chunk);
            count -= chunk;
            srcPos += chunk;
            dstPos += chunk;
            if (srcPos == src.len[si]) {
                si++;
                srcPos = 0;
            }
            if (dstPos == dst.len[di]) {
                di++;
                dstPos = 0;
            }
        }
    }
}
