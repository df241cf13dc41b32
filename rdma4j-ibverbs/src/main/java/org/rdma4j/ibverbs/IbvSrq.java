// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.rdma4j.libc.Errors;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SharedReceiveQueue;
import org.rdma4j.verbs.VerbsException;

/** A shared receive queue ({@code struct ibv_srq}); posts go through {@code ops.post_srq_recv}. Thread-safe. */
final class IbvSrq extends IbvObject implements SharedReceiveQueue {
    private static final long INIT_ATTR = IbvLayouts.offset(IbvLayouts.SRQ_INIT_ATTR, "attr");
    private static final long MAX_WR = IbvLayouts.offset(IbvLayouts.SRQ_ATTR, "max_wr");
    private static final long MAX_SGE = IbvLayouts.offset(IbvLayouts.SRQ_ATTR, "max_sge");
    private static final long SRQ_LIMIT = IbvLayouts.offset(IbvLayouts.SRQ_ATTR, "srq_limit");
    private static final int IBV_SRQ_LIMIT = 1 << 1;

    final IbvPd pd;
    private final int maxWr;
    private final int maxSge;
    private final MemorySegment postFn;
    private final Arena arena = Arena.ofShared();
    private final Object recvLock = new Object();
    private final MemorySegment slots;
    private final MemorySegment sges;
    private final MemorySegment bad;
    private final RecvWorkRequest[] one = new RecvWorkRequest[1];
    /**
     * The limit as this provider last set it, for a device whose user-space provider has no
     * {@code ibv_query_srq} (rdma-core 44's siw: no {@code query_srq} in its ops, so libibverbs answers
     * EOPNOTSUPP though the kernel's siw_query_srq exists): set by {@link #armLimit}, cleared when the
     * device reports SRQ_LIMIT_REACHED (the limit is one-shot: the device disarms it as it fires).
     */
    private volatile int armedLimit;

    private IbvSrq(IbvPd pd, MemorySegment ptr, int maxWr, int maxSge) {
        super(ptr);
        this.pd = pd;
        this.maxWr = maxWr;
        this.maxSge = Math.max(1, maxSge);
        this.postFn = pd.ctx.postSrqRecvFn;
        this.slots = arena.allocate(WrCodec.RECV_WR_SIZE * IbvQp.CHAIN, 8);
        this.sges = arena.allocate(WrCodec.SGE_SIZE * this.maxSge * IbvQp.CHAIN, 8);
        this.bad = arena.allocate(ValueLayout.ADDRESS);
    }

