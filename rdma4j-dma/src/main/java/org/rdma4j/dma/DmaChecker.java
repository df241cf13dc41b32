// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.dma;

import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.function.Consumer;

import org.rdma4j.common.RdmaEvents;
import org.rdma4j.verbs.Dma;
import org.rdma4j.verbs.DmaDirection;

/**
 * Records every mapping and every device access of one device and reports misuse with two stacks,
 * after Linux's CONFIG_DMA_API_DEBUG (kernel/dma/debug.c), which virtual-DMA RDMA devices escape;
 * this one watches them too. Reports are kept (see {@link #reports()}) and passed to a listener.
 * Slow on purpose (a stack per mapping, a scan per access): a debugging aid. Thread-safe.
 */
public final class DmaChecker {
    /** Unmapped entries remembered to tell a double unmap or a use after unmap from a wild address. */
    private static final int GRAVEYARD = 4096;
    private static final int MAX_REPORTS = 10_000;

    enum Type {
        SINGLE, REGION, COHERENT
    }

    static final class Entry {
        final Object owner;
        final Type type;
        final long addr;
        final long size;
        final DmaDirection dir;
        /** Virtual mode: the heap array behind a heap mapping (addresses of arrays overlap), else null. */
        final Object identity;
        final boolean failed;
        final Throwable mappedAt;
        boolean checked;
        /**
         * The byte ranges the CPU owns (synced for the CPU, not yet back for the device), as disjoint
         * [start, end) offsets into the mapping: a sync may cover part of a mapping, as
         * dma_sync_single_range_for_cpu/_for_device do (a MAD layer syncs one receive slot of a pool).
         */
        private final java.util.TreeMap<Long, Long> cpuRanges = new java.util.TreeMap<>();
        boolean reportedUnchecked;
        Throwable unmappedAt;

        Entry(Object owner, Type type, long addr, long size, DmaDirection dir, Object identity, boolean failed,
                Throwable mappedAt) {
            this.owner = owner;
            this.type = type;
            this.addr = addr;
            this.size = size;
            this.dir = dir;
            this.identity = identity;
            this.failed = failed;
            this.mappedAt = mappedAt;
        }

        /** Gives [from, to) of the mapping to the CPU ({@code cpu}) or back to the device. */
        void own(long from, long to, boolean cpu) {
            // cut what overlaps [from, to) out of the ranges, keeping the parts outside it
            Long k = cpuRanges.lowerKey(from);
            if (k != null && cpuRanges.get(k) > from) {
                long end = cpuRanges.get(k);
                cpuRanges.put(k, from);
                if (end > to) {
                    cpuRanges.put(to, end);
                }
            }
            for (Long f = cpuRanges.ceilingKey(from); f != null && f < to; f = cpuRanges.ceilingKey(from)) {
                long end = cpuRanges.remove(f);
                if (end > to) {
                    cpuRanges.put(to, end);
                }
            }
            if (cpu && to > from) {
                // merge with a neighbour that touches, so whole-mapping syncs stay one range
                long start = from;
                long end = to;
                Long before = cpuRanges.lowerKey(from);
                if (before != null && cpuRanges.get(before) == from) {
                    start = before;
                    cpuRanges.remove(before);
                }
                Long after = cpuRanges.get(to);
                if (after != null) {
                    end = after;
                    cpuRanges.remove(to);
                }
                cpuRanges.put(start, end);
            }
        }

        /** {@return whether the CPU owns any byte of [from, to) of the mapping} */
        boolean cpuOwns(long from, long to) {
            Long k = cpuRanges.lowerKey(to);
            return k != null && cpuRanges.get(k) > from;
        }

        boolean covers(long a, long len, Object id) {
            return id == identity && a >= addr && len >= 0 && a - addr <= size - len;
        }

        String describe() {
            return (type == Type.REGION ? "registration" : type == Type.COHERENT ? "coherent buffer" : "mapping")
                    + " 0x" + Long.toHexString(addr) + "+" + size + " " + dir;
        }
    }

    private final List<Entry> live = new ArrayList<>();
    private final ArrayDeque<Entry> dead = new ArrayDeque<>();
    private final List<DmaReport> reports = new ArrayList<>();
    private volatile Consumer<DmaReport> listener;

    /** Creates a checker with no listener. */
    public DmaChecker() {
    }

    /**
     * Sets where reports go (besides the report list).
     *
     * @param l called with every report, on the thread that misused the API; null for none
     */
    public void listener(Consumer<DmaReport> l) {
        this.listener = l;
    }

    /** {@return every report so far, oldest first} */
    public synchronized List<DmaReport> reports() {
        return List.copyOf(reports);
    }

    /** Forgets the reports so far. */
    public synchronized void clearReports() {
        reports.clear();
    }

    /** {@return how many mappings are live} */
    public synchronized int liveMappings() {
        return live.size();
    }

    private void report(DmaReport.Kind kind, String msg, Entry e) {
        report(kind, msg, e == null ? null : e.mappedAt);
    }

