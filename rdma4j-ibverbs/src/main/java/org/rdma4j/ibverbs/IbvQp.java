// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.ScatterGatherEntry;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WrOpcode;

/**
 * A queue pair ({@code struct ibv_qp}). Posting serialises the work requests into native {@code ibv_send_wr}
 * / {@code ibv_recv_wr} arrays the QP owns and reuses (chains of up to {@link #CHAIN} per downcall, nothing
 * allocated per post), then calls the context's {@code ops.post_send} / {@code ops.post_recv}, as the inline
 * {@code ibv_post_send} does. Providers copy the requests during the call, so the arrays are free again when
 * it returns. Thread-safe: each queue's posts are serialised on it.
 *
 * <p>Inline data is the one place where a provider reads memory at an address we give it, in user space
 * (rxe and siw copy it into the send queue inside the call): an inline entry must therefore name memory
 * that is alive, either a segment ({@link ScatterGatherEntry#inline}; a heap segment is copied to native
 * staging memory first) or an address inside a live region of this QP's PD. Anything else is refused with
 * EINVAL instead of letting the provider read an arbitrary address.
 */
final class IbvQp extends IbvObject implements QueuePair {
    /** Work requests per post downcall; a longer chain is posted in pieces, stopping at the first refusal. */
    static final int CHAIN = 32;
    private static final long CONTEXT = IbvLayouts.offset(IbvLayouts.QP, "context");
    private static final long PD = IbvLayouts.offset(IbvLayouts.QP, "pd");
    private static final long QP_NUM = IbvLayouts.offset(IbvLayouts.QP, "qp_num");
    private static final long INIT_CAP = IbvLayouts.offset(IbvLayouts.QP_INIT_ATTR, "cap");

    final IbvPd pd;
    final IbvContext ctx;
    private final QpType type;
    private final int qpNum;
    private final QpCapabilities cap;
    private final IbvCq sendCq;
    private final IbvCq recvCq;
    private final IbvSrq srq;
    private final MemorySegment postSendFn;
    private final MemorySegment postRecvFn;

    private final Arena arena = Arena.ofShared();
    private final Object sendLock = new Object();
    private final MemorySegment sendWrs;
    private final MemorySegment sendSges;
    private final int sendSgeMax;
    private final int readSgeMax;
    /**
     * Leave zero-length gather entries out of WRITEs and SENDs (iWARP: siw 6.1 oopses on one, WrCodec.writeSend);
     * a READ keeps its one sink entry (siw reads sge[0] of a READ whatever num_sge says).
     */
    private final boolean dropEmptySges;
    private final MemorySegment staging;
    private final int stagingPerWr;
    private final MemorySegment sendBad;
    private final long[] inlineAddrs;
    private final IbvAh[] ahs = new IbvAh[CHAIN];
    private final SendWorkRequest[] oneSend = new SendWorkRequest[1];
    private final Object recvLock = new Object();
    private final MemorySegment recvWrs;
    private final MemorySegment recvSges;
    private final int recvSgeMax;
    private final MemorySegment recvBad;
    private final RecvWorkRequest[] oneRecv = new RecvWorkRequest[1];
    private final Lifecycle lifecycle;

    /**
     * How the native QP is made and destroyed: by libibverbs ({@link #VERBS}), or by librdmacm for a CM ID
     * (rdma_create_qp / rdma_destroy_qp, which also clear the ID's {@code qp} pointer).
     */
    interface Lifecycle {
        /**
         * @return the new QP, or NULL with errno in {@code st}
         */
        MemorySegment create(MemorySegment st, MemorySegment pd, MemorySegment init) throws Throwable;

        /**
         * @return 0, or an errno
         */
        int destroy(MemorySegment st, MemorySegment qp) throws Throwable;
    }

    /** ibv_create_qp / ibv_destroy_qp. */
    static final Lifecycle VERBS = new Lifecycle() {
        @Override
        public MemorySegment create(MemorySegment st, MemorySegment pd, MemorySegment init) throws Throwable {
            return (MemorySegment) Ibv.CREATE_QP.invokeExact(st, pd, init);
        }

        @Override
        public int destroy(MemorySegment st, MemorySegment qp) throws Throwable {
            return (int) Ibv.DESTROY_QP.invokeExact(st, qp);
        }
    };

