// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.dma;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.Map;

import org.rdma4j.verbs.CoherentBuffer;
import org.rdma4j.verbs.Dma;
import org.rdma4j.verbs.DmaDirection;
import org.rdma4j.verbs.DmaSgList;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.spi.DmaOps;

/**
 * One device's way into host memory, as its {@link DmaConfig} says: the mapping calls
 * ({@link #dmaFor}), memory registration ({@link #mapRegion}) and, for the device engine, address
 * translation ({@link #translate}) and per-access checks ({@link #access}). The engine branches on
 * {@link #virtual} (a final field) before calling anything here, so a virtual device without a
 * checker pays one predictable branch and no lookups.
 *
 * <p>Thread-safe: mapping calls come from user threads, translations from the engine; both take
 * this object's monitor (never held while taking another lock).
 */
public final class DmaSpace {
    /** Access kind: the device reads memory. */
    public static final int READ = 1;
    /** Access kind: the device writes memory. */
    public static final int WRITE = 2;
    /** The device address of memory that belongs to the device itself (WQE inline area, GRH scratch). */
    public static final long NO_DMA = Long.MIN_VALUE;

    /** The configuration. */
    public final DmaConfig config;
    /** Whether the device reaches memory by its virtual address (no translation, nothing can fault). */
    public final boolean virtual;
    /** Whether every device access must be checked: not virtual, or a checker is on. */
    public final boolean checksAccesses;
    private final DmaMode mode;
    private final IommuPageTable iommu;
    private final BouncePool bounce;
    private final DmaChecker checker;
    private final long addressLimit;
    private final Map<Long, Arena> coherentArenas = new HashMap<>();

    /**
     * Creates the device's DMA space.
     *
     * @param config how the device reaches memory
     */
    public DmaSpace(DmaConfig config) {
        this.config = config;
        this.mode = config.mode();
        this.virtual = mode == DmaMode.VIRTUAL;
        this.iommu = mode == DmaMode.IOMMU ? new IommuPageTable(config.iommuWindow()) : null;
        this.bounce = mode == DmaMode.BOUNCE ? new BouncePool(config.bouncePool()) : null;
        this.checker = config.checker() ? new DmaChecker() : null;
        this.checksAccesses = !virtual || checker != null;
        this.addressLimit = config.addressBits() >= 64 ? Long.MAX_VALUE : (1L << config.addressBits()) - 1;
    }

    /** {@return the mode} */
    public DmaMode mode() {
        return mode;
    }

    /** {@return the checker, or null when off} */
    public DmaChecker checker() {
        return checker;
    }

    /**
     * {@return the ULP-facing mapping calls for that owner}
     *
     * @param owner the context the mappings belong to (for leak reports)
     */
    public Dma dmaFor(Object owner) {
        return new Dma(virtual && checker == null, new Session(owner));
    }

    /**
     * Reports, through the checker, the mappings an owner still holds when it closes.
     *
     * @param owner     the context
     * @param ownerName how to name it
     */
    public void ownerClosed(Object owner, String ownerName) {
        if (checker != null) {
            checker.onOwnerClosed(owner, ownerName);
        }
    }

    // ------------------------------------------------------------------ per-I/O mappings

    private boolean needsBounce(MemorySegment cpu) {
        return !cpu.isNative() || config.forceBounce() || cpu.address() + cpu.byteSize() - 1 > addressLimit
                || cpu.address() + cpu.byteSize() - 1 < cpu.address();
    }

    private Object identity(MemorySegment cpu) {
        return virtual && !cpu.isNative() ? cpu.heapBase().orElse(null) : null;
    }

    /** A thread no segment is confined to: asks whether a segment may be touched by threads other than its maker. */
    private static final Thread ANY_OTHER_THREAD = Thread.ofPlatform().unstarted(() -> { });

    /**
     * Why the device cannot use a segment, or null if it can. The device reaches memory from threads of
     * its own (the timer agent, RoCE receive agents) and from whichever thread drives its peer in process,
     * so a segment of a confined arena, which only its owner thread may touch, would fail there with
     * WrongThreadException; and a closed arena's memory is gone.
     *
     * @param segment native memory about to be registered or mapped
     * @return the reason, or null
     */
    public static String unusable(MemorySegment segment) {
        if (!segment.scope().isAlive()) {
            return "its arena is already closed";
        }
        if (!segment.isAccessibleBy(ANY_OTHER_THREAD)) {
            return "it belongs to a confined arena (Arena.ofConfined()), which only the thread that made it may"
                    + " touch, and the device reaches memory from its own threads (timer, RoCE receive) and from"
                    + " the threads that drive its peers; allocate memory for RDMA from Arena.ofShared(),"
                    + " Arena.ofAuto() or Arena.global()";
        }
        return null;
    }

