// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.foreign.MemorySegment;
import java.util.Set;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;

/**
 * A registered memory region. L_Key equals R_Key, as on rxe. Registration is the long-term DMA
 * mapping of the region ({@link org.rdma4j.dma.DmaSpace#mapRegion}): the engine reaches it at
 * {@link #dmaAddr}, directly through the segment when {@link #direct}, else by translation.
 */
final class SoftMr extends SoftResource implements MemoryRegion {
    final SoftPd pd;
    final MemorySegment segment;
    final long address;
    final long length;
    final int access;
    volatile int key;
    /** The device address of the first byte: the VA (virtual, direct), an IOVA, or a bounce address. */
    final long dmaAddr;
    /** Whether the engine may use {@link #segment} directly. */
    final boolean direct;

    SoftMr(SoftPd pd, MemorySegment segment, int access, long dmaAddr) {
        this.pd = pd;
        this.segment = segment;
        this.address = segment.address();
        this.length = segment.byteSize();
        this.access = access;
        this.dmaAddr = dmaAddr;
        this.direct = pd.device.dma.regionDirect(segment, dmaAddr);
    }

    /** {@return the device address of the first byte (the registration's DMA mapping)} */
    long dmaAddress() {
        return dmaAddr;
    }

    @Override
    String describe() {
        return "MR(lkey=0x" + Integer.toHexString(key) + ", " + length + " bytes)";
    }

    /** {@return whether [addr, addr+len) lies in the region (len may be 0)} */
    boolean contains(long addr, long len) {
        long off = addr - address;
        return off >= 0 && len >= 0 && off <= length && len <= length - off;
    }

    boolean allows(int accessBits) {
        return (access & accessBits) == accessBits;
    }

    @Override
    public ProtectionDomain pd() {
        return pd;
    }

    @Override
    public MemorySegment segment() {
        return segment;
    }

    @Override
    public long address() {
        return address;
    }

    @Override
    public long length() {
        return length;
    }

    @Override
    public int lkey() {
        return key;
    }

    @Override
    public int rkey() {
        return key;
    }

    @Override
    public Set<AccessFlag> access() {
        return AccessFlag.fromBits(access);
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        pd.device.removeMr(key);
        pd.device.dma.unmapRegion(dmaAddr);
        pd.children.remove(this);
    }
}
