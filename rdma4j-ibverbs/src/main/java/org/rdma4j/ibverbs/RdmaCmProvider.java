// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.rdma4j.libc.Errors;
import org.rdma4j.libc.Libc;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.PortAttributes;
import org.rdma4j.verbs.PortState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.cm.CmAddress;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.spi.CmEventSink;
import org.rdma4j.verbs.spi.CmIdSpi;
import org.rdma4j.verbs.spi.CmProvider;

/**
 * The CM API over Linux's librdmacm, for the devices of {@link IbvProvider} (kernel rxe and siw, NICs): the
 * kernel's rdma_cm (ucma) does the IB CM or iWARP MPA exchange. One event channel for the process, read by
 * one agent thread ({@code rdma4j-rdmacm-events}) that acknowledges every event as soon as it has copied it
 * (so that {@code rdma_destroy_id}, which waits for its events' acknowledgement, never waits on the
 * application) and hands it to the CM ID's sink. A CM ID's {@code context()} is the context librdmacm opened
 * for the device ({@code id->verbs}), one {@link IbvContext} object per device. Without librdmacm or a kernel
 * RDMA stack it serves no address.
 */
public final class RdmaCmProvider implements CmProvider {
    private static final System.Logger LOG = System.getLogger("org.rdma4j.ibverbs");

    /** Process-wide state, shared by every instance ServiceLoader makes. */
    static final class State {
        final MemorySegment channel;
        final int fd;
        final Map<Long, RdmaCmId> ids = new ConcurrentHashMap<>();
        final Map<Long, IbvContext> contexts = new ConcurrentHashMap<>();
        final Thread agent;

        State(MemorySegment channel) {
            this.channel = channel;
            this.fd = channel.reinterpret(4).get(ValueLayout.JAVA_INT, 0);
            IbvContext.setNonBlocking(fd, "the rdma_cm event channel");
            this.agent = Thread.ofPlatform().daemon().name("rdma4j-rdmacm-events").unstarted(this::run);
            agent.start();
        }

        /** A state without an event channel or agent: events reach it only through {@link RdmaCmId#dispatch}. */
        private State() {
            this.channel = MemorySegment.NULL;
            this.fd = -1;
            this.agent = null;
        }

        /**
         * {@return a state with no event channel and no agent} The tests of the event conversion hand it events
         * built in native memory; it never calls librdmacm.
         */
        static State detached() {
            return new State();
        }

        private void run() {
            Rdmacm.Handles h = Rdmacm.handles();
            try (Arena a = Arena.ofConfined()) {
                MemorySegment st = Ibv.newCallState(a);
                MemorySegment evOut = a.allocate(ValueLayout.ADDRESS);
                MemorySegment pfd = a.allocate(Libc.POLLFD_SIZE, 8);
                while (true) {
                    try {
                        int r = Libc.pollIn(st, pfd, fd, 1000);
                        if (r < 0 && Libc.errno(st) != Errors.EINTR) {
                            LOG.log(System.Logger.Level.ERROR, "rdma_cm events: poll failed: {0}; no more CM events",
                                    Errors.describe(Libc.errno(st)));
                            return;
                        }
                        while (true) {
                            int rc = (int) h.getCmEvent().invokeExact(st, channel, evOut);
                            if (rc != 0) {
                                int e = Ibv.errno(st);
                                if (e != Errors.EAGAIN && e != Errors.EINTR) {
                                    LOG.log(System.Logger.Level.WARNING, "rdma_get_cm_event failed: {0}",
                                            Errors.describe(e));
                                }
                                break;
                            }
                            MemorySegment ev = evOut.get(ValueLayout.ADDRESS, 0).reinterpret(Rdmacm.EV_SIZE);
                            try {
                                RdmaCmId.dispatch(this, ev);
                            } finally {
                                int ignored = (int) h.ackCmEvent().invokeExact(st, ev);
                            }
                        }
                    } catch (Throwable t) {
                        // never die silently: log and go on reading (a CM event lost here is logged)
                        LOG.log(System.Logger.Level.ERROR, "rdma_cm event agent failed on an event", t);
                    }
                }
            }
        }

        /** @return the context object of librdmacm's {@code ibv_context *}, made once per device */
        IbvContext context(MemorySegment verbs) {
            if (verbs.equals(MemorySegment.NULL)) {
                return null;
            }
            return contexts.computeIfAbsent(verbs.address(), k -> {
                MemorySegment ctx = verbs.reinterpret(IbvLayouts.CONTEXT.byteSize());
                long dev = ctx.get(ValueLayout.ADDRESS, 0).address();
                for (Device d : IbvDevices.get().devices()) {
                    if (d instanceof IbvDevice id && id.ptr.address() == dev) {
                        return IbvContext.external(id, ctx);
                    }
                }
                throw new VerbsException(Errno.ENODEV, "librdmacm's context names a device libibverbs did not list");
            });
        }
    }

    private static volatile Object state;

    /** Creates the provider; librdmacm is loaded on first use. */
    public RdmaCmProvider() {
    }

    /** @return the shared state, or a String saying why there is none */
    static Object state() {
        Object s = state;
        if (s == null) {
            synchronized (RdmaCmProvider.class) {
                s = state;
                if (s == null) {
                    s = init();
                    state = s;
                }
            }
        }
        return s;
    }