    private IbvQp(IbvPd pd, MemorySegment ptr, QpType type, QpCapabilities cap, IbvCq sendCq, IbvCq recvCq,
            IbvSrq srq, Lifecycle lifecycle) {
        super(ptr);
        this.lifecycle = lifecycle;
        this.pd = pd;
        this.ctx = pd.ctx;
        this.type = type;
        this.qpNum = ptr.get(ValueLayout.JAVA_INT, QP_NUM);
        this.cap = cap;
        this.sendCq = sendCq;
        this.recvCq = recvCq;
        this.srq = srq;
        this.postSendFn = ctx.postSendFn;
        this.postRecvFn = ctx.postRecvFn;
        this.sendSgeMax = Math.max(1, cap.maxSendSge());
        this.dropEmptySges = ctx.device.isIwarp();
        int rd = ctx.maxSgeRd();
        this.readSgeMax = rd > 0 ? rd : sendSgeMax;
        this.sendWrs = arena.allocate(WrCodec.SEND_WR_SIZE * CHAIN, 8);
        this.sendSges = arena.allocate(WrCodec.SGE_SIZE * sendSgeMax * CHAIN, 8);
        this.stagingPerWr = (Math.max(0, cap.maxInlineData()) + 7) & ~7;
        this.staging = arena.allocate(Math.max(8L, (long) stagingPerWr * CHAIN), 8);
        this.sendBad = arena.allocate(ValueLayout.ADDRESS);
        this.inlineAddrs = new long[sendSgeMax];
        this.recvSgeMax = Math.max(1, cap.maxRecvSge());
        this.recvWrs = arena.allocate(WrCodec.RECV_WR_SIZE * CHAIN, 8);
        this.recvSges = arena.allocate(WrCodec.SGE_SIZE * recvSgeMax * CHAIN, 8);
        this.recvBad = arena.allocate(ValueLayout.ADDRESS);
    }

    static IbvQp create(IbvPd pd, QpInitAttributes attrs) {
        return create(pd, attrs, VERBS);
    }

