// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.rdma4j.soft.RemoteProtocol.*;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.rdma4j.common.ManualClock;
import org.rdma4j.dma.DmaChecker;
import org.rdma4j.dma.DmaConfig;
import org.rdma4j.dma.DmaReport;
import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.PortState;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.ScatterGatherEntry;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.SharedReceiveQueue;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * The remote peer: a JVM the test fixture ({@link RemotePeer}) starts, owning a RoCE {@link SoftDevice} on
 * 127.0.0.2 with its own engine, timers (a {@link ManualClock} the test moves through {@link RemoteProtocol#ADVANCE})
 * and UDP socket, and serving the verbs calls of {@link RemoteVerbs} one at a time on a Unix-domain socket.
 * It exits when the socket closes or the test JVM ends.
 */
public final class RemotePeerMain {
    private final DataInputStream in;
    private final DataOutputStream out;
    private final Map<Integer, Object> objects = new HashMap<>();
    private final Map<Integer, SoftFabric> fabrics = new HashMap<>();
    private final Map<Integer, ManualClock> clocks = new HashMap<>();
    private final Map<Integer, SoftDevice> fabricDevices = new HashMap<>();
    private final Map<Long, AsyncEvent> events = new HashMap<>();
    private final Map<Object, Integer> handles = new IdentityHashMap<>();
    private final RemoteCmServer cm = new RemoteCmServer(this);
    private SharedMemory shm;
    private volatile Thread serving;
    private int nextHandle = 1;
    private long nextEvent = 1;

    private RemotePeerMain(SocketChannel ch) {
        this.in = new DataInputStream(new BufferedInputStream(Channels.newInputStream(ch), 1 << 16));
        this.out = new DataOutputStream(new BufferedOutputStream(Channels.newOutputStream(ch), 1 << 16));
    }

    /**
     * @param args the Unix-domain socket path to connect to, and the PID of the test JVM
     * @throws IOException when the socket fails
     */
    public static void main(String[] args) throws IOException {
        System.setOut(System.err);
        long parent = Long.parseLong(args[1]);
        ProcessHandle.of(parent).ifPresentOrElse(
                p -> p.onExit().thenRun(() -> Runtime.getRuntime().halt(3)),
                () -> Runtime.getRuntime().halt(3));
        try (SocketChannel ch = SocketChannel.open(UnixDomainSocketAddress.of(Path.of(args[0])))) {
            new RemotePeerMain(ch).serve();
        }
        Runtime.getRuntime().halt(0);
    }

    private void serve() throws IOException {
        while (true) {
            int op;
            try {
                op = in.readInt();
            } catch (EOFException eof) {
                return;
            }
            int h = in.readInt();
            handle(op, h);
            out.flush();
        }
    }

    int register(Object o) {
        int h = nextHandle++;
        objects.put(h, o);
        handles.put(o, h);
        return h;
    }

    /** @return the object's handle, registering it first if the child has none for it (0 for null) */
    int handleOrRegister(Object o) {
        if (o == null) {
            return 0;
        }
        Integer h = handles.get(o);
        return h != null ? h : register(o);
    }

    int handleOf(Object o) {
        if (o == null) {
            return 0;
        }
        Integer h = handles.get(o);
        if (h == null) {
            throw new IllegalStateException("the remote peer has no handle for " + o);
        }
        return h;
    }

    @SuppressWarnings("unchecked")
    <T> T obj(int h, Class<T> type) {
        if (h == 0) {
            return null;
        }
        Object o = objects.get(h);
        if (!type.isInstance(o)) {
            throw new IllegalStateException("remote handle " + h + " is " + o + ", not a " + type.getSimpleName());
        }
        return (T) o;
    }

    /**
     * Reads the arguments of {@code op} (all of them, before any lookup can fail, so the stream stays in
     * step), runs it and writes the whole response.
     */
    private void handle(int op, int h) throws IOException {
        Body body;
        try {
            body = parse(op, h);
        } catch (RuntimeException e) {
            writeError(out, e);
            return;
        }
        respond(body);
    }

    private Body parse(int op, int h) throws IOException {
        return switch (op) {
            case SHM_MAP -> shmMap();
            case SHM_UNMAP -> {
                if (shm != null) {
                    shm.close();
                    shm = null;
                }
                yield o -> { };
            }
            case FABRIC_OPEN -> fabricOpen();
            case STALL -> o -> {
                System.err.println("stalling on purpose (STALL): this call never answers");
                try {
                    new CountDownLatch(1).await(); // nothing counts it down: a hang, until the test JVM ends us
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            };
            case FABRIC_CLOSE -> {
                SoftFabric f = fabrics.remove(h);
                clocks.remove(h);
                SoftDevice dev = fabricDevices.remove(h);
                yield o -> {
                    cm.fabricClosing(h); // CMs the test JVM left open go before their devices
                    if (f != null) {
                        f.close();
                    }
                    DmaChecker checker = dev == null ? null : dev.dma().checker();
                    List<DmaReport> reports = checker == null ? List.of() : checker.reports();
                    o.writeInt(reports.size());
                    for (DmaReport r : reports) {
                        o.writeUTF(String.valueOf(r));
                    }
                    if (fabrics.isEmpty()) {
                        objects.clear();
                        handles.clear();
                        events.clear();
                    }
                };
            }
            case ADVANCE -> {
                long now = in.readLong();
                ManualClock c = clocks.get(h);
                yield o -> {
                    if (c == null) {
                        throw new IllegalStateException("no open remote fabric " + h);
                    }
                    long d = now - c.nanoTime();
                    if (d > 0) {
                        c.advance(d);
                    }
                };
            }
            case PORT_STATE -> {
                int port = in.readInt();
                boolean active = in.readBoolean();
                SoftDevice d = obj(h, SoftDevice.class);
                yield o -> d.setPortState(port, active ? PortState.ACTIVE : PortState.DOWN);
            }
            case DEV_OPEN -> {
                SoftDevice d = obj(h, SoftDevice.class);
                yield o -> o.writeInt(register(d.open()));
            }
            case CTX_QUERY_DEVICE -> {
                Context c = obj(h, Context.class);
                yield o -> writeDeviceAttrs(o, c.queryDevice());
            }
            case CTX_QUERY_PORT -> {
                int port = in.readInt();
                Context c = obj(h, Context.class);
                yield o -> writePortAttrs(o, c.queryPort(port));
            }
            case CTX_QUERY_GID -> {
                int port = in.readInt();
                int index = in.readInt();
                Context c = obj(h, Context.class);
                yield o -> writeGid(o, c.queryGid(port, index));
            }
            case CTX_ALLOC_PD -> {
                Context c = obj(h, Context.class);
                yield o -> {
                    ProtectionDomain pd = c.allocPd();
                    o.writeInt(register(pd));
                    o.writeInt(pd.localDmaLkey());
                };
            }
            case CTX_CREATE_CHANNEL -> {
                Context c = obj(h, Context.class);
                yield o -> o.writeInt(register(c.createCompChannel()));
            }
            case CTX_CREATE_CQ -> {
                int cqe = in.readInt();
                int chHandle = in.readInt();
                int vector = in.readInt();
                CompletionChannel ch = obj(chHandle, CompletionChannel.class);
                Context c = obj(h, Context.class);
                yield o -> o.writeInt(register(c.createCq(cqe, ch, vector)));
            }
            case CTX_GET_ASYNC -> {
                long timeoutNs = in.readLong();
                Context c = obj(h, Context.class);
                yield o -> {
                    AsyncEvent ev = c.getAsyncEvent(Duration.ofNanos(timeoutNs));
                    o.writeBoolean(ev != null);
                    if (ev != null) {
                        long id = nextEvent++;
                        events.put(id, ev);
                        o.writeLong(id);
                        writeEnum(o, ev.type());
                        o.writeInt(handleOf(ev.qp()));
                        o.writeInt(handleOf(ev.cq()));
                        o.writeInt(handleOf(ev.srq()));
                        o.writeInt(ev.portNum());
                    }
                };
            }
            case CTX_ACK_ASYNC -> {
                long id = in.readLong();
                Context c = obj(h, Context.class);
                yield o -> {
                    AsyncEvent ev = events.remove(id);
                    if (ev == null) {
                        throw new IllegalArgumentException("async event " + id + " was not taken from this peer"
                                + " or was acknowledged already");
                    }
                    c.ackAsyncEvent(ev);
                };
            }
            case CTX_DMA_VIRTUAL -> {
                Context c = obj(h, Context.class);
                yield o -> o.writeBoolean(c.dma().usesVirtDma());
            }
            case CLOSE -> {
                AutoCloseable c = obj(h, AutoCloseable.class);
                yield o -> {
                    try {
                        c.close();
                    } catch (RuntimeException e) {
                        throw e;
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                };
            }
            case PD_REG_MR -> {
                int kind = in.readInt();
                long addr = in.readLong();
                long len = in.readLong();
                var access = readAccess(in);
                ProtectionDomain pd = obj(h, ProtectionDomain.class);
                yield o -> {
                    MemorySegment seg = kind == 1 ? MemorySegment.ofArray(new byte[(int) len])
                            : len == 0 ? MemorySegment.ofAddress(addr) : shm().slice(addr, len);
                    MemoryRegion mr = pd.regMr(seg, access);
                    o.writeInt(register(mr));
                    o.writeLong(mr.address());
                    o.writeLong(mr.length());
                    o.writeInt(mr.lkey());
                    o.writeInt(mr.rkey());
                    writeAccess(o, mr.access());
                };
            }
            case PD_CREATE_QP -> {
                QpType type = readEnum(in, QpType.class);
                int scqH = in.readInt();
                int rcqH = in.readInt();
                int srqH = in.readInt();
                var cap = readCap(in);
                boolean sigAll = in.readBoolean();
                CompletionQueue scq = obj(scqH, CompletionQueue.class);
                CompletionQueue rcq = obj(rcqH, CompletionQueue.class);
                SharedReceiveQueue srq = obj(srqH, SharedReceiveQueue.class);
                ProtectionDomain pd = obj(h, ProtectionDomain.class);
                yield o -> {
                    QueuePair qp = pd.createQp(new QpInitAttributes().type(type).sendCq(scq).recvCq(rcq).srq(srq)
                            .cap(cap).sqSigAll(sigAll));
                    o.writeInt(register(qp));
                    o.writeInt(qp.qpNum());
                };
            }
            case PD_CREATE_SRQ -> {
                int maxWr = in.readInt();
                int maxSge = in.readInt();
                ProtectionDomain pd = obj(h, ProtectionDomain.class);
                yield o -> o.writeInt(register(pd.createSrq(maxWr, maxSge)));
            }
            case PD_CREATE_AH -> {
                var attrs = readAh(in);
                ProtectionDomain pd = obj(h, ProtectionDomain.class);
                yield o -> o.writeInt(register(pd.createAh(attrs)));
            }
            case CQ_CAPACITY -> {
                CompletionQueue cq = obj(h, CompletionQueue.class);
                yield o -> o.writeInt(cq.capacity());
            }
            case CQ_POLL -> {
                boolean single = in.readBoolean();
                int length = in.readInt();
                int max = in.readInt();
                CompletionQueue cq = obj(h, CompletionQueue.class);
                yield o -> {
                    WorkCompletion[] wcs = new WorkCompletion[length];
                    for (int i = 0; i < wcs.length; i++) {
                        wcs[i] = new WorkCompletion();
                    }
                    int n = single ? (cq.poll(wcs[0]) ? 1 : 0) : cq.poll(wcs, max);
                    o.writeInt(n);
                    for (int i = 0; i < n; i++) {
                        writeWc(o, wcs[i]);
                    }
                };
            }
            case CQ_REQ_NOTIFY -> {
                boolean solicited = in.readBoolean();
                CompletionQueue cq = obj(h, CompletionQueue.class);
                yield o -> cq.reqNotify(solicited);
            }
            case CQ_ACK_EVENTS -> {
                int count = in.readInt();
                CompletionQueue cq = obj(h, CompletionQueue.class);
                yield o -> cq.ackEvents(count);
            }
            case CQ_RESIZE -> {
                int cqe = in.readInt();
                CompletionQueue cq = obj(h, CompletionQueue.class);
                yield o -> cq.resize(cqe);
            }
            case CH_GET_EVENT -> {
                long timeoutNs = in.readLong();
                CompletionChannel ch = obj(h, CompletionChannel.class);
                yield o -> {
                    CompletionQueue cq = ch.getCqEvent(Duration.ofNanos(timeoutNs));
                    o.writeInt(handleOf(cq));
                };
            }
            case QP_CAP -> {
                QueuePair qp = obj(h, QueuePair.class);
                yield o -> writeCap(o, qp.cap());
            }
            case QP_STATE -> {
                QueuePair qp = obj(h, QueuePair.class);
                yield o -> writeEnum(o, qp.state());
            }
            case QP_TYPE -> {
                QueuePair qp = obj(h, QueuePair.class);
                yield o -> writeEnum(o, qp.type());
            }
            case QP_MODIFY -> {
                var attrs = readQpAttrs(in);
                QueuePair qp = obj(h, QueuePair.class);
                yield o -> qp.modify(attrs);
            }
            case QP_QUERY -> {
                QueuePair qp = obj(h, QueuePair.class);
                yield o -> writeQpAttrs(o, qp.query());
            }
            case QP_POST_SEND -> {
                boolean single = in.readBoolean();
                int count = in.readInt();
                SendWorkRequest[] wrs = new SendWorkRequest[in.readInt()];
                int[] ahs = new int[wrs.length];
                for (int i = 0; i < wrs.length; i++) {
                    if (in.readBoolean()) {
                        wrs[i] = readSendWr();
                        ahs[i] = in.readInt();
                    }
                }
                for (int i = 0; i < wrs.length; i++) {
                    if (wrs[i] != null) {
                        wrs[i].ah(ahs[i] == 0 ? null : obj(ahs[i], AddressHandle.class));
                    }
                }
                QueuePair qp = obj(h, QueuePair.class);
                yield o -> {
                    int posted = single ? (qp.postSend(wrs[0]) ? 1 : 0) : qp.postSend(wrs, count);
                    o.writeInt(posted);
                    for (SendWorkRequest wr : wrs) {
                        writeEnum(o, wr == null ? null : wr.postError());
                    }
                };
            }
            case QP_POST_RECV, SRQ_POST_RECV -> {
                RecvWorkRequest wr = readRecvWr();
                Object target = objects.get(h);
                yield o -> {
                    boolean posted = target instanceof SharedReceiveQueue srq ? srq.postRecv(wr)
                            : obj(h, QueuePair.class).postRecv(wr);
                    o.writeBoolean(posted);
                    writeEnum(o, wr.postError());
                };
            }
            case QP_ATTACH, QP_DETACH -> {
                var gid = readGid(in);
                int mlid = in.readInt();
                QueuePair qp = obj(h, QueuePair.class);
                yield o -> {
                    if (op == QP_ATTACH) {
                        qp.attachMcast(gid, mlid);
                    } else {
                        qp.detachMcast(gid, mlid);
                    }
                };
            }
            case SRQ_MAX_WR -> {
                SharedReceiveQueue s = obj(h, SharedReceiveQueue.class);
                yield o -> o.writeInt(s.maxWr());
            }
            case SRQ_MAX_SGE -> {
                SharedReceiveQueue s = obj(h, SharedReceiveQueue.class);
                yield o -> o.writeInt(s.maxSge());
            }
            case SRQ_LIMIT -> {
                SharedReceiveQueue s = obj(h, SharedReceiveQueue.class);
                yield o -> o.writeInt(s.limit());
            }
            case SRQ_ARM -> {
                int limit = in.readInt();
                SharedReceiveQueue s = obj(h, SharedReceiveQueue.class);
                yield o -> s.armLimit(limit);
            }
            case AH_ATTRIBUTES -> {
                AddressHandle ah = obj(h, AddressHandle.class);
                yield o -> writeAh(o, ah.attributes());
            }
            default -> {
                if (op >= CM_OPEN && op < CM_OPEN + 100) {
                    yield cm.parse(op, h, in);
                }
                throw new IOException("unknown remote op " + op);
            }
        };
    }

    /** @return the clock of an open fabric (its handle) */
    ManualClock clock(int fabric) {
        ManualClock c = clocks.get(fabric);
        if (c == null) {
            throw new IllegalStateException("no open remote fabric " + fabric);
        }
        return c;
    }

    /**
     * A callback to the test JVM from inside the call being served: writes it, then reads the answer.
     *
     * @param target the calling object's handle (what the test JVM registered the answer for)
     * @param kind   the callback
     * @param args   its arguments
     * @param result reads the answer's results
     * @param <T>    result type
     * @return the result
     * @throws IOException           when the connection fails
     * @throws IllegalStateException when no call is being served on this thread (nobody would read it)
     */
    <T> T callback(int target, int kind, RemotePeer.Args args, RemotePeer.Result<T> result) throws IOException {
        if (serving != Thread.currentThread()) {
            throw new IllegalStateException("callback " + kind + " of object " + target + " on thread "
                    + Thread.currentThread().getName() + ", outside a call the test JVM made: nothing reads it");
        }
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        DataOutputStream o = new DataOutputStream(b);
        o.writeInt(target);
        o.writeInt(kind);
        args.write(o);
        out.writeByte(CALLBACK);
        b.writeTo(out);
        out.flush();
        readStatus(in);
        return result.read(in);
    }

    private void respond(Body body) throws IOException {
        // Run the call, buffering its results: on failure nothing of them is sent, only the error.
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        DataOutputStream o = new DataOutputStream(buf);
        serving = Thread.currentThread();
        try {
            body.run(o);
        } catch (VerbsException | IllegalArgumentException | IllegalStateException | NullPointerException
                 | UnsupportedOperationException | IndexOutOfBoundsException e) {
            writeError(out, e);
            return;
        } catch (RuntimeException | Error e) {
            e.printStackTrace();
            writeError(out, e);
            return;
        } finally {
            serving = null;
        }
        out.writeByte(OK);
        buf.writeTo(out);
    }

    private SharedMemory shm() {
        if (shm == null) {
            throw new IllegalStateException("no shared memory mapped in the remote peer");
        }
        return shm;
    }

    private Body shmMap() throws IOException {
        Path file = Path.of(in.readUTF());
        long size = in.readLong();
        long address = in.readLong();
        return o -> {
            if (shm != null) {
                shm.close();
                shm = null;
            }
            for (int attempt = 0; attempt < 16 && shm == null; attempt++) {
                shm = SharedMemory.mapAt(file, size, attempt == 0 ? address : SharedMemory.randomAddress());
            }
            if (shm == null) {
                throw new IllegalStateException("cannot map " + file + " anywhere in the remote peer");
            }
            o.writeLong(shm.base());
        };
    }

    private Body fabricOpen() throws IOException {
        long startNs = in.readLong();
        int port = in.readInt();
        DmaConfig dma = readDma(in);
        return o -> {
            ManualClock clock = new ManualClock(startNs);
            SoftFabric f = new SoftFabric(clock);
            SoftDevice d;
            try {
                RoceConfig rc = new RoceConfig(List.of(InetAddress.ofLiteral("127.0.0.2")), port, null);
                d = dma == null ? f.addRoceDevice("rxe1", rc) : f.addRoceDevice("rxe1", rc, dma);
            } catch (RuntimeException e) {
                f.close();
                throw e;
            }
            int fh = register(f);
            fabrics.put(fh, f);
            clocks.put(fh, clock);
            fabricDevices.put(fh, d);
            o.writeInt(fh);
            o.writeInt(register(d));
            o.writeUTF(d.name());
            o.writeLong(d.guid());
            o.writeUTF(d.providerName());
        };
    }

    private ScatterGatherEntry readSge(ScatterGatherEntry sge) throws IOException {
        long addr = in.readLong();
        int length = in.readInt();
        int lkey = in.readInt();
        byte kind = in.readByte();
        switch (kind) {
            case SGE_PLAIN -> sge.set(addr, length, lkey);
            case SGE_SHARED -> {
                long segAddr = in.readLong();
                long segLen = in.readLong();
                sge.dma(addr, length, lkey, shm().slice(segAddr, segLen));
            }
            case SGE_BYTES -> {
                byte[] b = new byte[in.readInt()];
                in.readFully(b);
                sge.dma(addr, length, lkey, MemorySegment.ofArray(b));
            }
            default -> throw new IOException("bad sge kind " + kind);
        }
        return sge;
    }

    private SendWorkRequest readSendWr() throws IOException {
        int maxSge = in.readInt();
        SendWorkRequest wr = new SendWorkRequest(maxSge);
        wr.wrId(in.readLong());
        wr.opcode(readEnum(in, WrOpcode.class));
        wr.sendFlags(in.readInt());
        wr.immData(in.readInt());
        int numSge = in.readInt();
        for (int i = 0; i < numSge; i++) {
            readSge(wr.sge(i));
        }
        wr.numSge(numSge);
        wr.remoteAddr(in.readLong());
        wr.rkey(in.readInt());
        wr.compareAdd(in.readLong());
        wr.swap(in.readLong());
        wr.remoteQpn(in.readInt());
        wr.remoteQkey(in.readInt());
        return wr;
    }

    private RecvWorkRequest readRecvWr() throws IOException {
        int maxSge = in.readInt();
        RecvWorkRequest wr = new RecvWorkRequest(maxSge);
        wr.wrId(in.readLong());
        int numSge = in.readInt();
        for (int i = 0; i < numSge; i++) {
            readSge(wr.sge(i));
        }
        wr.numSge(numSge);
        return wr;
    }

    /** The verbs call of a request, run after its arguments are read; writes the results. */
    @FunctionalInterface
    interface Body {
        void run(DataOutputStream o) throws IOException;
    }

}
