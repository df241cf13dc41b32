// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.rdma4j.soft.RemoteProtocol.*;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.Set;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.AsyncEventType;
import org.rdma4j.verbs.CoherentBuffer;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.DeviceAttributes;
import org.rdma4j.verbs.Dma;
import org.rdma4j.verbs.DmaDirection;
import org.rdma4j.verbs.DmaSgList;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.PortAttributes;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.ScatterGatherEntry;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.SharedReceiveQueue;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.spi.DmaOps;

/**
 * Proxies of the verbs interfaces whose every call runs on device B in the remote peer
 * ({@link RemotePeerMain}), through {@link RemotePeer#call}. Errors come back as the
 * {@link VerbsException} (same errno, same message) the child's device threw; completions, async events
 * and CQ events come back with their fields copied and their objects mapped to these proxies, so
 * {@code ev.qp() == qp} and {@code cq.channel() == ch} hold as with a local device.
 *
 * <p>Memory is not copied: the test's buffers live in {@link SharedMemory} mapped at the same address in
 * both processes, and a segment crosses as its address and length. Only a scatter/gather entry's own
 * segment that lies outside the shared memory (inline data from a heap array) crosses as its bytes,
 * which is exactly what the verbs copy at post time.
 *
 * <p>A blocking wait ({@link Context#getAsyncEvent}, {@link CompletionChannel#getCqEvent}) runs as a
 * series of waits of at most {@link #WAIT_SLICE} in the child, so the connection is free in between for
 * other threads (a clock advance, a post).
 */
final class RemoteVerbs {
    /** Longest single wait the child does for one call. */
    static final Duration WAIT_SLICE = Duration.ofMillis(10);

    private final RemotePeer peer;
    private final SharedMemory shm;
    private final Map<Integer, Object> proxies = new HashMap<>();
    private final Map<AsyncEvent, Long> eventIds = new IdentityHashMap<>();

    RemoteVerbs(RemotePeer peer) {
        this.peer = peer;
        this.shm = peer.shm();
    }

    private synchronized <T> T remember(int handle, T proxy) {
        proxies.put(handle, proxy);
        return proxy;
    }

    /**
     * The proxy of a context the child made itself (a CM's context of device B), made on first sight.
     *
     * @param handle       the child's context
     * @param deviceHandle its device
     * @return the same proxy for the same handle
     */
    synchronized Context context(int handle, int deviceHandle) {
        if (handle == 0) {
            return null;
        }
        Object p = proxies.get(handle);
        return p != null ? (Context) p : remember(handle, new RemoteContext(handle, proxy(deviceHandle, Device.class)));
    }

    /**
     * The proxy of a QP the child made itself (a CM ID's QP), made on first sight.
     *
     * @param handle   the child's QP
     * @param pdHandle its PD (one of this test's)
     * @param qpNum    its number
     * @param type     its type
     * @return the same proxy for the same handle
     */
    synchronized QueuePair qp(int handle, int pdHandle, int qpNum, QpType type) {
        if (handle == 0) {
            return null;
        }
        Object p = proxies.get(handle);
        return p != null ? (QueuePair) p
                : remember(handle, new RemoteQp(handle, proxy(pdHandle, ProtectionDomain.class), qpNum, type));
    }

    synchronized <T> T proxy(int handle, Class<T> type) {
        if (handle == 0) {
            return null;
        }
        Object p = proxies.get(handle);
        if (p == null) {
            throw new IllegalStateException("the remote peer named object " + handle + ", which has no proxy here");
        }
        return type.cast(p);
    }

    /** @return the child's handle of a proxy, 0 for null; another provider's object cannot cross */
    static int handleOf(Object o) {
        if (o == null) {
            return 0;
        }
        if (o instanceof Remote r) {
            return r.handle();
        }
        throw new IllegalArgumentException("a verbs object of this process (" + o + ") cannot be passed to a"
                + " device in the remote peer");
    }