    synchronized long map(Object owner, MemorySegment cpu, DmaDirection dir) {
        if (dir == null) {
            throw new IllegalArgumentException("direction is null");
        }
        String why = cpu.isNative() ? unusable(cpu) : null;
        if (why != null) {
            throw new IllegalArgumentException("cannot DMA-map 0x" + Long.toHexString(cpu.address()) + "+"
                    + cpu.byteSize() + ": " + why);
        }
        long addr;
        Object id = null;
        switch (mode) {
            case VIRTUAL -> {
                addr = cpu.address();
                id = identity(cpu);
            }
            case IOMMU -> {
                addr = iommu.map(cpu, 0, cpu.byteSize(), perm(dir));
            }
            default -> {
                if (needsBounce(cpu)) {
                    // Modern swiotlb copies at map for every direction, so stale pool bytes never leak.
                    addr = bounce.map(cpu, true, BouncePool.MAX_SEGMENT_SLOTS);
                } else {
                    addr = cpu.address();
                }
            }
        }
        if (addr == -1) {
            addr = Dma.MAPPING_ERROR;
        }
        if (checker != null) {
            checker.onMap(owner, DmaChecker.Type.SINGLE, addr, cpu.byteSize(), dir, id);
        }
        return addr;
    }

    private static int perm(DmaDirection dir) {
        return (dir.deviceReads() ? READ : 0) | (dir.deviceWrites() ? WRITE : 0);
    }

    synchronized void unmap(Object owner, long addr, long size, DmaDirection dir) {
        if (checker != null) {
            checker.onUnmap(owner, DmaChecker.Type.SINGLE, addr, size, dir);
        }
        if (iommu != null) {
            iommu.unmap(addr);
        } else if (bounce != null && bounce.contains(addr)) {
            // swiotlb_tbl_unmap_single copies back for FROM_DEVICE and BIDIRECTIONAL.
            bounce.unmap(addr, dir != null && dir.deviceWrites());
        }
    }

    synchronized void sync(long addr, long size, DmaDirection dir, boolean forCpu) {
        if (checker != null) {
            checker.onSync(addr, size, dir, forCpu);
        }
        if (bounce != null && bounce.contains(addr) && dir != null) {
            if (forCpu ? dir.deviceWrites() : dir.deviceReads()) {
                bounce.sync(addr, size, forCpu);
            }
        }
    }

    synchronized CoherentBuffer allocCoherent(Object owner, long size) {
        if (size <= 0) {
            throw new VerbsException(Errno.EINVAL, "coherent allocation of " + size + " bytes");
        }
        CoherentBuffer b;
        if (mode == DmaMode.BOUNCE) {
            // Memory the device reaches without bouncing: carved from the device-addressable pool.
            long addr = bounce.reserve(size);
            if (addr == -1) {
                throw new VerbsException(Errno.ENOMEM, "coherent allocation of " + size + " bytes: the device's "
                        + config.bouncePool() + "-byte addressable pool is full");
            }
            b = new CoherentBuffer(bounce.pool.asSlice(addr - BouncePool.BASE, size), addr);
        } else {
            Arena arena = Arena.ofShared();
            MemorySegment cpu = arena.allocate(size, IommuPageTable.PAGE_SIZE);
            long addr = cpu.address();
            if (iommu != null) {
                addr = iommu.map(cpu, 0, size, READ | WRITE);
                if (addr == -1) {
                    arena.close();
                    throw new VerbsException(Errno.ENOMEM, "coherent allocation of " + size + " bytes: the "
                            + config.iommuWindow() + "-byte IOMMU window is full");
                }
            }
            coherentArenas.put(addr, arena);
            b = new CoherentBuffer(cpu, addr);
        }
        if (checker != null) {
            checker.onMap(owner, DmaChecker.Type.COHERENT, b.dmaAddress(), size, DmaDirection.BIDIRECTIONAL, null);
        }
        return b;
    }

    synchronized void freeCoherent(Object owner, CoherentBuffer b) {
        if (checker != null) {
            checker.onUnmap(owner, DmaChecker.Type.COHERENT, b.dmaAddress(), b.cpu().byteSize(),
                    DmaDirection.BIDIRECTIONAL);
        }
        if (mode == DmaMode.BOUNCE) {
            bounce.unmap(b.dmaAddress(), false);
            return;
        }
        Arena a = coherentArenas.remove(b.dmaAddress());
        if (a == null) {
            return; // never allocated here, or freed twice: the checker said so if it is on
        }
        if (iommu != null) {
            iommu.unmap(b.dmaAddress());
        }
        a.close();
    }

    // ------------------------------------------------------------------ registrations

