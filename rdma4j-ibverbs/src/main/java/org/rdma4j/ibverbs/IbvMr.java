// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.EnumSet;
import java.util.Set;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.VerbsException;

/** A registered memory region ({@code struct ibv_mr}); holds its segment until deregistered. Thread-safe. */
final class IbvMr extends IbvObject implements MemoryRegion {
    private static final long CONTEXT = IbvLayouts.offset(IbvLayouts.MR, "context");
    private static final long PD = IbvLayouts.offset(IbvLayouts.MR, "pd");
    private static final long ADDR = IbvLayouts.offset(IbvLayouts.MR, "addr");
    private static final long LENGTH = IbvLayouts.offset(IbvLayouts.MR, "length");
    private static final long LKEY = IbvLayouts.offset(IbvLayouts.MR, "lkey");
    private static final long RKEY = IbvLayouts.offset(IbvLayouts.MR, "rkey");

    private final IbvPd pd;
    /** Strong reference: the registered memory stays reachable while the device may touch it. */
    private final MemorySegment segment;
    private final EnumSet<AccessFlag> access;
    private final int lkey;
    private final int rkey;

    private IbvMr(IbvPd pd, MemorySegment ptr, MemorySegment segment, Set<AccessFlag> access) {
        super(ptr);
        this.pd = pd;
        this.segment = segment;
        this.access = EnumSet.noneOf(AccessFlag.class);
        this.access.addAll(access);
        this.lkey = ptr.get(ValueLayout.JAVA_INT, LKEY);
        this.rkey = ptr.get(ValueLayout.JAVA_INT, RKEY);
    }

    static IbvMr of(IbvPd pd, MemorySegment ptr, MemorySegment segment, Set<AccessFlag> access) {
        // a run-time check of the layout: the struct must echo what was registered
        if (ptr.get(ValueLayout.ADDRESS, CONTEXT).address() != pd.ctx.ptr.address()
                || ptr.get(ValueLayout.ADDRESS, PD).address() != pd.ptr.address()
                || ptr.get(ValueLayout.ADDRESS, ADDR).address() != segment.address()
                || ptr.get(ValueLayout.JAVA_LONG, LENGTH) != segment.byteSize()) {
            throw new VerbsException(Errno.EOPNOTSUPP, "libibverbs' struct ibv_mr differs from the layout this "
                    + "provider was written for (context/pd/addr/length do not echo the registration); the region "
                    + "is left registered rather than trusted");
        }
        return new IbvMr(pd, ptr, segment, access);
    }

    @Override
    String describe() {
        return "MR 0x" + Integer.toHexString(lkey) + " (" + segment.byteSize() + " bytes) on " + pd.ctx.device.name();
    }

    @Override
    public IbvPd pd() {
        return pd;
    }

    @Override
    public MemorySegment segment() {
        return segment;
    }

    @Override
    public long address() {
        return segment.address();
    }

    @Override
    public long length() {
        return segment.byteSize();
    }

    @Override
    public int lkey() {
        return lkey;
    }

    @Override
    public int rkey() {
        return rkey;
    }

    @Override
    public Set<AccessFlag> access() {
        return EnumSet.copyOf(access);
    }

    @Override
    public void close() {
        if (!beginDestroy("ibv_dereg_mr")) {
            return;
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            int rc = (int) Ibv.DEREG_MR.invokeExact(st, ptr);
            if (rc != 0) {
                destroyFailed();
                throw IbvErrors.failed("ibv_dereg_mr", Ibv.err(rc, st), describe());
            }
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
        pd.removed(this);
    }
}
