// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

import org.rdma4j.libc.Errors;
import org.rdma4j.libc.Libc;
import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.DeviceAttributes;
import org.rdma4j.verbs.Dma;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.PortAttributes;
import org.rdma4j.verbs.PortState;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.VerbsException;

/**
 * An open libibverbs device ({@code struct ibv_context}). Opening checks the context against what this
 * provider was written for (the device pointer, the extended-context marker and size, the five data-path
 * slots of the ops table) and refuses with a message naming what differs. Thread-safe.
 */
final class IbvContext extends IbvObject implements Context {
    private static final System.Logger LOG = System.getLogger("org.rdma4j.ibverbs");
    private static final long DEVICE = IbvLayouts.offset(IbvLayouts.CONTEXT, "device");
    private static final long ABI_COMPAT = IbvLayouts.offset(IbvLayouts.CONTEXT, "abi_compat");
    private static final long CMD_FD = IbvLayouts.offset(IbvLayouts.CONTEXT, "cmd_fd");
    private static final long ASYNC_FD = IbvLayouts.offset(IbvLayouts.CONTEXT, "async_fd");
    private static final long OPS_POST_SEND = IbvLayouts.offset(IbvLayouts.CONTEXT, "ops.post_send");
    private static final long OPS_POST_RECV = IbvLayouts.offset(IbvLayouts.CONTEXT, "ops.post_recv");
    private static final long OPS_POST_SRQ_RECV = IbvLayouts.offset(IbvLayouts.CONTEXT, "ops.post_srq_recv");
    private static final long OPS_POLL_CQ = IbvLayouts.offset(IbvLayouts.CONTEXT, "ops.poll_cq");
    private static final long OPS_REQ_NOTIFY_CQ = IbvLayouts.offset(IbvLayouts.CONTEXT, "ops.req_notify_cq");

    final IbvDevice device;
    /** The context's data-path entry points (verbs.h: {@code context->ops.<slot>}). */
    final MemorySegment postSendFn;
    final MemorySegment postRecvFn;
    final MemorySegment postSrqRecvFn;
    final MemorySegment pollCqFn;
    final MemorySegment reqNotifyCqFn;
    final int asyncFd;
    /** Objects by native address, to resolve the pointers in async and CQ events. */
    final Map<Long, IbvQp> qps = new ConcurrentHashMap<>();
    final Map<Long, IbvCq> cqs = new ConcurrentHashMap<>();
    final Map<Long, IbvSrq> srqs = new ConcurrentHashMap<>();
    final IbvAsyncEvents events;
    private final Dma dma;
    /** A context librdmacm opened for its device (a CM ID's id->verbs): used, never closed, by us. */
    final boolean external;

    private IbvContext(IbvDevice device, MemorySegment ctx, boolean external) {
        super(ctx);
        this.device = device;
        this.external = external;
        this.postSendFn = ctx.get(ValueLayout.ADDRESS, OPS_POST_SEND);
        this.postRecvFn = ctx.get(ValueLayout.ADDRESS, OPS_POST_RECV);
        this.postSrqRecvFn = ctx.get(ValueLayout.ADDRESS, OPS_POST_SRQ_RECV);
        this.pollCqFn = ctx.get(ValueLayout.ADDRESS, OPS_POLL_CQ);
        this.reqNotifyCqFn = ctx.get(ValueLayout.ADDRESS, OPS_REQ_NOTIFY_CQ);
        this.asyncFd = ctx.get(ValueLayout.JAVA_INT, ASYNC_FD);
        this.dma = new Dma(false, new IbvDmaOps(device.name()));
        this.events = new IbvAsyncEvents(this);
    }

