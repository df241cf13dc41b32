// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.rdma4j.soft.RemoteProtocol.*;

import java.io.DataInputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.SocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.cm.CmAddress;
import org.rdma4j.verbs.cm.CmOption;
import org.rdma4j.verbs.cm.CmRoute;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.spi.CmEventInfo;
import org.rdma4j.verbs.spi.CmEventSink;
import org.rdma4j.verbs.spi.CmIdSpi;
import org.rdma4j.verbs.spi.CmProvider;

/**
 * A CM provider in the remote peer, seen from the test JVM: every {@link CmProvider} and {@link CmIdSpi}
 * call runs on the provider the child hosts for device B ({@link RemoteCmServer}), and the provider's
 * events come back as callbacks inside those calls, to the front's {@link CmEventSink}s here (so the
 * front applies its backlog and routes events as with a provider in this JVM). Device B's contexts, PDs,
 * CQs and QPs are {@link RemoteVerbs} proxies: the same proxy for the same object of the child, so the
 * front's identity checks (a PD on the ID's context) hold.
 *
 * <p>The hosted CM is driven: {@link #progress()} processes what arrived on its QP1; its timers follow the
 * remote fabric's clock, which {@link SoftRemoteTestFabric} moves with the test's.
 */
public final class RemoteCm implements CmProvider, AutoCloseable {
    private final RemotePeer peer;
    private final RemoteVerbs verbs;
    private final int handle;
    private final String name;
    private final Map<Integer, CmEventSink> sinks = new ConcurrentHashMap<>();
    private final AtomicInteger nextSink = new AtomicInteger(1);
    private volatile boolean closed;

    RemoteCm(RemotePeer peer, RemoteVerbs verbs, int fabric, int device, String factory, long seed) {
        this.peer = peer;
        this.verbs = verbs;
        String[] n = new String[1];
        this.handle = peer.call(CM_OPEN, fabric, o -> {
            o.writeInt(device);
            o.writeUTF(factory);
            o.writeLong(seed);
        }, in -> {
            int h = in.readInt();
            n[0] = in.readUTF();
            return h;
        });
        this.name = n[0];
        peer.onCallback(handle, this::callback);
    }

    /** The hosted provider's events: read everything, then hand it to the front. */
    private RemotePeer.Args callback(int kind, DataInputStream in) throws IOException {
        switch (kind) {
            case CB_CM_EVENT -> {
                int sink = in.readInt();
                CmEventInfo info = readEventInfo(in);
                return o -> sink(sink).post(info);
            }
            case CB_CM_CONNECT_REQUEST -> {
                int sink = in.readInt();
                int newId = in.readInt();
                CmEventInfo info = readEventInfo(in);
                return o -> {
                    CmEventSink s = sink(sink).connectRequest(new Id(newId), info);
                    o.writeInt(s == null ? 0 : register(s));
                };
            }
            default -> throw new IOException("unknown callback " + kind + " of the remote CM " + handle);
        }
    }

    private int register(CmEventSink s) {
        int id = nextSink.getAndIncrement();
        sinks.put(id, s);
        return id;
    }

    private CmEventSink sink(int id) {
        CmEventSink s = sinks.get(id);
        if (s == null) {
            throw new IllegalStateException("the remote CM reported to sink " + id + ", which it was never given");
        }
        return s;
    }

    /** {@return whether anything was processed} Lets the hosted (driven) CM process what arrived. */
    public boolean progress() {
        return peer.call(CM_PROGRESS, handle, o -> { }, DataInputStream::readBoolean);
    }

    /** {@return the hosted CM's counters by name} */
    public Map<String, Long> counters() {
        return peer.call(CM_COUNTERS, handle, o -> { }, in -> {
            int n = in.readInt();
            Map<String, Long> m = new LinkedHashMap<>();
            for (int i = 0; i < n; i++) {
                m.put(in.readUTF(), in.readLong());
            }
            return Collections.unmodifiableMap(m);
        });
    }

    /** Stops the hosted CM (its IDs get DEVICE_REMOVAL); idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            peer.run(CM_CLOSE, handle, o -> { });
        } finally {
            peer.onCallback(handle, null);
        }
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public List<CmAddress> addresses() {
        return peer.call(CM_ADDRESSES, handle, o -> { }, in -> {
            int n = in.readInt();
            List<CmAddress> as = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                as.add(readAddress(in));
            }
            return as;
        });
    }

    @Override
    public CmAddress sourceFor(InetAddress destination) {
        return peer.call(CM_SOURCE_FOR, handle, o -> writeInet(o, destination),
                in -> in.readBoolean() ? readAddress(in) : null);
    }

    private CmAddress readAddress(DataInputStream in) throws IOException {
        InetAddress a = readInet(in);
        Device d = verbs.proxy(in.readInt(), Device.class);
        return new CmAddress(a, d, in.readInt(), in.readInt());
    }

    @Override
    public CmIdSpi createId(CmEventSink sink, PortSpace portSpace, QpType qpType) {
        int s = register(sink);
        int h = peer.call(CM_CREATE_ID, handle, o -> {
            o.writeInt(s);
            writeEnum(o, portSpace);
            writeEnum(o, qpType);
        }, DataInputStream::readInt);
        return new Id(h);
    }

    @Override
    public String toString() {
        return name + "@remote";
    }

    /** One provider ID of the hosted CM. */
    private final class Id implements CmIdSpi {
        private final int h;