    /**
     * @param pd        the PD
     * @param attrs     creation attributes
     * @param lifecycle who makes and destroys the native QP
     * @return the QP
     */
    static IbvQp create(IbvPd pd, QpInitAttributes attrs, Lifecycle lifecycle) {
        IbvCq scq = cq(pd, attrs.sendCq(), "send");
        IbvCq rcq = cq(pd, attrs.recvCq(), "receive");
        IbvSrq srq = null;
        if (attrs.srq() != null) {
            if (!(attrs.srq() instanceof IbvSrq s) || s.pd != pd || s.isClosed()) {
                throw new VerbsException(Errno.EINVAL, "ibv_create_qp: the SRQ is closed or of another PD");
            }
            srq = s;
        }
        QpType type = attrs.type();
        QpCapabilities c = attrs.cap();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment init = a.allocate(IbvLayouts.QP_INIT_ATTR);
            init.set(ValueLayout.ADDRESS, IbvLayouts.offset(IbvLayouts.QP_INIT_ATTR, "send_cq"), scq.ptr);
            init.set(ValueLayout.ADDRESS, IbvLayouts.offset(IbvLayouts.QP_INIT_ATTR, "recv_cq"), rcq.ptr);
            init.set(ValueLayout.ADDRESS, IbvLayouts.offset(IbvLayouts.QP_INIT_ATTR, "srq"),
                    srq == null ? MemorySegment.NULL : srq.ptr);
            IbvAttrs.qpCap(init, INIT_CAP, c);
            init.set(ValueLayout.JAVA_INT, IbvLayouts.offset(IbvLayouts.QP_INIT_ATTR, "qp_type"), type.value());
            init.set(ValueLayout.JAVA_INT, IbvLayouts.offset(IbvLayouts.QP_INIT_ATTR, "sq_sig_all"),
                    attrs.sqSigAll() ? 1 : 0);
            MemorySegment p = lifecycle.create(st, pd.ptr, init);
            if (p.equals(MemorySegment.NULL)) {
                throw IbvErrors.failed("ibv_create_qp", Ibv.errno(st), type + " " + c + " on " + pd.ctx.device.name());
            }
            p = p.reinterpret(IbvLayouts.QP.byteSize());
            if (p.get(ValueLayout.ADDRESS, CONTEXT).address() != pd.ctx.ptr.address()
                    || p.get(ValueLayout.ADDRESS, PD).address() != pd.ptr.address()) {
                throw new VerbsException(Errno.EOPNOTSUPP, "libibverbs' struct ibv_qp differs from the layout this "
                        + "provider was written for (ibv_qp.context/pd are not the context and PD)");
            }
            // ibv_create_qp.3: "will update the qp_init_attr->cap struct with the actual QP values"; rxe
            // (6.1) answers the create with what was asked and rounds the queues up to 2^n - 1 (rxe_queue_init),
            // which ibv_query_qp reports (rxe_qp_to_attr): take the larger, so that cap() is what the QP holds
            QpCapabilities granted = IbvAttrs.qpCap(init, INIT_CAP);
            MemorySegment qattr = a.allocate(IbvLayouts.QP_ATTR);
            MemorySegment qinit = a.allocate(IbvLayouts.QP_INIT_ATTR);
            if ((int) Ibv.QUERY_QP.invokeExact(st, p, qattr, 1 << 19 /* IBV_QP_CAP */, qinit) == 0) {
                QpCapabilities q = IbvAttrs.qpCap(qattr, IbvLayouts.offset(IbvLayouts.QP_ATTR, "cap"));
                granted = new QpCapabilities(Math.max(granted.maxSendWr(), q.maxSendWr()),
                        srq != null ? granted.maxRecvWr() : Math.max(granted.maxRecvWr(), q.maxRecvWr()),
                        Math.max(granted.maxSendSge(), q.maxSendSge()),
                        srq != null ? granted.maxRecvSge() : Math.max(granted.maxRecvSge(), q.maxRecvSge()),
                        Math.max(granted.maxInlineData(), q.maxInlineData()));
            }
            IbvQp qp = new IbvQp(pd, p, type, granted, scq, rcq, srq, lifecycle);
            scq.users.incrementAndGet();
            rcq.users.incrementAndGet();
            if (srq != null) {
                srq.users.incrementAndGet();
            }
            pd.ctx.qps.put(p.address(), qp);
            return qp;
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    private static IbvCq cq(IbvPd pd, Object cq, String which) {
        if (!(cq instanceof IbvCq c) || c.ctx != pd.ctx || c.isClosed()) {
            throw new VerbsException(Errno.EINVAL, "ibv_create_qp: the " + which + " CQ is "
                    + (cq == null ? "missing" : "closed or of another context"));
        }
        return c;
    }

    @Override
    String describe() {
        return type + " QP 0x" + Integer.toHexString(qpNum) + " on " + ctx.device.name();
    }

    @Override
    public int qpNum() {
        return qpNum;
    }

    @Override
    public QpType type() {
        return type;
    }

    @Override
    public IbvPd pd() {
        return pd;
    }

    @Override
    public QpCapabilities cap() {
        return cap;
    }

    @Override
    public QpState state() {
        enter("ibv_query_qp");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment attr = a.allocate(IbvLayouts.QP_ATTR);
            MemorySegment init = a.allocate(IbvLayouts.QP_INIT_ATTR);
            int rc = (int) Ibv.QUERY_QP.invokeExact(st, ptr, attr, 1 /* IBV_QP_STATE */, init);
            if (rc != 0) {
                throw IbvErrors.failed("ibv_query_qp", Ibv.err(rc, st), describe());
            }
            return IbvAttrs.state(attr.get(ValueLayout.JAVA_INT, 0));
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        } finally {
            exit();
        }
    }