    /** Every proxy names the child's object by a handle. */
    private interface Remote {
        int handle();
    }

    /** Base of the closable proxies. */
    private abstract class Closable implements Remote, AutoCloseable {
        final int handle;

        Closable(int handle) {
            this.handle = handle;
        }

        @Override
        public int handle() {
            return handle;
        }

        @Override
        public void close() {
            peer.run(CLOSE, handle, o -> { });
        }

        @Override
        public String toString() {
            return getClass().getSimpleName() + "#" + handle + "@remote";
        }
    }

    // ------------------------------------------------------------------ device

    /**
     * @param deviceHandle the child's device
     * @param name         its name
     * @param guid         its node GUID
     * @param provider     its provider name
     * @return the device proxy
     */
    Device device(int deviceHandle, String name, long guid, String provider) {
        return remember(deviceHandle, new RemoteDevice(deviceHandle, name, guid, provider));
    }

    private final class RemoteDevice implements Device, Remote {
        private final int handle;
        private final String name;
        private final long guid;
        private final String provider;

        RemoteDevice(int handle, String name, long guid, String provider) {
            this.handle = handle;
            this.name = name;
            this.guid = guid;
            this.provider = provider;
        }

        @Override
        public int handle() {
            return handle;
        }

        @Override
        public String name() {
            return name;
        }

        @Override
        public long guid() {
            return guid;
        }

        @Override
        public String providerName() {
            return provider;
        }

        @Override
        public Context open() {
            int h = peer.call(DEV_OPEN, handle, o -> { }, DataInputStream::readInt);
            return remember(h, new RemoteContext(h, this));
        }

        @Override
        public String toString() {
            return name + "@remote";
        }
    }

    // ------------------------------------------------------------------ context

    private final class RemoteContext extends Closable implements Context {
        private final Device device;
        private Dma dma;

        RemoteContext(int handle, Device device) {
            super(handle);
            this.device = device;
        }

        @Override
        public Device device() {
            return device;
        }

        @Override
        public DeviceAttributes queryDevice() {
            return peer.call(CTX_QUERY_DEVICE, handle, o -> { }, RemoteProtocol::readDeviceAttrs);
        }

        @Override
        public PortAttributes queryPort(int port) {
            return peer.call(CTX_QUERY_PORT, handle, o -> o.writeInt(port), RemoteProtocol::readPortAttrs);
        }

        @Override
        public Gid queryGid(int port, int index) {
            return peer.call(CTX_QUERY_GID, handle, o -> {
                o.writeInt(port);
                o.writeInt(index);
            }, RemoteProtocol::readGid);
        }

        @Override
        public synchronized Dma dma() {
            if (dma == null) {
                boolean virtual = peer.call(CTX_DMA_VIRTUAL, handle, o -> { }, DataInputStream::readBoolean);
                dma = new Dma(virtual, new RemoteDmaOps());
            }
            return dma;
        }

        @Override
        public ProtectionDomain allocPd() {
            return peer.call(CTX_ALLOC_PD, handle, o -> { }, in -> {
                int h = in.readInt();
                int lkey = in.readInt();
                return remember(h, new RemotePd(h, this, lkey));
            });
        }

        @Override
        public CompletionChannel createCompChannel() {
            int h = peer.call(CTX_CREATE_CHANNEL, handle, o -> { }, DataInputStream::readInt);
            return remember(h, new RemoteChannel(h));
        }

        @Override
        public CompletionQueue createCq(int cqe, CompletionChannel channel, int compVector) {
            int ch = handleOf(channel);
            int h = peer.call(CTX_CREATE_CQ, handle, o -> {
                o.writeInt(cqe);
                o.writeInt(ch);
                o.writeInt(compVector);
            }, DataInputStream::readInt);
            return remember(h, new RemoteCq(h, channel));
        }