    private static Object init() {
        IbvLibrary.Loaded lib = IbvLibrary.get();
        if (!lib.ok()) {
            return lib.failure();
        }
        String why = Rdmacm.failure();
        if (why != null) {
            return why;
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment ch = (MemorySegment) Rdmacm.handles().createEventChannel().invokeExact(st);
            if (ch.equals(MemorySegment.NULL)) {
                int e = Ibv.errno(st);
                return e == Errors.ENODEV || e == Errors.ENOENT || e == Errors.ENOSYS
                        ? "the kernel has no rdma_cm (rdma_create_event_channel: " + Errors.describe(e)
                                + "): load rdma_ucm and a device driver (modprobe rdma_ucm rdma_rxe)"
                        : "rdma_create_event_channel failed: " + Errors.describe(e);
            }
            return new State(ch);
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    static State require() {
        Object s = state();
        if (s instanceof State st) {
            return st;
        }
        throw new VerbsException(Errno.ENODEV, "librdmacm: " + s);
    }

    @Override
    public String name() {
        return "librdmacm";
    }

    /**
     * Every IP address of every active port of every libibverbs device: RoCE GIDs that are IP addresses, and
     * for iWARP devices (whose GID is a MAC) the addresses of the network interface the port sits on
     * ({@code /sys/class/infiniband/<dev>/ports/<port>/gid_attrs/ndevs/0}).
     */
    @Override
    public List<CmAddress> addresses() {
        if (!(state() instanceof State st)) {
            return List.of();
        }
        List<CmAddress> out = new ArrayList<>();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment num = a.allocate(ValueLayout.JAVA_INT);
            MemorySegment list = (MemorySegment) Rdmacm.handles().getDevices().invokeExact(Ibv.newCallState(a), num);
            if (list.equals(MemorySegment.NULL)) {
                return out;
            }
            int n = num.get(ValueLayout.JAVA_INT, 0);
            MemorySegment arr = list.reinterpret(8L * n);
            try {
                for (int i = 0; i < n; i++) {
                    IbvContext ctx = st.context(arr.getAtIndex(ValueLayout.ADDRESS, i));
                    addAddresses(ctx, out);
                }
            } finally {
                Rdmacm.handles().freeDevices().invokeExact(Ibv.newCallState(a), list);
            }
        } catch (VerbsException e) {
            LOG.log(System.Logger.Level.DEBUG, "librdmacm addresses: {0}", e.getMessage());
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
        return out;
    }

    private static void addAddresses(IbvContext ctx, List<CmAddress> out) {
        int ports = ctx.queryDevice().physPortCnt();
        for (int port = 1; port <= ports; port++) {
            PortAttributes pa = ctx.queryPort(port);
            if (pa.state() != PortState.ACTIVE) {
                continue;
            }
            if (ctx.device.isIwarp()) {
                for (InetAddress ip : netdevAddresses(ctx, port)) {
                    out.add(new CmAddress(ip, ctx.device, port, 0));
                }
                continue;
            }
            for (int i = 0; i < pa.gidTblLen(); i++) {
                Gid g;
                try {
                    g = ctx.queryGid(port, i);
                } catch (VerbsException e) {
                    break;
                }
                if (!g.equals(Gid.ZERO)) {
                    out.add(new CmAddress(g.toInetAddress(), ctx.device, port, i));
                }
            }
        }
    }

    /**
     * The addresses of the network interface an iWARP port sits on: its GID is the interface's MAC (siw:
     * siw_query_gid copies the netdev's address into the GID), and {@code gid_attrs/ndevs} is RoCE-only
     * (EINVAL for siw, seen in the VM).
     */
    private static List<InetAddress> netdevAddresses(IbvContext ctx, int port) {
        List<InetAddress> out = new ArrayList<>();
        byte[] gid = ctx.queryGid(port, 0).toBytes();
        byte[] mac = java.util.Arrays.copyOf(gid, 6);
        try {
            for (Enumeration<NetworkInterface> ns = NetworkInterface.getNetworkInterfaces(); ns.hasMoreElements();) {
                NetworkInterface nif = ns.nextElement();
                if (java.util.Arrays.equals(mac, nif.getHardwareAddress())) {
                    for (Enumeration<InetAddress> e = nif.getInetAddresses(); e.hasMoreElements();) {
                        out.add(e.nextElement());
                    }
                }
            }
        } catch (IOException e) {
            LOG.log(System.Logger.Level.DEBUG, "no network interface for {0} port {1}: {2}", ctx.device.name(), port,
                    e.getMessage());
        }
        return out;
    }

    /**
     * {@return librdmacm's context for {@code device}: the one every CM ID bound to the device uses
     * ({@code id->verbs}), so the PDs, CQs and SRQs made on it serve {@code rdma_create_qp} of those IDs}
     *
     * @param device a libibverbs device
     * @throws VerbsException ENODEV without librdmacm, a kernel rdma_cm or the device in its list
     */
    static IbvContext deviceContext(IbvDevice device) {
        State st = require();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment num = a.allocate(ValueLayout.JAVA_INT);
            MemorySegment list = (MemorySegment) Rdmacm.handles().getDevices().invokeExact(Ibv.newCallState(a), num);
            if (list.equals(MemorySegment.NULL)) {
                throw new VerbsException(Errno.ENODEV, "rdma_get_devices: librdmacm lists no device");
            }
            try {
                MemorySegment arr = list.reinterpret(8L * num.get(ValueLayout.JAVA_INT, 0));
                for (long i = 0; i < arr.byteSize() / 8; i++) {
                    IbvContext ctx = st.context(arr.getAtIndex(ValueLayout.ADDRESS, i));
                    if (ctx != null && ctx.device.name().equals(device.name())) {
                        return ctx;
                    }
                }
            } finally {
                Rdmacm.handles().freeDevices().invokeExact(Ibv.newCallState(a), list);
            }
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
        throw new VerbsException(Errno.ENODEV, "librdmacm has no context for " + device.name());
    }

    @Override
    public CmIdSpi createId(CmEventSink sink, PortSpace portSpace, QpType qpType) {
        return RdmaCmId.create(require(), sink, portSpace, qpType);
    }
}
