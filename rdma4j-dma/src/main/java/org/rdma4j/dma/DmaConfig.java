// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.dma;

import java.util.Locale;
import java.util.function.Function;

/**
 * How one device reaches host memory: configuration, not code. The same engine runs as a virtual
 * (ipath/rxe-like) device or as simulated DMA hardware behind an IOMMU or bounce buffers.
 *
 * @param mode                the way the device reaches memory
 * @param iommuWindow         bytes of IO virtual address space (IOMMU mode), a multiple of 4 KiB
 * @param bouncePool          bytes of bounce buffer (BOUNCE mode), a multiple of 2 KiB
 * @param addressBits         BOUNCE mode: native memory whose addresses fit in this many bits is reached
 *                            directly (the device's DMA mask); above it, and all heap memory, is bounced
 * @param forceBounce         BOUNCE mode: bounce every per-I/O mapping (Linux swiotlb=force)
 * @param bounceRegistrations BOUNCE mode: let memory registration go through bounce buffers instead of
 *                            failing. Breaks RDMA: a remote write stays in the bounce buffer until a
 *                            sync (Windows Driver Verifier's DMA double buffering, the seed's problem).
 *                            For demonstrations only
 * @param checker             record every mapping and device access and report misuse
 */
public record DmaConfig(DmaMode mode, long iommuWindow, long bouncePool, int addressBits, boolean forceBounce,
        boolean bounceRegistrations, boolean checker) {
    /** Default IOMMU window: 64 MiB. */
    public static final long DEFAULT_IOMMU_WINDOW = 64L << 20;
    /** Default bounce pool: 4 MiB. */
    public static final long DEFAULT_BOUNCE_POOL = 4L << 20;

    /** Validates the values. */
    public DmaConfig {
        if (mode == null) {
            throw new IllegalArgumentException("mode is null");
        }
        if (iommuWindow < IommuPageTable.PAGE_SIZE || (iommuWindow & (IommuPageTable.PAGE_SIZE - 1)) != 0
                || iommuWindow > (1L << 40)) {
            throw new IllegalArgumentException("iommuWindow " + iommuWindow + " (expected a multiple of 4096, at most 1 TiB)");
        }
        if (bouncePool < BouncePool.SLOT_SIZE || (bouncePool & (BouncePool.SLOT_SIZE - 1)) != 0
                || bouncePool > (1L << 31)) {
            throw new IllegalArgumentException("bouncePool " + bouncePool + " (expected a multiple of 2048, at most 2 GiB)");
        }
        if (addressBits < 12 || addressBits > 64) {
            throw new IllegalArgumentException("addressBits " + addressBits + " (expected 12..64)");
        }
    }

    /** {@return a virtual device (the soft device's default): DMA address = buffer address, no checker} */
    public static DmaConfig virtual() {
        return new DmaConfig(DmaMode.VIRTUAL, DEFAULT_IOMMU_WINDOW, DEFAULT_BOUNCE_POOL, 64, false, false, false);
    }

    /** {@return a device behind an IOMMU with the default window} */
    public static DmaConfig iommu() {
        return virtual().withMode(DmaMode.IOMMU);
    }

    /** {@return a device with bounce buffers (the default pool) for what it cannot reach} */
    public static DmaConfig bounce() {
        return virtual().withMode(DmaMode.BOUNCE);
    }

    /**
     * {@return a copy with it}
     *
     * @param m mode
     */
    public DmaConfig withMode(DmaMode m) {
        return new DmaConfig(m, iommuWindow, bouncePool, addressBits, forceBounce, bounceRegistrations, checker);
    }

    /**
     * {@return a copy with it}
     *
     * @param bytes window
     */
    public DmaConfig withIommuWindow(long bytes) {
        return new DmaConfig(mode, bytes, bouncePool, addressBits, forceBounce, bounceRegistrations, checker);
    }

    /**
     * {@return a copy with it}
     *
     * @param bytes pool size
     */
    public DmaConfig withBouncePool(long bytes) {
        return new DmaConfig(mode, iommuWindow, bytes, addressBits, forceBounce, bounceRegistrations, checker);
    }

    /**
     * {@return a copy with it}
     *
     * @param bits DMA mask width
     */
    public DmaConfig withAddressBits(int bits) {
        return new DmaConfig(mode, iommuWindow, bouncePool, bits, forceBounce, bounceRegistrations, checker);
    }

    /**
     * {@return a copy with it}
     *
     * @param on bounce everything
     */
    public DmaConfig withForceBounce(boolean on) {
        return new DmaConfig(mode, iommuWindow, bouncePool, addressBits, on, bounceRegistrations, checker);
    }

    /**
     * {@return a copy with it}
     *
     * @param on allow registrations through bounce buffers
     */
    public DmaConfig withBounceRegistrations(boolean on) {
        return new DmaConfig(mode, iommuWindow, bouncePool, addressBits, forceBounce, on, checker);
    }

    /**
     * {@return a copy with it}
     *
     * @param on checker on or off
     */
    public DmaConfig withChecker(boolean on) {
        return new DmaConfig(mode, iommuWindow, bouncePool, addressBits, forceBounce, bounceRegistrations, on);
    }

    /**
     * Reads a configuration from properties named {@code prefix} (the mode: virtual, iommu or bounce)
     * and {@code prefix.iommuWindow}, {@code .bouncePool} (sizes, with an optional k/m/g suffix),
     * {@code .addressBits}, {@code .forceBounce}, {@code .bounceRegistrations}, {@code .checker}
     * (true/false). Missing properties keep the defaults of {@link #virtual()}.
     *
     * @param prefix e.g. {@code rdma4j.soft.dma}
     * @param lookup property source, e.g. {@code System::getProperty}
     * @return the configuration
     * @throws IllegalArgumentException naming the property with a bad value
     */
    public static DmaConfig fromProperties(String prefix, Function<String, String> lookup) {
        DmaConfig c = virtual();
        String m = lookup.apply(prefix);
        if (m != null && !m.isBlank()) {
            try {
                c = c.withMode(DmaMode.valueOf(m.trim().toUpperCase(Locale.ROOT)));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException(prefix + "=" + m + " (expected virtual, iommu or bounce)");
            }
        }
        String v;
        if ((v = lookup.apply(prefix + ".iommuWindow")) != null) {
            c = c.withIommuWindow(size(prefix + ".iommuWindow", v));
        }
        if ((v = lookup.apply(prefix + ".bouncePool")) != null) {
            c = c.withBouncePool(size(prefix + ".bouncePool", v));
        }
        if ((v = lookup.apply(prefix + ".addressBits")) != null) {
            c = c.withAddressBits((int) size(prefix + ".addressBits", v));
        }
        if ((v = lookup.apply(prefix + ".forceBounce")) != null) {
            c = c.withForceBounce(bool(prefix + ".forceBounce", v));
        }
        if ((v = lookup.apply(prefix + ".bounceRegistrations")) != null) {
            c = c.withBounceRegistrations(bool(prefix + ".bounceRegistrations", v));
        }
        if ((v = lookup.apply(prefix + ".checker")) != null) {
            c = c.withChecker(bool(prefix + ".checker", v));
        }
        return c;
    }

    private static long size(String name, String v) {
        String s = v.trim().toLowerCase(Locale.ROOT);
        long mult = 1;
        if (s.endsWith("k")) {
            mult = 1L << 10;
        } else if (s.endsWith("m")) {
            mult = 1L << 20;
        } else if (s.endsWith("g")) {
            mult = 1L << 30;
        }
        if (mult != 1) {
            s = s.substring(0, s.length() - 1);
        }
        try {
            return Math.multiplyExact(Long.parseLong(s), mult);
        } catch (NumberFormatException | ArithmeticException e) {
            throw new IllegalArgumentException(name + "=" + v + " (expected a number with an optional k, m or g suffix)");
        }
    }

    private static boolean bool(String name, String v) {
        String s = v.trim().toLowerCase(Locale.ROOT);
        if (s.equals("true") || s.equals("on")) {
            return true;
        }
        if (s.equals("false") || s.equals("off")) {
            return false;
        }
        throw new IllegalArgumentException(name + "=" + v + " (expected true or false)");
    }
}