        @Override
        public AsyncEvent getAsyncEvent(Duration timeout) {
            long deadline = System.nanoTime() + timeout.toNanos();
            while (true) {
                long left = Math.max(0, deadline - System.nanoTime());
                long slice = Math.min(left, WAIT_SLICE.toNanos());
                AsyncEvent ev = peer.call(CTX_GET_ASYNC, handle, o -> o.writeLong(slice), in -> {
                    if (!in.readBoolean()) {
                        return null;
                    }
                    long id = in.readLong();
                    AsyncEventType type = readEnum(in, AsyncEventType.class);
                    int qp = in.readInt();
                    int cq = in.readInt();
                    int srq = in.readInt();
                    int port = in.readInt();
                    AsyncEvent e = new AsyncEvent(type, proxy(qp, QueuePair.class), proxy(cq, CompletionQueue.class),
                            proxy(srq, SharedReceiveQueue.class), port);
                    synchronized (RemoteVerbs.this) {
                        eventIds.put(e, id);
                    }
                    return e;
                });
                if (ev != null || left == 0) {
                    return ev;
                }
            }
        }

        @Override
        public void ackAsyncEvent(AsyncEvent event) {
            Long id;
            synchronized (RemoteVerbs.this) {
                id = eventIds.remove(event);
            }
            if (id == null) {
                throw new IllegalArgumentException(event + " was not returned by getAsyncEvent of this remote"
                        + " context, or was acknowledged already");
            }
            peer.run(CTX_ACK_ASYNC, handle, o -> o.writeLong(id));
        }
    }

    /**
     * The DMA-mapping calls of a remote context. The remote peer's RoCE device is a virtual-DMA device,
     * whose mappings {@link Dma} answers without calling its ops; a device reached through an IOMMU or
     * bounce buffers would need these forwarded, which the conformance suites (all on virtual devices)
     * never ask for, so they say so instead.
     */
    private static final class RemoteDmaOps implements DmaOps {
        private static UnsupportedOperationException unsupported() {
            return new UnsupportedOperationException("DMA mapping through a bus (IOMMU, bounce buffers) is not"
                    + " forwarded to the remote peer; its RoCE device is virtual-DMA");
        }

        @Override
        public long map(MemorySegment cpu, DmaDirection dir) {
            throw unsupported();
        }

        @Override
        public boolean mappingError(long dmaAddress) {
            throw unsupported();
        }

        @Override
        public void unmap(long dmaAddress, long size, DmaDirection dir) {
            throw unsupported();
        }

        @Override
        public int mapSg(DmaSgList sg, int nents, DmaDirection dir) {
            throw unsupported();
        }

        @Override
        public void unmapSg(DmaSgList sg, int nents, DmaDirection dir) {
            throw unsupported();
        }

        @Override
        public void syncForCpu(long dmaAddress, long size, DmaDirection dir) {
            throw unsupported();
        }

        @Override
        public void syncForDevice(long dmaAddress, long size, DmaDirection dir) {
            throw unsupported();
        }

        @Override
        public CoherentBuffer allocCoherent(long size) {
            throw unsupported();
        }

        @Override
        public void freeCoherent(CoherentBuffer buffer) {
            throw unsupported();
        }
    }

    // ------------------------------------------------------------------ pd, mr

    private final class RemotePd extends Closable implements ProtectionDomain {
        private final Context context;
        private final int localDmaLkey;

        RemotePd(int handle, Context context, int localDmaLkey) {
            super(handle);
            this.context = context;
            this.localDmaLkey = localDmaLkey;
        }

        @Override
        public Context context() {
            return context;
        }