    @Override
    public void modify(QpAttributes attrs) {
        enter("ibv_modify_qp");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment attr = a.allocate(IbvLayouts.QP_ATTR);
            IbvAttrs.qpAttr(attr, attrs);
            int rc = (int) Ibv.MODIFY_QP.invokeExact(st, ptr, attr, attrs.mask());
            if (rc != 0) {
                throw IbvErrors.failed("ibv_modify_qp", Ibv.err(rc, st), describe() + " with " + attrs);
            }
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        } finally {
            exit();
        }
    }

    @Override
    public QpAttributes query() {
        enter("ibv_query_qp");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment attr = a.allocate(IbvLayouts.QP_ATTR);
            MemorySegment init = a.allocate(IbvLayouts.QP_INIT_ATTR);
            int rc = (int) Ibv.QUERY_QP.invokeExact(st, ptr, attr, IbvAttrs.ALL_QP_ATTR_MASK, init);
            if (rc != 0) {
                throw IbvErrors.failed("ibv_query_qp", Ibv.err(rc, st), describe());
            }
            return IbvAttrs.qpAttr(attr);
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        } finally {
            exit();
        }
    }

    // ------------------------------------------------------------------------------------ send

    @Override
    public boolean postSend(SendWorkRequest wr) {
        synchronized (sendLock) {
            oneSend[0] = wr;
            try {
                return postSendLocked(oneSend, 1) == 1;
            } finally {
                oneSend[0] = null;
            }
        }
    }

    @Override
    public int postSend(SendWorkRequest[] wrs, int count) {
        if (count < 0 || count > wrs.length) {
            throw new IllegalArgumentException("count " + count + " for " + wrs.length + " requests");
        }
        synchronized (sendLock) {
            return postSendLocked(wrs, count);
        }
    }

    private int postSendLocked(SendWorkRequest[] wrs, int count) {
        if (!uses.tryEnter()) {
            if (count > 0) {
                wrs[0].postError(Errno.EINVAL, "ibv_post_send: " + describe() + " is destroyed");
            }
            return 0;
        }
        try {
            int done = 0;
            while (done < count) {
                int n = Math.min(CHAIN, count - done);
                int posted = postSendChunk(wrs, done, n);
                done += posted;
                if (posted < n) {
                    break;
                }
            }
            return done;
        } finally {
            uses.exit();
        }
    }

    /** {@return how many of wrs[from, from+n) were posted; the first refused one has its postError set} */
    private int postSendChunk(SendWorkRequest[] wrs, int from, int n) {
        int built = 0;
        try {
            for (int i = 0; i < n; i++) {
                SendWorkRequest wr = wrs[from + i];
                wr.postError(null);
                String bad = prepareSend(wr, i);
                if (bad != null) {
                    wr.postError(Errno.EINVAL, "ibv_post_send: " + bad + " (" + describe() + ")");
                    break;
                }
                built = i + 1;
            }
            if (built == 0) {
                return 0;
            }
            // link the chain: the last slot's next is NULL
            sendWrs.set(ValueLayout.JAVA_LONG, (built - 1) * WrCodec.SEND_WR_SIZE + 8, 0L);
            sendBad.set(ValueLayout.ADDRESS, 0, MemorySegment.NULL);
            int rc;
            try {
                rc = (int) Ibv.POST_SEND.invokeExact(postSendFn, ptr, sendWrs, sendBad);
            } catch (Throwable t) {
                throw Ibv.rethrow(t);
            }
            if (rc == 0) {
                return built;
            }
            int idx = badIndex(sendBad, sendWrs, WrCodec.SEND_WR_SIZE, built);
            wrs[from + idx].postError(IbvErrors.errno(Math.abs(rc)), "ibv_post_send: the provider refused it: "
                    + org.rdma4j.libc.Errors.describe(Math.abs(rc)) + " (" + describe() + ")" + stateHint(true));
            return idx;
        } finally {
            for (int i = 0; i < n; i++) {
                if (ahs[i] != null) {
                    ahs[i].exit();
                    ahs[i] = null;
                }
            }
        }
    }

    /** Validates and writes slot {@code i}. @return null, or why the request is refused (EINVAL) */
    private String prepareSend(SendWorkRequest wr, int i) {
        int nsge = wr.numSge();
        if (nsge > sendSgeMax) {
            return "num_sge " + nsge + " is more than the QP's max_send_sge " + sendSgeMax;
        }
        if (nsge > readSgeMax && wr.opcode() == WrOpcode.RDMA_READ) {
            return "num_sge " + nsge + " of an RDMA READ is more than the device's max_sge_rd " + readSgeMax
                    + " (siw would fill only the first entry)";
        }
        long sgeOff = (long) i * sendSgeMax * WrCodec.SGE_SIZE;
        long[] inline = null;
        if ((wr.sendFlags() & SendFlags.INLINE) != 0 && nsge > 0) {
            inline = inlineAddrs;
            long stage = (long) i * stagingPerWr;
            long used = 0;
            for (int j = 0; j < nsge; j++) {
                ScatterGatherEntry e = wr.sge(j);
                long len = e.length() & 0xFFFF_FFFFL;
                MemorySegment src = e.segment();
                inline[j] = 0;
                if (src != null) {
                    if (!src.scope().isAlive()) {
                        return "inline entry " + j + ": its segment's arena is closed";
                    }
                    if (len > src.byteSize()) {
                        return "inline entry " + j + ": length " + len + " exceeds its " + src.byteSize()
                                + "-byte segment";
                    }
                    if (!src.isNative()) {
                        if (used + len > stagingPerWr) {
                            return "inline data of more than max_inline_data " + cap.maxInlineData() + " bytes";
                        }
                        MemorySegment.copy(src, 0, staging, stage + used, len);
                        inline[j] = staging.address() + stage + used;
                        used += (len + 7) & ~7L;
                    } else {
                        inline[j] = src.address();
                    }
                } else if (len > 0 && !pd.registered(e.addr(), len)) {
                    return "inline entry " + j + " at 0x" + Long.toHexString(e.addr()) + " (+" + len + ") is not"
                            + " inside a live region of the QP's PD: the provider would copy from that address as"
                            + " it is; give the bytes as a segment (ScatterGatherEntry.inline) or register them";
                }
            }
        }
        long ah = 0;
        if (type == QpType.UD) {
            if (!(wr.ah() instanceof IbvAh a) || a.pd != pd || !a.uses.tryEnter()) {
                return wr.ah() == null ? "a UD request needs an address handle"
                        : "the address handle is destroyed or of another PD";
            }
            ahs[i] = a;
            ah = a.ptr.address();
        }
        long base = sendWrs.address();
        long next = base + (i + 1) * WrCodec.SEND_WR_SIZE;
        WrCodec.writeSend(wr, sendWrs, i * WrCodec.SEND_WR_SIZE, next, sendSges.address() + sgeOff, sendSges,
                sgeOff, ah, inline, dropEmptySges && wr.opcode() != WrOpcode.RDMA_READ);
        return null;
    }

    /**
     * After a refused post: what the QP's state allows (rxe_post_send refuses sends before RTS,
     * rxe_post_recv receives in RESET), queried only on this failure path.
     */
    private String stateHint(boolean send) {
        QpState st;
        try {
            st = state();
        } catch (VerbsException e) {
            return "";
        }
        if (send && (st == QpState.RESET || st == QpState.INIT || st == QpState.RTR)) {
            return ": the QP is in " + st + "; sends are taken in RTS and SQD (modify it through "
                    + (st == QpState.RESET ? "INIT, RTR and RTS" : st == QpState.INIT ? "RTR and RTS" : "RTS") + ")";
        }
        if (!send && st == QpState.RESET) {
            return ": the QP is in RESET; receives are taken from INIT on (modify it to INIT first)";
        }
        return "";
    }

    static int badIndex(MemorySegment badOut, MemorySegment wrs, long wrSize, int built) {
        long bad = badOut.get(ValueLayout.ADDRESS, 0).address();
        long idx = (bad - wrs.address()) / wrSize;
        // a provider that failed without setting *bad_wr (or set it outside our chain): blame the first
        return bad == 0 || idx < 0 || idx >= built || (bad - wrs.address()) % wrSize != 0 ? 0 : (int) idx;
    }

    // ------------------------------------------------------------------------------------ receive

    @Override
    public boolean postRecv(RecvWorkRequest wr) {
        synchronized (recvLock) {
            oneRecv[0] = wr;
            try {
                return postRecvLocked(oneRecv, 1) == 1;
            } finally {
                oneRecv[0] = null;
            }
        }
    }

    @Override
    public int postRecv(RecvWorkRequest[] wrs, int count) {
        if (count < 0 || count > wrs.length) {
            throw new IllegalArgumentException("count " + count + " for " + wrs.length + " requests");
        }
        synchronized (recvLock) {
            return postRecvLocked(wrs, count);
        }
    }

    private int postRecvLocked(RecvWorkRequest[] wrs, int count) {
        if (!uses.tryEnter()) {
            if (count > 0) {
                wrs[0].postError(Errno.EINVAL, "ibv_post_recv: " + describe() + " is destroyed");
            }
            return 0;
        }
        try {
            int n = postRecvChain(postRecvFn, ptr, wrs, count, recvWrs, recvSges, recvSgeMax, recvBad);
            if (n < count && wrs[n].postError() == Errno.EINVAL) {
                String hint = stateHint(false);
                if (!hint.isEmpty()) {
                    wrs[n].postError(Errno.EINVAL, wrs[n].postErrorMessage() + hint);
                }
            }
            return n;
        } finally {
            uses.exit();
        }
    }

    /**
     * Posts receive requests in chains of {@link #CHAIN} through {@code fn} (ops.post_recv or
     * ops.post_srq_recv), stopping at the first refusal.
     */
    static int postRecvChain(MemorySegment fn, MemorySegment target, RecvWorkRequest[] wrs, int count,
            MemorySegment slots, MemorySegment sges, int sgeMax, MemorySegment bad) {
        int done = 0;
        while (done < count) {
            int n = Math.min(CHAIN, count - done);
            int built = 0;
            for (int i = 0; i < n; i++) {
                RecvWorkRequest wr = wrs[done + i];
                wr.postError(null);
                if (wr.numSge() > sgeMax) {
                    wr.postError(Errno.EINVAL, "ibv_post_recv: num_sge " + wr.numSge() + " is more than max_recv_sge "
                            + sgeMax);
                    break;
                }
                long sgeOff = (long) i * sgeMax * WrCodec.SGE_SIZE;
                WrCodec.writeRecv(wr, slots, i * WrCodec.RECV_WR_SIZE,
                        slots.address() + (i + 1) * WrCodec.RECV_WR_SIZE, sges.address() + sgeOff, sges, sgeOff);
                built++;
            }
            if (built == 0) {
                return done;
            }
            slots.set(ValueLayout.JAVA_LONG, (built - 1) * WrCodec.RECV_WR_SIZE + 8, 0L);
            bad.set(ValueLayout.ADDRESS, 0, MemorySegment.NULL);
            int rc;
            try {
                rc = (int) Ibv.POST_RECV.invokeExact(fn, target, slots, bad);
            } catch (Throwable t) {
                throw Ibv.rethrow(t);
            }
            if (rc != 0) {
                int idx = badIndex(bad, slots, WrCodec.RECV_WR_SIZE, built);
                wrs[done + idx].postError(IbvErrors.errno(Math.abs(rc)), "ibv_post_recv: the provider refused it: "
                        + org.rdma4j.libc.Errors.describe(Math.abs(rc)) + (Math.abs(rc) == 12 ? " (the queue is full)" : ""));
                return done + idx;
            }
            done += built;
            if (built < n) {
                return done;
            }
        }
        return done;
    }

    // ------------------------------------------------------------------------------------ multicast

    @Override
    public void attachMcast(Gid mgid, int mlid) {
        mcast(mgid, mlid, true);
    }

    @Override
    public void detachMcast(Gid mgid, int mlid) {
        mcast(mgid, mlid, false);
    }

    private void mcast(Gid mgid, int mlid, boolean attach) {
        String verb = attach ? "ibv_attach_mcast" : "ibv_detach_mcast";
        if (mgid == null) {
            throw new VerbsException(Errno.EINVAL, verb + ": the group GID is null");
        }
        enter(verb);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment gid = a.allocate(IbvLayouts.GID);
            IbvAttrs.gid(gid, 0, mgid);
            int rc = attach ? (int) Ibv.ATTACH_MCAST.invokeExact(st, ptr, gid, (short) mlid)
                    : (int) Ibv.DETACH_MCAST.invokeExact(st, ptr, gid, (short) mlid);
            if (rc != 0) {
                throw IbvErrors.failed(verb, Ibv.err(rc, st), describe() + " group " + mgid);
            }
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        } finally {
            exit();
        }
    }

    // ------------------------------------------------------------------------------------ destroy

    @Override
    public void close() {
        if (!beginDestroy("ibv_destroy_qp")) {
            return;
        }
        // wait for posters to leave the queues' scratch memory (they hold the locks while inside)
        synchronized (sendLock) {
            synchronized (recvLock) {
                ctx.events.release(this);
                try (Arena a = Arena.ofConfined()) {
                    MemorySegment st = Ibv.newCallState(a);
                    int rc = lifecycle.destroy(st, ptr);
                    if (rc != 0) {
                        destroyFailed();
                        int e = Ibv.err(rc, st);
                        throw IbvErrors.failed("ibv_destroy_qp", e, describe()
                                + (e == 16 ? " (still attached to a multicast group? detach it first)" : ""));
                    }
                } catch (VerbsException e) {
                    throw e;
                } catch (Throwable t) {
                    throw Ibv.rethrow(t);
                }
            }
        }
        ctx.qps.remove(ptr.address());
        sendCq.users.decrementAndGet();
        recvCq.users.decrementAndGet();
        if (srq != null) {
            srq.users.decrementAndGet();
        }
        pd.children.remove(this);
        arena.close();
    }

    @Override
    public String toString() {
        return describe();
    }
}