    /**
     * The long-term mapping of a memory region: BIDIRECTIONAL, never bounced (Linux ib_umem maps with
     * DMA_ATTR_REQUIRE_COHERENT and fails rather than bounce), unless {@link DmaConfig#bounceRegistrations}.
     *
     * @param owner   the context
     * @param segment the registered native memory
     * @return the device address of its first byte
     * @throws VerbsException EINVAL if the device cannot use the segment ({@link #unusable}), EOPNOTSUPP if only
     *                        bounce buffers could reach it, ENOMEM if the IOMMU window is full
     */
    public synchronized long mapRegion(Object owner, MemorySegment segment) {
        String why = unusable(segment);
        if (why != null) {
            throw new VerbsException(Errno.EINVAL, "cannot register memory at 0x" + Long.toHexString(segment.address())
                    + "+" + segment.byteSize() + ": " + why);
        }
        long addr;
        switch (mode) {
            case VIRTUAL -> addr = segment.address();
            case IOMMU -> {
                addr = iommu.map(segment, 0, segment.byteSize(), READ | WRITE);
                if (addr == -1) {
                    throw new VerbsException(Errno.ENOMEM, "cannot register " + segment.byteSize() + " bytes: the "
                            + "device's IOMMU window (" + config.iommuWindow() + " bytes) has no room left; "
                            + "deregister regions or unmap buffers, or configure a larger window");
                }
            }
            default -> {
                if (!needsBounce(segment)) {
                    addr = segment.address();
                } else if (!config.bounceRegistrations()) {
                    throw new VerbsException(Errno.EOPNOTSUPP, "cannot register memory at 0x"
                            + Long.toHexString(segment.address()) + "+" + segment.byteSize() + ": this device reaches it "
                            + "only through bounce buffers" + (config.forceBounce() ? " (bouncing is forced)" : " (beyond its "
                            + config.addressBits() + "-bit DMA mask)") + ", and a remote RDMA WRITE into a bounce "
                            + "buffer would stay invisible to the CPU, which never syncs a registration. Linux refuses "
                            + "it the same way (ib_umem maps with DMA_ATTR_REQUIRE_COHERENT). Use memory the device can "
                            + "address directly");
                } else {
                    addr = bounce.map(segment, true, Integer.MAX_VALUE);
                    if (addr == -1) {
                        throw new VerbsException(Errno.ENOMEM, "cannot register " + segment.byteSize()
                                + " bytes through the bounce pool: full");
                    }
                }
            }
        }
        if (checker != null) {
            checker.onMap(owner, DmaChecker.Type.REGION, addr, segment.byteSize(), DmaDirection.BIDIRECTIONAL, null);
        }
        return addr;
    }

    /**
     * {@return whether the engine may use the segment directly (no translation or bounce in between)}
     *
     * @param segment a registered segment
     * @param addr    what {@link #mapRegion} returned for it
     */
    public boolean regionDirect(MemorySegment segment, long addr) {
        return mode != DmaMode.IOMMU && addr == segment.address();
    }

    /**
     * Ends a registration's mapping (deregistration). A bounced registration is copied back first,
     * which is the only point where the CPU sees what remote peers wrote.
     *
     * @param addr what {@link #mapRegion} returned
     */
    public synchronized void unmapRegion(long addr) {
        if (checker != null) {
            checker.onRegionUnmapped(addr);
        }
        if (iommu != null) {
            iommu.unmap(addr);
        } else if (bounce != null && bounce.contains(addr)) {
            bounce.unmap(addr, true);
        }
    }

    // ------------------------------------------------------------------ engine side

    /**
     * Translates the start of a device access [addr, addr+len) to memory. A virtual device uses
     * {@code buffer} (the CPU memory the work request named) at offset {@code addr - buffer.address()};
     * an IOMMU walks its page table; a bounce device reaches its pool, or native memory inside its DMA
     * mask directly through {@code buffer}.
     *
     * @param addr   device address
     * @param len    bytes wanted (more than 0)
     * @param buffer the CPU memory the request named, or null
     * @param access {@link #READ} and/or {@link #WRITE}
     * @param out    receives the piece; its length may be less than len (call again for the rest)
     * @return false on a fault
     */
    public boolean translate(long addr, long len, MemorySegment buffer, int access, DmaPiece out) {
        if (virtual) {
            return direct(addr, len, buffer, out);
        }
        synchronized (this) {
            if (iommu != null) {
                return iommu.translate(addr, len, access, out);
            }
            if (bounce.contains(addr)) {
                return bounce.translate(addr, len, out);
            }
            if (buffer == null || !buffer.isNative() || addr + len - 1 > addressLimit) {
                return false; // a bus address the device cannot reach without a bounce buffer
            }
            return direct(addr, len, buffer, out);
        }
    }