    static IbvSrq create(IbvPd pd, int maxWr, int maxSge) {
        if (maxWr < 1 || maxSge < 1) {
            throw new VerbsException(Errno.EINVAL, "ibv_create_srq: max_wr=" + maxWr + ", max_sge=" + maxSge
                    + " (expected >= 1)");
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment init = a.allocate(IbvLayouts.SRQ_INIT_ATTR);
            init.set(ValueLayout.JAVA_INT, INIT_ATTR + MAX_WR, maxWr);
            init.set(ValueLayout.JAVA_INT, INIT_ATTR + MAX_SGE, maxSge);
            MemorySegment p = (MemorySegment) Ibv.CREATE_SRQ.invokeExact(st, pd.ptr, init);
            if (p.equals(MemorySegment.NULL)) {
                throw IbvErrors.failed("ibv_create_srq", Ibv.errno(st), "max_wr " + maxWr + ", max_sge " + maxSge
                        + " on " + pd.ctx.device.name());
            }
            // ibv_create_srq.3: the attr is updated with the actual values; rxe (6.1) answers with what was asked
            // and rounds the queue up to 2^n - 1, which ibv_query_srq reports (rxe_query_srq: index_mask) and
            // srq_limit is checked against (rxe_srq_chk_attr): take the larger, what the SRQ holds
            int maxWrGranted = init.get(ValueLayout.JAVA_INT, INIT_ATTR + MAX_WR);
            MemorySegment q = a.allocate(IbvLayouts.SRQ_ATTR);
            if ((int) Ibv.QUERY_SRQ.invokeExact(st, p, q) == 0) {
                maxWrGranted = Math.max(maxWrGranted, q.get(ValueLayout.JAVA_INT, MAX_WR));
            }
            IbvSrq srq = new IbvSrq(pd, p.reinterpret(IbvLayouts.SRQ.byteSize()), maxWrGranted,
                    init.get(ValueLayout.JAVA_INT, INIT_ATTR + MAX_SGE));
            pd.ctx.srqs.put(p.address(), srq);
            return srq;
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    @Override
    String describe() {
        return "SRQ of " + maxWr + " on " + pd.ctx.device.name();
    }

    @Override
    public IbvPd pd() {
        return pd;
    }

    @Override
    public int maxWr() {
        return maxWr;
    }

    @Override
    public int maxSge() {
        return maxSge;
    }

    @Override
    public int limit() {
        enter("ibv_query_srq");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment attr = a.allocate(IbvLayouts.SRQ_ATTR);
            int rc = (int) Ibv.QUERY_SRQ.invokeExact(st, ptr, attr);
            if (rc != 0) {
                int e = Ibv.err(rc, st);
                if (e == Errors.EOPNOTSUPP) {
                    return armedLimit; // siw: what we armed, 0 once it fired (see armedLimit)
                }
                throw IbvErrors.failed("ibv_query_srq", e, describe());
            }
            return attr.get(ValueLayout.JAVA_INT, SRQ_LIMIT);
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        } finally {
            exit();
        }
    }

    @Override
    public void armLimit(int limit) {
        enter("ibv_modify_srq");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment attr = a.allocate(IbvLayouts.SRQ_ATTR);
            attr.set(ValueLayout.JAVA_INT, SRQ_LIMIT, limit);
            int rc = (int) Ibv.MODIFY_SRQ.invokeExact(st, ptr, attr, IBV_SRQ_LIMIT);
            if (rc != 0) {
                throw IbvErrors.failed("ibv_modify_srq", Ibv.err(rc, st), describe() + " limit " + limit);
            }
            armedLimit = limit;
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        } finally {
            exit();
        }
    }

    /** The device reported SRQ_LIMIT_REACHED for this SRQ (called by the context's async agent). */
    void limitReached() {
        armedLimit = 0;
    }

    @Override
    public boolean postRecv(RecvWorkRequest wr) {
        synchronized (recvLock) {
            one[0] = wr;
            try {
                return post(one, 1) == 1;
            } finally {
                one[0] = null;
            }
        }
    }

    @Override
    public int postRecv(RecvWorkRequest[] wrs, int count) {
        if (count < 0 || count > wrs.length) {
            throw new IllegalArgumentException("count " + count + " for " + wrs.length + " requests");
        }
        synchronized (recvLock) {
            return post(wrs, count);
        }
    }

    private int post(RecvWorkRequest[] wrs, int count) {
        if (!uses.tryEnter()) {
            if (count > 0) {
                wrs[0].postError(Errno.EINVAL, "ibv_post_srq_recv: " + describe() + " is destroyed");
            }
            return 0;
        }
        try {
            return IbvQp.postRecvChain(postFn, ptr, wrs, count, slots, sges, maxSge, bad);
        } finally {
            uses.exit();
        }
    }

    @Override
    public void close() {
        if (!beginDestroy("ibv_destroy_srq")) {
            return;
        }
        synchronized (recvLock) {
            pd.ctx.events.release(this);
            try (Arena a = Arena.ofConfined()) {
                MemorySegment st = Ibv.newCallState(a);
                int rc = (int) Ibv.DESTROY_SRQ.invokeExact(st, ptr);
                if (rc != 0) {
                    destroyFailed();
                    throw IbvErrors.failed("ibv_destroy_srq", Ibv.err(rc, st), describe());
                }
            } catch (VerbsException e) {
                throw e;
            } catch (Throwable t) {
                throw Ibv.rethrow(t);
            }
        }
        pd.ctx.srqs.remove(ptr.address());
        pd.children.remove(this);
        arena.close();
    }
}