    synchronized void report(DmaReport.Kind kind, String msg, Throwable mappedAt) {
        DmaReport r = new DmaReport(kind, msg, mappedAt, new Throwable("misuse"));
        RdmaEvents.dmaCheckerReport(kind.name(), msg);
        if (reports.size() < MAX_REPORTS) {
            reports.add(r);
        }
        Consumer<DmaReport> l = listener;
        if (l != null) {
            l.accept(r);
        }
    }

    // ------------------------------------------------------------------ mapping calls

    synchronized void onMap(Object owner, Type type, long addr, long size, DmaDirection dir, Object identity) {
        boolean failed = addr == Dma.MAPPING_ERROR;
        Entry e = new Entry(owner, type, addr, size, dir, identity, failed,
                new Throwable(type == Type.REGION ? "registered" : "mapped"));
        e.checked = type != Type.SINGLE; // registrations and coherent allocations report failure by exception
        live.add(e);
    }

    synchronized void onMappingErrorCheck(long addr) {
        for (int i = live.size() - 1; i >= 0; i--) {
            Entry e = live.get(i);
            if (e.addr == addr && !e.checked) {
                e.checked = true;
                if (e.failed) {
                    live.remove(i); // a failed map holds nothing once its caller knows
                }
                return;
            }
        }
    }

    synchronized void onUnmap(Object owner, Type type, long addr, long size, DmaDirection dir) {
        Entry e = null;
        for (int i = live.size() - 1; i >= 0; i--) {
            Entry c = live.get(i);
            if (c.addr == addr && c.type == type && !c.failed) {
                if (e == null || (c.size == size && c.dir == dir && e.size != size)) {
                    e = c;
                }
            }
        }
        if (e == null) {
            Entry d = findDead(addr, type);
            if (d != null) {
                report(DmaReport.Kind.DOUBLE_UNMAP, "unmap of 0x" + Long.toHexString(addr) + "+" + size + " " + dir
                        + ": already unmapped (" + d.describe() + ")", d);
            } else {
                report(DmaReport.Kind.UNMAP_NOT_MAPPED, "unmap of 0x" + Long.toHexString(addr) + "+" + size + " "
                        + dir + ": this address was never mapped" + (addr == Dma.MAPPING_ERROR
                        ? " (it is the mapping-error value: the map failed)" : ""), (Throwable) null);
            }
            return;
        }
        if (!e.checked && !e.reportedUnchecked) {
            e.reportedUnchecked = true;
            report(DmaReport.Kind.MAPPING_ERROR_NOT_CHECKED, e.describe() + " unmapped without a mappingError check "
                    + "on its address", e);
        }
        if (e.size != size || e.dir != dir) {
            report(DmaReport.Kind.UNMAP_MISMATCH, "unmap of " + e.describe() + " with size " + size + " and "
                    + dir + " (map and unmap must agree)", e);
        }
        live.remove(e);
        bury(e);
    }

    private void bury(Entry e) {
        e.unmappedAt = new Throwable("unmapped");
        dead.addFirst(e);
        if (dead.size() > GRAVEYARD) {
            dead.removeLast();
        }
    }

    private Entry findDead(long addr, Type type) {
        for (Entry d : dead) {
            if (d.addr == addr && d.type == type) {
                return d;
            }
        }
        return null;
    }

    synchronized void onSync(long addr, long size, DmaDirection dir, boolean forCpu) {
        Entry e = null;
        for (int i = live.size() - 1; i >= 0 && e == null; i--) {
            Entry c = live.get(i);
            // by address alone: a sync names no buffer, so heap arrays of a virtual device cannot be told apart
            if (c.type != Type.COHERENT && !c.failed && addr >= c.addr && size >= 0 && addr - c.addr <= c.size - size) {
                e = c;
            }
        }
        String what = (forCpu ? "sync for CPU" : "sync for device") + " of 0x" + Long.toHexString(addr) + "+" + size
                + " " + dir;
        if (e == null) {
            report(DmaReport.Kind.SYNC_NOT_MAPPED, what + ": no live mapping covers it", (Throwable) null);
            return;
        }
        // debug.c check_sync: the direction must be the map's (anything may sync a BIDIRECTIONAL map).
        // Syncing a FROM_DEVICE buffer for the device is the normal way to recycle a receive buffer.
        if (e.dir != dir && e.dir != DmaDirection.BIDIRECTIONAL) {
            report(DmaReport.Kind.SYNC_WRONG_DIRECTION, what + ": mapped as " + e.describe(), e);
        }
        e.own(addr - e.addr, addr - e.addr + size, forCpu);
    }

    synchronized void onRegionUnmapped(long addr) {
        for (int i = live.size() - 1; i >= 0; i--) {
            Entry e = live.get(i);
            if (e.addr == addr && e.type == Type.REGION) {
                live.remove(i);
                bury(e);
                return;
            }
        }
    }