    private static boolean direct(long addr, long len, MemorySegment buffer, DmaPiece out) {
        if (buffer == null) {
            return false;
        }
        long off = addr - buffer.address();
        if (off < 0 || len < 0 || off > buffer.byteSize() - len) {
            return false;
        }
        out.set(buffer, off, len);
        return true;
    }

    /**
     * Checks one device access at the moment it happens: an IOMMU looks the pages up again (an unmap
     * since translation faults), a bounce device checks the slots are still mapped, and the checker
     * records it. Call only when {@link #checksAccesses}.
     *
     * @param addr   device address, or {@link #NO_DMA} for the device's own memory
     * @param len    bytes
     * @param access {@link #READ} or {@link #WRITE}
     * @param memory the memory the access reaches (identifies heap arrays for the checker)
     * @return false on a fault
     */
    public boolean access(long addr, long len, int access, MemorySegment memory) {
        if (addr == NO_DMA || len == 0) {
            return true;
        }
        if (!virtual) {
            synchronized (this) {
                if (iommu != null) {
                    long a = addr;
                    long rem = len;
                    DmaPiece p = scratch;
                    while (rem > 0) {
                        if (!iommu.translate(a, rem, access, p)) {
                            return false;
                        }
                        a += p.length;
                        rem -= p.length;
                    }
                } else if (bounce.contains(addr) && !bounce.translate(addr, len, scratch)) {
                    return false;
                }
            }
        }
        if (checker != null) {
            checker.onAccess(addr, len, (access & WRITE) != 0, virtual && memory != null ? identity(memory) : null);
        }
        return true;
    }

    private final DmaPiece scratch = new DmaPiece();

    /** {@return IOMMU pages in use (0 in other modes)} */
    public synchronized int iommuPagesInUse() {
        return iommu == null ? 0 : iommu.usedPages();
    }

    /** The mapping calls of one owner. */
    private final class Session implements DmaOps {
        private final Object owner;

        Session(Object owner) {
            this.owner = owner;
        }

        @Override
        public long map(MemorySegment cpu, DmaDirection dir) {
            return DmaSpace.this.map(owner, cpu, dir);
        }

        @Override
        public void unmap(long dmaAddress, long size, DmaDirection dir) {
            DmaSpace.this.unmap(owner, dmaAddress, size, dir);
        }

        @Override
        public boolean mappingError(long dmaAddress) {
            if (checker != null) {
                checker.onMappingErrorCheck(dmaAddress);
            }
            return dmaAddress == Dma.MAPPING_ERROR;
        }

        @Override
        public int mapSg(DmaSgList sg, int nents, DmaDirection dir) {
            for (int i = 0; i < nents; i++) {
                // refuse a list with an unusable entry before mapping any of it (nothing to undo)
                MemorySegment b = sg.buffer(i);
                String why = b.isNative() ? unusable(b) : null;
                if (why != null) {
                    throw new IllegalArgumentException("cannot DMA-map entry " + i + " (0x"
                            + Long.toHexString(b.address()) + "+" + b.byteSize() + "): " + why);
                }
            }
            for (int i = 0; i < nents; i++) {
                long a = DmaSpace.this.map(owner, sg.buffer(i), dir);
                if (a == Dma.MAPPING_ERROR) {
                    if (checker != null) {
                        checker.onMappingErrorCheck(a);
                    }
                    for (int j = 0; j < i; j++) {
                        mappingError(sg.dmaAddress(j));
                        DmaSpace.this.unmap(owner, sg.dmaAddress(j), sg.dmaLength(j), dir);
                        sg.dmaAddress(j, Dma.MAPPING_ERROR);
                    }
                    return 0;
                }
                sg.dmaAddress(i, a);
                if (checker != null) {
                    checker.onMappingErrorCheck(a); // map_sg reports failure by its count, which the caller checks
                }
            }
            return nents;
        }

        @Override
        public void unmapSg(DmaSgList sg, int nents, DmaDirection dir) {
            for (int i = 0; i < nents; i++) {
                DmaSpace.this.unmap(owner, sg.dmaAddress(i), sg.dmaLength(i), dir);
            }
        }

        @Override
        public void syncForCpu(long dmaAddress, long size, DmaDirection dir) {
            sync(dmaAddress, size, dir, true);
        }

        @Override
        public void syncForDevice(long dmaAddress, long size, DmaDirection dir) {
            sync(dmaAddress, size, dir, false);
        }

        @Override
        public CoherentBuffer allocCoherent(long size) {
            return DmaSpace.this.allocCoherent(owner, size);
        }

        @Override
        public void freeCoherent(CoherentBuffer buffer) {
            DmaSpace.this.freeCoherent(owner, buffer);
        }
    }
}