        @Override
        public MemoryRegion regMr(MemorySegment segment, Set<AccessFlag> access) {
            int kind;
            if (!segment.isNative()) {
                kind = 1; // the child registers a heap segment of the same size: the same refusal
            } else if (segment.byteSize() == 0 || shm.contains(segment)) {
                kind = 0;
            } else {
                throw new IllegalArgumentException("memory registered on the remote device must come from the"
                        + " fabric's buffer arena (shared with the remote peer): " + segment);
            }
            return peer.call(PD_REG_MR, handle, o -> {
                o.writeInt(kind);
                o.writeLong(segment.address());
                o.writeLong(segment.byteSize());
                writeAccess(o, access);
            }, in -> {
                int h = in.readInt();
                long addr = in.readLong();
                long len = in.readLong();
                int lkey = in.readInt();
                int rkey = in.readInt();
                Set<AccessFlag> acc = readAccess(in);
                return remember(h, new RemoteMr(h, this, segment, addr, len, lkey, rkey, acc));
            });
        }

        @Override
        public int localDmaLkey() {
            return localDmaLkey;
        }

        @Override
        public QueuePair createQp(QpInitAttributes attrs) {
            int scq = handleOf(attrs.sendCq());
            int rcq = handleOf(attrs.recvCq());
            int srq = handleOf(attrs.srq());
            return peer.call(PD_CREATE_QP, handle, o -> {
                writeEnum(o, attrs.type());
                o.writeInt(scq);
                o.writeInt(rcq);
                o.writeInt(srq);
                writeCap(o, attrs.cap());
                o.writeBoolean(attrs.sqSigAll());
            }, in -> {
                int h = in.readInt();
                int qpn = in.readInt();
                return remember(h, new RemoteQp(h, this, qpn, attrs.type()));
            });
        }

        @Override
        public SharedReceiveQueue createSrq(int maxWr, int maxSge) {
            int h = peer.call(PD_CREATE_SRQ, handle, o -> {
                o.writeInt(maxWr);
                o.writeInt(maxSge);
            }, DataInputStream::readInt);
            return remember(h, new RemoteSrq(h, this));
        }

        @Override
        public AddressHandle createAh(AhAttributes attrs) {
            int h = peer.call(PD_CREATE_AH, handle, o -> writeAh(o, attrs), DataInputStream::readInt);
            return remember(h, new RemoteAh(h, this));
        }
    }

    private final class RemoteMr extends Closable implements MemoryRegion {
        private final ProtectionDomain pd;
        private final MemorySegment segment;
        private final long address;
        private final long length;
        private final int lkey;
        private final int rkey;
        private final Set<AccessFlag> access;

        RemoteMr(int handle, ProtectionDomain pd, MemorySegment segment, long address, long length, int lkey,
                 int rkey, Set<AccessFlag> access) {
            super(handle);
            this.pd = pd;
            this.segment = segment;
            this.address = address;
            this.length = length;
            this.lkey = lkey;
            this.rkey = rkey;
            this.access = access;
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
            return lkey;
        }

        @Override
        public int rkey() {
            return rkey;
        }

        @Override
        public Set<AccessFlag> access() {
            return access;
        }
    }

    // ------------------------------------------------------------------ cq, channel

    private final class RemoteCq extends Closable implements CompletionQueue {
        private final CompletionChannel channel;

        RemoteCq(int handle, CompletionChannel channel) {
            super(handle);
            this.channel = channel;
        }

        @Override
        public int capacity() {
            return peer.call(CQ_CAPACITY, handle, o -> { }, DataInputStream::readInt);
        }

        @Override
        public CompletionChannel channel() {
            return channel;
        }

        @Override
        public int poll(WorkCompletion[] wcs, int max) {
            return peer.call(CQ_POLL, handle, o -> {
                o.writeBoolean(false);
                o.writeInt(wcs.length);
                o.writeInt(max);
            }, in -> readPolled(in, wcs));
        }

        @Override
        public boolean poll(WorkCompletion wc) {
            return peer.call(CQ_POLL, handle, o -> {
                o.writeBoolean(true);
                o.writeInt(1);
                o.writeInt(1);
            },
                    in -> readPolled(in, new WorkCompletion[] {wc})) == 1;
        }