    /** Reports and forgets the mappings an owner (a context) still holds. */
    synchronized void onOwnerClosed(Object owner, String ownerName) {
        int n = 0;
        StringBuilder sb = new StringBuilder();
        Entry first = null;
        for (Iterator<Entry> it = live.iterator(); it.hasNext();) {
            Entry e = it.next();
            if (e.owner == owner) {
                it.remove();
                if (e.failed) {
                    continue;
                }
                if (first == null) {
                    first = e;
                }
                if (n++ < 5) {
                    sb.append(n == 1 ? "" : ", ").append(e.describe());
                }
            }
        }
        if (n > 0) {
            report(DmaReport.Kind.LEAK, ownerName + " closed with " + n + " live mapping(s): " + sb
                    + (n > 5 ? ", ..." : "") + " (the stack is the first one's)", first);
        }
    }

    // ------------------------------------------------------------------ device accesses

    /**
     * A device access of [addr, addr+len): write = the device writes memory.
     */
    synchronized void onAccess(long addr, long len, boolean write, Object identity) {
        Entry best = null;
        for (int i = live.size() - 1; i >= 0; i--) {
            Entry e = live.get(i);
            if (e.failed || !e.covers(addr, len, identity)) {
                continue;
            }
            boolean dirOk = write ? e.dir.deviceWrites() : e.dir.deviceReads();
            if (dirOk && !e.cpuOwns(addr - e.addr, addr - e.addr + len)) {
                best = e;
                break;
            }
            if (best == null) {
                best = e;
            }
        }
        String what = "device " + (write ? "write to" : "read of") + " 0x" + Long.toHexString(addr) + "+" + len;
        if (best == null) {
            Entry d = null;
            for (Entry c : dead) {
                if (c.covers(addr, len, identity)) {
                    d = c;
                    break;
                }
            }
            if (d != null && d.type == Type.REGION) {
                report(DmaReport.Kind.ACCESS_AFTER_DEREGISTRATION, what + " through a memory region after its "
                        + "deregistration (" + d.describe() + "; deregistered at " + where(d.unmappedAt) + ")", d);
            } else if (d != null) {
                report(DmaReport.Kind.ACCESS_OUTSIDE_MAPPING, what + " after its " + d.describe() + " was unmapped at "
                        + where(d.unmappedAt), d);
            } else {
                boolean failedMap = false;
                for (Entry e : live) {
                    failedMap |= e.failed && e.addr == addr;
                }
                report(failedMap ? DmaReport.Kind.MAPPING_ERROR_NOT_CHECKED : DmaReport.Kind.ACCESS_OUTSIDE_MAPPING,
                        what + (failedMap ? ": the address is the error value of a failed map that was never checked"
                                : ": no mapping or registration covers it"), (Throwable) null);
            }
            return;
        }
        if (!(write ? best.dir.deviceWrites() : best.dir.deviceReads())) {
            report(DmaReport.Kind.WRONG_DIRECTION, what + " but it is " + best.describe(), best);
        } else if (best.cpuOwns(addr - best.addr, addr - best.addr + len)) {
            report(DmaReport.Kind.ACCESS_CPU_OWNED, what + ": the CPU owns " + best.describe()
                    + " (synced for the CPU, not synced back for the device)", best);
        }
        if (!best.checked && !best.reportedUnchecked) {
            best.reportedUnchecked = true;
            report(DmaReport.Kind.MAPPING_ERROR_NOT_CHECKED, what + ": " + best.describe()
                    + " used before mappingError was asked about its address", best);
        }
    }

    private static String where(Throwable t) {
        if (t == null) {
            return "?";
        }
        for (StackTraceElement e : t.getStackTrace()) {
            if (!e.getClassName().startsWith("org.rdma4j.dma.")) {
                return e.toString();
            }
        }
        return "?";
    }

    /**
     * Reports a send buffer changed by the CPU between post and transmission.
     *
     * @param what     the request
     * @param postedAt the stack that posted it
     */
    public void sendBufferChanged(String what, Throwable postedAt) {
        report(DmaReport.Kind.SEND_BUFFER_CHANGED, what + ": the CPU changed the send buffer between post and "
                + "transmission (checksum at post differs from the one at transmission)", postedAt);
    }

    /**
     * Reports a device access that faulted because the memory was gone or out of the device's reach: its
     * arena closed under a live registration or mapping, or a confined segment.
     *
     * @param what the access and the reason
     */
    public void unreachableMemory(String what) {
        report(DmaReport.Kind.ACCESS_TO_UNREACHABLE_MEMORY, what, (Throwable) null);
    }

    /**
     * Adds a range of memory to a checksum (how the checker sees a send buffer change between post and
     * completion).
     *
     * @param s memory
     * @param off start
     * @param len bytes
     * @param crc accumulator to update
     */
    public static void checksum(MemorySegment s, long off, long len, java.util.zip.CRC32C crc) {
        if (len > 0) {
            MemorySegment slice = s.asSlice(off, len);
            try {
                crc.update(slice.asByteBuffer());
            } catch (UnsupportedOperationException e) {
                crc.update(slice.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE)); // heap memory of a non-byte array
            }
        }
    }
}
