// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.cm;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;

import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.spi.CmEventInfo;
import org.rdma4j.verbs.spi.CmEventSink;
import org.rdma4j.verbs.spi.CmIdSpi;
import org.rdma4j.verbs.spi.CmProvider;

/** A CM provider that records what the front asks of it, for testing the front's routing and bookkeeping. */
final class FakeCmProvider implements CmProvider {
    final String name;
    final List<CmAddress> addresses = new ArrayList<>();
    final List<FakeId> ids = new CopyOnWriteArrayList<>();
    final Set<Integer> ports = new HashSet<>();
    CmAddress sourceFor;
    int nextPort = 40_000;
    /** When set, createId throws it (librdmacm on a host without the kernel's rdma_cm: ENODEV). */
    RuntimeException refuse;

    FakeCmProvider(String name, String... addrs) {
        this.name = name;
        Device dev = new FakeDevice(name + "0");
        for (int i = 0; i < addrs.length; i++) {
            addresses.add(new CmAddress(InetAddress.ofLiteral(addrs[i]), dev, 1, i));
        }
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public List<CmAddress> addresses() {
        return addresses;
    }

    @Override
    public CmAddress sourceFor(InetAddress destination) {
        return sourceFor;
    }

    @Override
    public CmIdSpi createId(CmEventSink sink, PortSpace portSpace, QpType qpType) {
        if (refuse != null) {
            throw refuse;
        }
        FakeId id = new FakeId(sink, portSpace);
        ids.add(id);
        return id;
    }

    /** The provider's ID: records calls and lets the test post events through its sink. */
    final class FakeId implements CmIdSpi {
        final CmEventSink sink;
        final PortSpace ps;
        final List<String> calls = new CopyOnWriteArrayList<>();
        SocketAddress local;
        SocketAddress remote;
        volatile boolean closed;
        final List<Object> options = new ArrayList<>();

        FakeId(CmEventSink sink, PortSpace ps) {
            this.sink = sink;
            this.ps = ps;
        }

        @Override
        public void bind(SocketAddress address) {
            if (address instanceof IbSocketAddress ib) {
                local = ib;
                calls.add("bind " + local);
                return;
            }
            InetSocketAddress a = (InetSocketAddress) address;
            int port = a.getPort() == 0 ? nextPort++ : a.getPort();
            synchronized (ports) {
                if (!ports.add(port)) {
                    throw new VerbsException(Errno.EADDRINUSE, "port " + port + " in use");
                }
            }
            local = new InetSocketAddress(a.getAddress(), port);
            calls.add("bind " + local);
        }

        @Override
        public SocketAddress localAddress() {
            return local;
        }

        @Override
        public SocketAddress remoteAddress() {
            return remote;
        }

        @Override
        public void listen(int backlog) {
            calls.add("listen " + backlog);
        }

        @Override
        public void resolveAddr(SocketAddress source, SocketAddress destination, Duration timeout) {
            if (local == null) {
                bind(source);
            }
            remote = destination;
            calls.add("resolveAddr " + (source instanceof InetSocketAddress i ? i.getAddress().getHostAddress() : source)
                    + " " + destination);
            sink.post(CmEventInfo.of(CmEventType.ADDR_RESOLVED, 0, null));
        }

        @Override
        public void resolveRoute(Duration timeout) {
            calls.add("resolveRoute");
            sink.post(CmEventInfo.of(CmEventType.ROUTE_RESOLVED, 0, null));
        }

        @Override
        public Context context() {
            return null;
        }

        @Override
        public int portNum() {
            return 1;
        }

        @Override
        public CmRoute route() {
            return null;
        }

        @Override
        public QueuePair createQp(ProtectionDomain pd, QpInitAttributes attrs) {
            throw new UnsupportedOperationException();
        }

        @Override
        public QueuePair qp() {
            return null;
        }

        @Override
        public void destroyQp() {
            calls.add("destroyQp");
        }

        @Override
        public QpAttributes initQpAttr(QpState state) {
            return new QpAttributes().state(state);
        }

        @Override
        public void connect(ConnParam param) {
            calls.add("connect " + param.privateDataLength());
        }

        @Override
        public void accept(ConnParam param) {
            calls.add("accept");
        }

        @Override
        public void reject(byte[] privateData) {
            calls.add("reject " + privateData.length);
        }

        @Override
        public void disconnect() {
            calls.add("disconnect");
        }

        @Override
        public void establish() {
            calls.add("establish");
        }

        @Override
        public <T> void setOption(CmOption<T> option, T value) {
            options.add(option + "=" + value);
        }

        @Override
        public void close() {
            if (!closed) {
                closed = true;
                if (local instanceof InetSocketAddress i) {
                    synchronized (ports) {
                        ports.remove(i.getPort());
                    }
                }
            }
        }
    }

    record FakeDevice(String name) implements Device {
        @Override
        public long guid() {
            return 1;
        }

        @Override
        public String providerName() {
            return "fake";
        }

        @Override
        public Context open() {
            throw new UnsupportedOperationException();
        }
    }
}