        private int readPolled(DataInputStream in, WorkCompletion[] wcs) throws IOException {
            int n = in.readInt();
            for (int i = 0; i < n; i++) {
                readWc(in, wcs[i]);
            }
            return n;
        }

        @Override
        public void reqNotify(boolean solicitedOnly) {
            peer.run(CQ_REQ_NOTIFY, handle, o -> o.writeBoolean(solicitedOnly));
        }

        @Override
        public void ackEvents(int count) {
            peer.run(CQ_ACK_EVENTS, handle, o -> o.writeInt(count));
        }

        @Override
        public void resize(int cqe) {
            peer.run(CQ_RESIZE, handle, o -> o.writeInt(cqe));
        }
    }

    private final class RemoteChannel extends Closable implements CompletionChannel {
        RemoteChannel(int handle) {
            super(handle);
        }

        @Override
        public CompletionQueue getCqEvent(Duration timeout) {
            long deadline = System.nanoTime() + timeout.toNanos();
            while (true) {
                long left = Math.max(0, deadline - System.nanoTime());
                long slice = Math.min(left, WAIT_SLICE.toNanos());
                int cq = peer.call(CH_GET_EVENT, handle, o -> o.writeLong(slice), DataInputStream::readInt);
                if (cq != 0 || left == 0) {
                    return proxy(cq, CompletionQueue.class);
                }
            }
        }
    }

    // ------------------------------------------------------------------ qp, srq, ah

    private void writeSge(DataOutputStream o, ScatterGatherEntry sge) throws IOException {
        o.writeLong(sge.addr());
        o.writeInt(sge.length());
        o.writeInt(sge.lkey());
        MemorySegment seg = sge.segment();
        if (seg == null) {
            o.writeByte(SGE_PLAIN);
        } else if (shm.contains(seg)) {
            o.writeByte(SGE_SHARED);
            o.writeLong(seg.address());
            o.writeLong(seg.byteSize());
        } else {
            o.writeByte(SGE_BYTES);
            byte[] b = seg.toArray(ValueLayout.JAVA_BYTE);
            o.writeInt(b.length);
            o.write(b);
        }
    }

    private void writeSendWr(DataOutputStream o, SendWorkRequest wr) throws IOException {
        o.writeInt(wr.maxSge());
        o.writeLong(wr.wrId());
        writeEnum(o, wr.opcode());
        o.writeInt(wr.sendFlags());
        o.writeInt(wr.immData());
        o.writeInt(wr.numSge());
        for (int i = 0; i < wr.numSge(); i++) {
            writeSge(o, wr.sge(i));
        }
        o.writeLong(wr.remoteAddr());
        o.writeInt(wr.rkey());
        o.writeLong(wr.compareAdd());
        o.writeLong(wr.swap());
        o.writeInt(wr.remoteQpn());
        o.writeInt(wr.remoteQkey());
        o.writeInt(handleOf(wr.ah()));
    }

    private void writeRecvWr(DataOutputStream o, RecvWorkRequest wr) throws IOException {
        o.writeInt(wr.maxSge());
        o.writeLong(wr.wrId());
        o.writeInt(wr.numSge());
        for (int i = 0; i < wr.numSge(); i++) {
            writeSge(o, wr.sge(i));
        }
    }

    private boolean postRecv(int op, int handle, RecvWorkRequest wr) {
        return peer.call(op, handle, o -> writeRecvWr(o, wr), in -> {
            boolean posted = in.readBoolean();
            wr.postError(readEnum(in, Errno.class));
            return posted;
        });
    }

    private final class RemoteQp extends Closable implements QueuePair {
        private final ProtectionDomain pd;
        private final int qpNum;
        private final QpType type;