    static IbvContext open(IbvDevice device) {
        MemorySegment ctx;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            try {
                ctx = (MemorySegment) Ibv.OPEN_DEVICE.invokeExact(st, device.ptr);
            } catch (Throwable t) {
                throw Ibv.rethrow(t);
            }
            if (ctx.equals(MemorySegment.NULL)) {
                throw openFailed(device, Ibv.errno(st));
            }
        }
        ctx = ctx.reinterpret(IbvLayouts.CONTEXT.byteSize());
        String abi = checkAbi(device, ctx);
        if (abi != null) {
            closeQuietly(ctx);
            throw new VerbsException(Errno.EOPNOTSUPP, abi);
        }
        IbvContext c;
        try {
            c = new IbvContext(device, ctx, false);
            c.events.start();
        } catch (RuntimeException e) {
            closeQuietly(ctx);
            throw e;
        }
        return c;
    }

    /**
     * Wraps a context librdmacm opened (rdma_get_devices, a CM ID's {@code verbs}): checked as an opened one,
     * never closed by this provider (librdmacm closes it when the process ends).
     *
     * @param device the device
     * @param ptr    librdmacm's {@code struct ibv_context *}
     * @return the context
     */
    static IbvContext external(IbvDevice device, MemorySegment ptr) {
        MemorySegment ctx = ptr.reinterpret(IbvLayouts.CONTEXT.byteSize());
        String abi = checkAbi(device, ctx);
        if (abi != null) {
            throw new VerbsException(Errno.EOPNOTSUPP, abi);
        }
        IbvContext c = new IbvContext(device, ctx, true);
        c.events.start();
        return c;
    }

    /**
     * {@return null if the context is what this provider reads, else what differs}
     */
    static String checkAbi(IbvDevice device, MemorySegment ctx) {
        String what = "libibverbs' context of " + device.name() + " differs from what this provider was written for"
                + " (rdma-core 44 verbs.h, x86_64): ";
        MemorySegment dev = ctx.get(ValueLayout.ADDRESS, DEVICE);
        if (dev.address() != device.ptr.address()) {
            return what + "ibv_context.device at offset " + DEVICE + " is 0x" + Long.toHexString(dev.address())
                    + ", not the device opened (0x" + Long.toHexString(device.ptr.address()) + ")";
        }
        long marker = ctx.get(ValueLayout.JAVA_LONG, ABI_COMPAT);
        if (marker != -1L) {
            return what + "no extended context (ibv_context.abi_compat at offset " + ABI_COMPAT + " is 0x"
                    + Long.toHexString(marker) + ", expected (void *) -1: a provider built before rdma-core 13?)";
        }
        // struct verbs_context ends with "size_t sz; struct ibv_context context;": sz is just below the context
        long sz = MemorySegment.ofAddress(ctx.address() - IbvLayouts.VCTX_SZ_DISTANCE).reinterpret(8)
                .get(ValueLayout.JAVA_LONG, 0);
        long min = IbvLayouts.VCTX_SZ_DISTANCE + IbvLayouts.CONTEXT.byteSize();
        if (sz < min || sz > (1 << 16)) {
            return what + "verbs_context.sz is " + sz + ", expected at least " + min
                    + " (rdma-core 44 has 648) and a plausible size";
        }
        String[] slots = {"post_send", "post_recv", "post_srq_recv", "poll_cq", "req_notify_cq"};
        long[] offs = {OPS_POST_SEND, OPS_POST_RECV, OPS_POST_SRQ_RECV, OPS_POLL_CQ, OPS_REQ_NOTIFY_CQ};
        for (int i = 0; i < slots.length; i++) {
            if (ctx.get(ValueLayout.ADDRESS, offs[i]).equals(MemorySegment.NULL)) {
                return what + "ops." + slots[i] + " (offset " + offs[i] + ") is NULL";
            }
        }
        return null;
    }

    private static VerbsException openFailed(IbvDevice device, int errno) {
        String node = "/dev/infiniband/" + device.uverbsName();
        return switch (errno) {
            case Errors.EACCES, Errors.EPERM -> new VerbsException(Errno.EACCES, "ibv_open_device(" + device.name()
                    + ") failed: " + Errors.describe(errno) + ": this process may not open " + node
                    + " (see ls -l /dev/infiniband): run it as a user of the group that owns the device (rdma-core's "
                    + "udev rules use group 'rdma': usermod -aG rdma $USER), or adjust the udev rule");
            case Errors.ENODEV, Errors.ENOENT -> new VerbsException(Errno.ENODEV, "ibv_open_device(" + device.name()
                    + ") failed: " + Errors.describe(errno) + ": the device is gone or " + node + " is missing "
                    + "(is ib_uverbs loaded? modprobe ib_uverbs)");
            default -> IbvErrors.failed("ibv_open_device", errno, device.name());
        };
    }

    private static void closeQuietly(MemorySegment ctx) {
        try (Arena a = Arena.ofConfined()) {
            int ignored = (int) Ibv.CLOSE_DEVICE.invokeExact(Ibv.newCallState(a), ctx);
        } catch (Throwable t) {
            LOG.log(System.Logger.Level.WARNING, "ibv_close_device after a refused open failed", t);
        }
    }

    @Override
    String describe() {
        return "context of " + device.name();
    }

    @Override
    public IbvDevice device() {
        return device;
    }

    @Override
    public DeviceAttributes queryDevice() {
        enter("ibv_query_device");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment attr = a.allocate(IbvLayouts.DEVICE_ATTR);
            int rc = (int) Ibv.QUERY_DEVICE.invokeExact(st, ptr, attr);
            if (rc != 0) {
                throw IbvErrors.failed("ibv_query_device", Ibv.err(rc, st), device.name());
            }
            return IbvAttrs.deviceAttributes(attr, maxInlineData());
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        } finally {
            exit();
        }
    }

    /**
     * {@return the device's max_sge_rd (the scatter entries of an RDMA READ's local list), read once per device;
     * 0 if ibv_query_device fails}
     * siw reports 1 (iWARP's READ request names one sink, siw.h SIW_MAX_SGE_RD) but takes a longer list from a
     * user-space QP and fills only its first entry (siw_qp_tx.c: the READ request carries sge[0]), so the
     * provider refuses a longer one at post, as siw's kernel path does (siw_post_send: EINVAL).
     */
    int maxSgeRd() {
        int known = device.maxSgeRd;
        if (known >= 0) {
            return known;
        }
        enter("ibv_query_device");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment attr = a.allocate(IbvLayouts.DEVICE_ATTR);
            int rc = (int) Ibv.QUERY_DEVICE.invokeExact(st, ptr, attr);
            if (rc != 0) {
                return 0; // unknown: the QP then limits READs by max_send_sge only
            }
            int n = attr.get(ValueLayout.JAVA_INT, IbvLayouts.offset(IbvLayouts.DEVICE_ATTR, "max_sge_rd"));
            device.maxSgeRd = n;
            return n;
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        } finally {
            exit();
        }
    }

    /**
     * The largest inline size an RC QP gets, which ibv_query_device does not report: found once per device
     * by creating QPs (the kernel refuses what the device cannot do, and grants at least what was asked).
     */
    private int maxInlineData() {
        int known = device.maxInline;
        if (known >= 0) {
            return known;
        }
        int best = 0;
        try (ProtectionDomain pd = allocPd(); CompletionQueue cq = createCq(1, null, 0)) {
            int lo = 0;
            int hi = 4096;
            for (int i = 0; i < 14 && lo <= hi; i++) {
                int mid = (lo + hi) >>> 1;
                QpCapabilities granted = tryInline(pd, cq, mid);
                if (granted != null) {
                    best = Math.max(best, granted.maxInlineData());
                    lo = mid + 1;
                } else {
                    hi = mid - 1;
                }
            }
        }
        device.maxInline = best;
        return best;
    }

    private static QpCapabilities tryInline(ProtectionDomain pd, CompletionQueue cq, int inline) {
        try (var qp = pd.createQp(new QpInitAttributes().type(QpType.RC).sendCq(cq).recvCq(cq)
                .cap(new QpCapabilities(1, 1, 1, 1, inline)))) {
            return qp.cap();
        } catch (VerbsException e) {
            return null;
        }
    }

    @Override
    public PortAttributes queryPort(int port) {
        checkPort(port);
        enter("ibv_query_port");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment attr = a.allocate(IbvLayouts.PORT_ATTR.byteSize() + 16, 8);
            int rc = (int) Ibv.QUERY_PORT.invokeExact(st, ptr, (byte) port, attr);
            if (rc != 0) {
                throw IbvErrors.failed("ibv_query_port", Ibv.err(rc, st), device.name() + " port " + port);
            }
            return IbvAttrs.portAttributes(attr);
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        } finally {
            exit();
        }
    }

    private static void checkPort(int port) {
        if (port < 1 || port > 255) {
            throw new VerbsException(Errno.EINVAL, "port " + port + " (ports are numbered from 1)");
        }
    }

    @Override
    public Gid queryGid(int port, int index) {
        checkPort(port);
        if (index < 0) {
            throw new VerbsException(Errno.EINVAL, "GID index " + index);
        }
        enter("ibv_query_gid");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment gid = a.allocate(IbvLayouts.GID);
            int rc = (int) Ibv.QUERY_GID.invokeExact(st, ptr, (byte) port, index, gid);
            if (rc != 0) {
                throw IbvErrors.failed("ibv_query_gid", Ibv.err(rc, st), device.name() + " port " + port
                        + " index " + index);
            }
            return IbvAttrs.gid(gid, 0);
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        } finally {
            exit();
        }
    }

    /**
     * The port's counters as the kernel exposes them: {@code /sys/class/infiniband/<dev>/ports/<port>/hw_counters}
     * (rdma_hw_stats: rxe's sent_pkts, rcvd_pkts, ...) and the IB PMA counters in {@code counters/} where the
     * driver has them.
     */
    @Override
    public Map<String, Long> queryPortCounters(int port) {
        checkPort(port);
        Map<String, Long> out = new TreeMap<>();
        Path base = Path.of("/sys/class/infiniband", device.name(), "ports", Integer.toString(port));
        for (String dir : new String[] {"counters", "hw_counters"}) {
            Path d = base.resolve(dir);
            if (!Files.isDirectory(d)) {
                continue;
            }
            try (DirectoryStream<Path> ds = Files.newDirectoryStream(d)) {
                for (Path f : ds) {
                    try {
                        out.put(f.getFileName().toString(), Long.parseLong(Files.readString(f).trim()));
                    } catch (IOException | NumberFormatException notACounter) {
                        // lifespan is a setting, some files are unreadable without privileges: skip them
                    }
                }
            } catch (IOException e) {
                LOG.log(System.Logger.Level.DEBUG, "cannot list {0}: {1}", d, e.getMessage());
            }
        }
        return out;
    }

    @Override
    public Dma dma() {
        return dma;
    }

    @Override
    public ProtectionDomain allocPd() {
        enter("ibv_alloc_pd");
        try {
            IbvPd pd = IbvPd.alloc(this);
            children.add(pd);
            return pd;
        } finally {
            exit();
        }
    }

    @Override
    public CompletionChannel createCompChannel() {
        enter("ibv_create_comp_channel");
        try {
            IbvChannel ch = IbvChannel.create(this);
            children.add(ch);
            return ch;
        } finally {
            exit();
        }
    }

    @Override
    public CompletionQueue createCq(int cqe, CompletionChannel channel, int compVector) {
        enter("ibv_create_cq");
        try {
            IbvChannel ch = null;
            if (channel != null) {
                if (!(channel instanceof IbvChannel c) || c.ctx != this) {
                    throw new VerbsException(Errno.EINVAL, "the completion channel belongs to another context");
                }
                ch = c;
            }
            IbvCq cq = IbvCq.create(this, cqe, ch, compVector);
            children.add(cq);
            return cq;
        } finally {
            exit();
        }
    }

    @Override
    public AsyncEvent getAsyncEvent(Duration timeout) {
        enter("ibv_get_async_event");
        try {
            AsyncEvent ev = events.take(timeout);
            if (ev == IbvAsyncEvents.CLOSED) {
                if (!isClosed()) {
                    return null; // a close that failed (EBUSY) left it
                }
                throw new VerbsException(Errno.EINVAL, "ibv_get_async_event: " + describe() + " was closed while waiting");
            }
            return ev;
        } finally {
            exit();
        }
    }

    @Override
    public void ackAsyncEvent(AsyncEvent event) {
        events.ack(event);
    }

    @Override
    void wakeWaiters() {
        events.wakeTakers();
    }

    /**
     * ibv_close_device. The context of a CM ID belongs to librdmacm (every CM ID on the device shares it):
     * closing it leaves it open, but refuses with EBUSY while PDs, CQs or channels made on it are open, as a
     * close of one's own context does (so a caller's leak check works on it too).
     */
    @Override
    public void close() {
        if (external) {
            checkIdle("close of librdmacm's context");
            return;
        }
        if (!beginDestroy("ibv_close_device")) {
            return;
        }
        events.stop();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            int rc = (int) Ibv.CLOSE_DEVICE.invokeExact(st, ptr);
            if (rc != 0) {
                LOG.log(System.Logger.Level.WARNING, "ibv_close_device({0}) failed: {1}", device.name(),
                        Errors.describe(Ibv.err(rc, st)));
            }
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    /**
     * Sets a descriptor non-blocking (completion channels, the async descriptor): waits are poll(2) with a
     * timeout, and the get-event calls then return EAGAIN instead of sleeping in the kernel.
     */
    static void setNonBlocking(int fd, String what) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Libc.newCallState(a);
            if (Libc.setNonBlocking(st, fd, true) != 0) {
                throw IbvErrors.failed("fcntl(O_NONBLOCK) of " + what, Libc.errno(st), "");
            }
        }
    }

    @Override
    public String toString() {
        return describe();
    }
}