        Id(int h) {
            this.h = h;
        }

        private void run(int op, RemotePeer.Args args) {
            peer.run(op, h, args);
        }

        @Override
        public void bind(SocketAddress address) {
            run(ID_BIND, o -> writeSocketAddress(o, address));
        }

        @Override
        public SocketAddress localAddress() {
            return peer.call(ID_LOCAL_ADDRESS, h, o -> { }, RemoteProtocol::readSocketAddress);
        }

        @Override
        public SocketAddress remoteAddress() {
            return peer.call(ID_REMOTE_ADDRESS, h, o -> { }, RemoteProtocol::readSocketAddress);
        }

        @Override
        public void listen(int backlog) {
            run(ID_LISTEN, o -> o.writeInt(backlog));
        }

        @Override
        public void resolveAddr(SocketAddress source, SocketAddress destination, Duration timeout) {
            run(ID_RESOLVE_ADDR, o -> {
                writeSocketAddress(o, source);
                writeSocketAddress(o, destination);
                o.writeLong(timeout.toNanos());
            });
        }

        @Override
        public void resolveRoute(Duration timeout) {
            run(ID_RESOLVE_ROUTE, o -> o.writeLong(timeout.toNanos()));
        }

        @Override
        public Context context() {
            return peer.call(ID_CONTEXT, h, o -> { }, in -> {
                int c = in.readInt();
                int d = in.readInt();
                return verbs.context(c, d);
            });
        }

        @Override
        public int portNum() {
            return peer.call(ID_PORT_NUM, h, o -> { }, DataInputStream::readInt);
        }

        @Override
        public CmRoute route() {
            return peer.call(ID_ROUTE, h, o -> { }, RemoteProtocol::readRoute);
        }

        @Override
        public QueuePair createQp(ProtectionDomain pd, QpInitAttributes attrs) {
            int pdH = RemoteVerbs.handleOf(pd);
            int scq = RemoteVerbs.handleOf(attrs.sendCq());
            int rcq = RemoteVerbs.handleOf(attrs.recvCq());
            int srq = RemoteVerbs.handleOf(attrs.srq());
            return peer.call(ID_CREATE_QP, h, o -> {
                o.writeInt(pdH);
                writeEnum(o, attrs.type());
                o.writeInt(scq);
                o.writeInt(rcq);
                o.writeInt(srq);
                writeCap(o, attrs.cap());
                o.writeBoolean(attrs.sqSigAll());
            }, in -> {
                int qp = in.readInt();
                int qpn = in.readInt();
                return verbs.qp(qp, pdH, qpn, attrs.type());
            });
        }

        @Override
        public QueuePair qp() {
            return peer.call(ID_QP, h, o -> { }, in -> {
                int qp = in.readInt();
                if (qp == 0) {
                    return null;
                }
                int qpn = in.readInt();
                QpType type = readEnum(in, QpType.class);
                return verbs.qp(qp, in.readInt(), qpn, type);
            });
        }

        @Override
        public void destroyQp() {
            run(ID_DESTROY_QP, o -> { });
        }

        @Override
        public QpAttributes initQpAttr(QpState state) {
            return peer.call(ID_INIT_QP_ATTR, h, o -> writeEnum(o, state), RemoteProtocol::readQpAttrs);
        }

        @Override
        public void connect(ConnParam param) {
            run(ID_CONNECT, o -> writeConnParam(o, param));
        }

        @Override
        public void accept(ConnParam param) {
            run(ID_ACCEPT, o -> writeConnParam(o, param));
        }

        @Override
        public void reject(byte[] privateData) {
            run(ID_REJECT, o -> writeBytes(o, privateData));
        }

        @Override
        public void disconnect() {
            run(ID_DISCONNECT, o -> { });
        }

        @Override
        public void establish() {
            run(ID_ESTABLISH, o -> { });
        }

        @Override
        public <T> void setOption(CmOption<T> option, T value) {
            run(ID_SET_OPTION, o -> {
                o.writeUTF(option.name());
                switch (value) {
                    case null -> o.writeInt(-1);
                    case Integer i -> {
                        o.writeInt(0);
                        o.writeInt(i);
                    }
                    case Boolean b -> {
                        o.writeInt(1);
                        o.writeBoolean(b);
                    }
                    default -> throw new IllegalArgumentException("a CM option value of type "
                            + value.getClass().getName() + " does not cross to the remote peer");
                }
            });
        }

        @Override
        public void close() {
            run(ID_CLOSE, o -> { });
        }

        @Override
        public String toString() {
            return "cm id #" + h + "@remote";
        }
    }
}
