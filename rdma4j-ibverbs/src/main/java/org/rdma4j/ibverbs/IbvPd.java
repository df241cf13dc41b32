// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentSkipListMap;

import org.rdma4j.libc.Errors;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.SharedReceiveQueue;
import org.rdma4j.verbs.VerbsException;

/** A protection domain ({@code struct ibv_pd}). Thread-safe. */
final class IbvPd extends IbvObject implements ProtectionDomain {
    final IbvContext ctx;
    /** Registered regions by start address: inline data given by address is read only from these. */
    private final ConcurrentSkipListMap<Long, IbvMr> regions = new ConcurrentSkipListMap<>();

    private IbvPd(IbvContext ctx, MemorySegment ptr) {
        super(ptr);
        this.ctx = ctx;
    }

    static IbvPd alloc(IbvContext ctx) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment p = (MemorySegment) Ibv.ALLOC_PD.invokeExact(st, ctx.ptr);
            if (p.equals(MemorySegment.NULL)) {
                throw IbvErrors.failed("ibv_alloc_pd", Ibv.errno(st), ctx.device.name());
            }
            return new IbvPd(ctx, p.reinterpret(IbvLayouts.PD.byteSize()));
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    @Override
    String describe() {
        return "PD on " + ctx.device.name();
    }

    @Override
    public IbvContext context() {
        return ctx;
    }

    /**
     * ibv_reg_mr over a native segment. The region holds the segment (and so its arena's memory, for an
     * automatic arena) until it is deregistered; the device writes that memory until then, so an arena
     * closed under a live region hands the pinned pages back to the allocator while the device still
     * reaches them, as {@code free()} under a C region would. Page-aligned segments avoid pinning (and,
     * with fork support, marking {@code MADV_DONTFORK}) the neighbouring data on the same pages.
     */
    @Override
    public MemoryRegion regMr(MemorySegment segment, Set<AccessFlag> access) {
        if (segment == null) {
            throw new VerbsException(Errno.EINVAL, "ibv_reg_mr: the segment is null");
        }
        if (!segment.isNative()) {
            throw new VerbsException(Errno.EINVAL, "ibv_reg_mr: a heap segment cannot be registered (the GC moves "
                    + "it; a device can only reach native memory): allocate it from an Arena");
        }
        if (!segment.scope().isAlive()) {
            throw new VerbsException(Errno.EINVAL, "ibv_reg_mr: the segment's arena is closed");
        }
        if (segment.byteSize() == 0) {
            throw new VerbsException(Errno.EINVAL, "ibv_reg_mr: the segment is empty");
        }
        int bits = AccessFlag.toBits(access);
        // ib_check_mr_access: remote write and remote atomic need local write (kernel verbs.h)
        if ((bits & (AccessFlag.REMOTE_WRITE.bit() | AccessFlag.REMOTE_ATOMIC.bit())) != 0
                && (bits & AccessFlag.LOCAL_WRITE.bit()) == 0) {
            throw new VerbsException(Errno.EINVAL, "ibv_reg_mr: REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE ("
                    + access + ")");
        }
        enter("ibv_reg_mr");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment mr = (MemorySegment) Ibv.REG_MR.invokeExact(st, ptr, segment, segment.byteSize(), bits);
            if (mr.equals(MemorySegment.NULL)) {
                int e = Ibv.errno(st);
                if (e == Errors.ENOMEM) {
                    throw IbvErrors.regMrNoMemory(segment.byteSize(), ctx.device.name());
                }
                throw IbvErrors.failed("ibv_reg_mr", e, segment.byteSize() + " bytes at 0x"
                        + Long.toHexString(segment.address()) + ", access " + access + ", " + ctx.device.name());
            }
            IbvMr m = IbvMr.of(this, mr.reinterpret(IbvLayouts.MR.byteSize()), segment, access);
            children.add(m);
            regions.put(m.address(), m);
            return m;
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        } finally {
            exit();
        }
    }

    void removed(IbvMr mr) {
        regions.remove(mr.address(), mr);
        children.remove(mr);
    }

    /**
     * {@return true when [addr, addr+len) lies inside one live region of this PD whose memory is alive}
     *
     * @param addr a virtual address
     * @param len  bytes from it
     */
    boolean registered(long addr, long len) {
        Map.Entry<Long, IbvMr> e = regions.floorEntry(addr);
        if (e == null) {
            return false;
        }
        IbvMr mr = e.getValue();
        return !mr.isClosed() && mr.segment().scope().isAlive() && len >= 0
                && addr + len <= mr.address() + mr.length();
    }

    @Override
    public int localDmaLkey() {
        throw new VerbsException(Errno.EOPNOTSUPP, "local DMA L_Key: " + IbvDmaOps.why(ctx.device.name()));
    }

    @Override
    public QueuePair createQp(QpInitAttributes attrs) {
        return createQp(attrs, IbvQp.VERBS);
    }

    /**
     * @param attrs     creation attributes
     * @param lifecycle libibverbs, or librdmacm for a CM ID's QP
     * @return the QP, a child of this PD
     */
    IbvQp createQp(QpInitAttributes attrs, IbvQp.Lifecycle lifecycle) {
        enter("ibv_create_qp");
        try {
            IbvQp qp = IbvQp.create(this, attrs, lifecycle);
            children.add(qp);
            return qp;
        } finally {
            exit();
        }
    }

    @Override
    public SharedReceiveQueue createSrq(int maxWr, int maxSge) {
        enter("ibv_create_srq");
        try {
            IbvSrq srq = IbvSrq.create(this, maxWr, maxSge);
            children.add(srq);
            return srq;
        } finally {
            exit();
        }
    }

    @Override
    public AddressHandle createAh(AhAttributes attrs) {
        enter("ibv_create_ah");
        try {
            IbvAh ah = IbvAh.create(this, attrs);
            children.add(ah);
            return ah;
        } finally {
            exit();
        }
    }

    @Override
    public void close() {
        if (!beginDestroy("ibv_dealloc_pd")) {
            return;
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            int rc = (int) Ibv.DEALLOC_PD.invokeExact(st, ptr);
            if (rc != 0) {
                destroyFailed();
                throw IbvErrors.failed("ibv_dealloc_pd", Ibv.err(rc, st), describe());
            }
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
        ctx.children.remove(this);
    }
}