        RemoteQp(int handle, ProtectionDomain pd, int qpNum, QpType type) {
            super(handle);
            this.pd = pd;
            this.qpNum = qpNum;
            this.type = type;
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
        public ProtectionDomain pd() {
            return pd;
        }

        @Override
        public QpCapabilities cap() {
            return peer.call(QP_CAP, handle, o -> { }, RemoteProtocol::readCap);
        }

        @Override
        public QpState state() {
            return peer.call(QP_STATE, handle, o -> { }, in -> readEnum(in, QpState.class));
        }

        @Override
        public void modify(QpAttributes attrs) {
            peer.run(QP_MODIFY, handle, o -> writeQpAttrs(o, attrs));
        }

        @Override
        public QpAttributes query() {
            return peer.call(QP_QUERY, handle, o -> { }, RemoteProtocol::readQpAttrs);
        }

        @Override
        public boolean postSend(SendWorkRequest wr) {
            return post(new SendWorkRequest[] {wr}, 1, true) == 1;
        }

        @Override
        public int postSend(SendWorkRequest[] wrs, int count) {
            return post(wrs, count, false);
        }

        private int post(SendWorkRequest[] wrs, int count, boolean single) {
            // The whole array crosses (null entries as absent), so the child's device sees what a local one
            // would, a count beyond the array included.
            return peer.call(QP_POST_SEND, handle, o -> {
                o.writeBoolean(single);
                o.writeInt(count);
                o.writeInt(wrs.length);
                for (SendWorkRequest wr : wrs) {
                    o.writeBoolean(wr != null);
                    if (wr != null) {
                        writeSendWr(o, wr);
                    }
                }
            }, in -> {
                int posted = in.readInt();
                for (SendWorkRequest wr : wrs) {
                    Errno e = readEnum(in, Errno.class);
                    if (wr != null) {
                        wr.postError(e);
                    }
                }
                return posted;
            });
        }

        @Override
        public boolean postRecv(RecvWorkRequest wr) {
            return RemoteVerbs.this.postRecv(QP_POST_RECV, handle, wr);
        }

        @Override
        public void attachMcast(Gid mgid, int mlid) {
            peer.run(QP_ATTACH, handle, o -> {
                writeGid(o, mgid);
                o.writeInt(mlid);
            });
        }

        @Override
        public void detachMcast(Gid mgid, int mlid) {
            peer.run(QP_DETACH, handle, o -> {
                writeGid(o, mgid);
                o.writeInt(mlid);
            });
        }

        @Override
        public String toString() {
            return "qp 0x" + Integer.toHexString(qpNum) + "@remote";
        }
    }

    private final class RemoteSrq extends Closable implements SharedReceiveQueue {
        private final ProtectionDomain pd;

        RemoteSrq(int handle, ProtectionDomain pd) {
            super(handle);
            this.pd = pd;
        }

        @Override
        public ProtectionDomain pd() {
            return pd;
        }

        @Override
        public int maxWr() {
            return peer.call(SRQ_MAX_WR, handle, o -> { }, DataInputStream::readInt);
        }

        @Override
        public int maxSge() {
            return peer.call(SRQ_MAX_SGE, handle, o -> { }, DataInputStream::readInt);
        }

        @Override
        public int limit() {
            return peer.call(SRQ_LIMIT, handle, o -> { }, DataInputStream::readInt);
        }

        @Override
        public void armLimit(int limit) {
            peer.run(SRQ_ARM, handle, o -> o.writeInt(limit));
        }

        @Override
        public boolean postRecv(RecvWorkRequest wr) {
            return RemoteVerbs.this.postRecv(SRQ_POST_RECV, handle, wr);
        }
    }

    private final class RemoteAh extends Closable implements AddressHandle {
        private final ProtectionDomain pd;

        RemoteAh(int handle, ProtectionDomain pd) {
            super(handle);
            this.pd = pd;
        }

        @Override
        public ProtectionDomain pd() {
            return pd;
        }

        @Override
        public AhAttributes attributes() {
            return peer.call(AH_ATTRIBUTES, handle, o -> { }, RemoteProtocol::readAh);
        }
    }
}
